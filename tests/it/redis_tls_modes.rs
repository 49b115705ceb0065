//! A TLS Redis Cluster and TLS Sentinels with a private CA that require
//! client certificates (harness `RedisCluster::start_tls` /
//! `RedisSentinel::start_tls`, certificates made at run time by the
//! harness's `Pki`): what redis-rs's clients need to reach them. The PEM
//! files must be given to the client builders (`ClusterClientBuilder::certs`,
//! `SentinelClientBuilder::set_client_to_redis_certificates`): TLS
//! parameters carried by a seed's or a sentinel's `ConnectionInfo` (the way
//! the standalone pool gets `redis.tls_*`) never reach the cluster nodes or
//! the master the sentinels name. deadpool-redis 0.23's cluster and
//! sentinel managers take only those `ConnectionInfo`s, which is why
//! shared/src/redis/managers.rs builds the pools from the clients instead
//! (should these two "not used" tests start failing, deadpool-redis's own
//! managers could carry the files again).

use caucus_harness::{Pki, RedisCluster, RedisSentinel};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::sentinel::{
    SentinelClient, SentinelClientBuilder, SentinelNodeConnectionInfo, SentinelServerType,
};
use redis::{ClientTlsConfig, ConnectionInfo, IntoConnectionInfo, TlsCertificates, TlsMode};

/// The CA and the client certificate, as redis-rs takes them.
fn client_certs(pki: &Pki) -> TlsCertificates {
    TlsCertificates {
        client_tls: Some(ClientTlsConfig {
            client_cert: pki.read("client.pem"),
            client_key: pki.read("client-key.pem"),
        }),
        root_cert: Some(pki.read("ca.pem")),
    }
}

/// `url` parsed the way the standalone pool does with `redis.tls_*`: the CA
/// and client certificate in its TLS parameters.
fn carrying_certs(pki: &Pki, url: &str) -> ConnectionInfo {
    let info = url.into_connection_info().unwrap();
    redis::Client::build_with_tls(info, client_certs(pki))
        .unwrap()
        .get_connection_info()
        .clone()
}

fn seeds(cluster: &RedisCluster) -> Vec<String> {
    cluster.url().split(',').map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_client_given_the_certificates_reaches_every_master() {
    let pki = Pki::generate_for_nodes();
    let cluster = pki.redis_cluster();
    assert!(cluster.url().starts_with("rediss://"), "{}", cluster.url());
    let client = ClusterClientBuilder::new(seeds(&cluster))
        .certs(client_certs(&pki))
        .build()
        .expect("cluster client");
    let mut conn = client
        .get_async_connection()
        .await
        .expect("connect over TLS with the private CA and a client certificate");
    let keys = cluster.keys_on_every_master("caucus:tls:");
    assert_eq!(keys.len(), 3);
    for k in &keys {
        let () = redis::cmd("SET")
            .arg(k)
            .arg(format!("v-{k}"))
            .query_async(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("SET {k}: {e}"));
    }
    for k in &keys {
        let v: String = redis::cmd("GET")
            .arg(k)
            .query_async(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("GET {k}: {e}"));
        assert_eq!(v, format!("v-{k}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_parameters_carried_by_the_seed_nodes_are_not_used() {
    let pki = Pki::generate_for_nodes();
    let cluster = pki.redis_cluster();
    let infos = seeds(&cluster)
        .iter()
        .map(|u| carrying_certs(&pki, u))
        .collect::<Vec<_>>();
    // What deadpool-redis's cluster manager does with its seed nodes.
    let client = ClusterClient::new(infos).expect("cluster client");
    let e = match client.get_async_connection().await {
        Ok(_) => panic!(
            "the seeds' TLS parameters reached the nodes: deadpool-redis's cluster pool could now carry redis.tls_*"
        ),
        Err(e) => e.to_string(),
    };
    assert_tls_refused(&e);
}

/// `e` is the failure to verify a server by the system's roots.
fn assert_tls_refused(e: &str) {
    assert!(
        e.contains("UnknownIssuer") || e.contains("certificate"),
        "expected a TLS verification failure, got: {e}"
    );
}

fn sentinels(group: &RedisSentinel) -> Vec<String> {
    group.url().split(',').map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_client_given_the_certificates_reaches_the_master() {
    let pki = Pki::generate_for_nodes();
    let group = pki.redis_sentinel();
    assert!(group.url().starts_with("rediss://"), "{}", group.url());
    let addrs = sentinels(&group)
        .iter()
        .map(|u| u.as_str().into_connection_info().unwrap().addr().clone())
        .collect::<Vec<_>>();
    let mut client =
        SentinelClientBuilder::new(addrs, group.master_name(), SentinelServerType::Master)
            .unwrap()
            .set_client_to_sentinel_certificates(client_certs(&pki))
            .set_client_to_redis_tls_mode(TlsMode::Secure)
            .set_client_to_redis_certificates(client_certs(&pki))
            .build()
            .expect("sentinel client");
    let mut conn = client
        .get_async_connection()
        .await
        .expect("the master over TLS with the private CA and a client certificate");
    let () = redis::cmd("SET")
        .arg("caucus:tls:sentinel")
        .arg("v")
        .query_async(&mut conn)
        .await
        .expect("SET on the master");
    let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut conn).await.unwrap();
    assert_eq!(
        role.first(),
        Some(&redis::Value::BulkString(b"master".to_vec()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_parameters_carried_by_the_sentinels_do_not_reach_the_master() {
    let pki = Pki::generate_for_nodes();
    let group = pki.redis_sentinel();
    let infos = sentinels(&group)
        .iter()
        .map(|u| carrying_certs(&pki, u))
        .collect::<Vec<_>>();
    // What deadpool-redis's sentinel manager does: the sentinels' infos
    // and a TLS mode for the master, no certificates.
    let mut client = SentinelClient::build(
        infos,
        group.master_name(),
        Some(SentinelNodeConnectionInfo::default().set_tls_mode(TlsMode::Secure)),
        SentinelServerType::Master,
    )
    .expect("sentinel client");
    // The sentinels answer (their infos carry the certificates)...
    let mut sentinel = client
        .get_sentinel_client()
        .expect("a sentinel over TLS")
        .get_multiplexed_async_connection()
        .await
        .expect("a sentinel connection");
    let addr: Vec<String> = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(group.master_name())
        .query_async(&mut sentinel)
        .await
        .expect("the sentinel names the master");
    assert_eq!(addr.len(), 2, "{addr:?}");
    // ...but the master they name is reached without them.
    let e = match client.get_async_connection().await {
        Ok(_) => panic!(
            "the sentinels' TLS parameters reached the master: deadpool-redis's sentinel pool could now carry redis.tls_*"
        ),
        Err(e) => e.to_string(),
    };
    assert_tls_refused(&e);
}
