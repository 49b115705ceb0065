//! A TLS Redis Cluster and TLS Sentinels with a private CA that require
//! client certificates (harness `RedisCluster::start_tls` /
//! `RedisSentinel::start_tls`, certificates made at run time with rcgen):
//! what redis-rs's clients need to reach them. The PEM files must be given
//! to the client builders (`ClusterClientBuilder::certs`,
//! `SentinelClientBuilder::set_client_to_redis_certificates`): TLS
//! parameters carried by a seed's or a sentinel's `ConnectionInfo` (the way
//! the standalone pool gets `redis.tls_*`) never reach the cluster nodes or
//! the master the sentinels name. deadpool-redis 0.23's cluster and
//! sentinel managers take only those `ConnectionInfo`s, which is why
//! shared/src/redis/managers.rs builds the pools from the clients instead
//! (should these two "not used" tests start failing, deadpool-redis's own
//! managers could carry the files again).

use std::path::PathBuf;

use caucus_harness::{RedisCluster, RedisSentinel};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::sentinel::{
    SentinelClient, SentinelClientBuilder, SentinelNodeConnectionInfo, SentinelServerType,
};
use redis::{ClientTlsConfig, ConnectionInfo, IntoConnectionInfo, TlsCertificates, TlsMode};

/// A CA, the certificate every node shows (as server and, on the cluster
/// bus, as client) and a client certificate, as PEM files. A copy of the
/// idea of `tls.rs`'s `Pki` with a node certificate that has both usages.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn generate() -> Pki {
        let dir = tempfile::Builder::new()
            .prefix("caucus-redis-tls-")
            .tempdir()
            .expect("tempdir");
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name
            .push(DnType::CommonName, "caucus test CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let write = |name: &str, pem: String| {
            std::fs::write(dir.path().join(name), pem).expect("write pem");
        };
        let leaf = |name: &str, file: &str, sans: &[&str], usages: Vec<ExtendedKeyUsagePurpose>| {
            let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
            let mut p = CertificateParams::new(sans).unwrap();
            p.distinguished_name.push(DnType::CommonName, name);
            p.key_usages = vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment,
            ];
            p.extended_key_usages = usages;
            let key = KeyPair::generate().unwrap();
            let cert = p.signed_by(&key, &ca).unwrap();
            write(&format!("{file}.pem"), cert.pem());
            write(&format!("{file}-key.pem"), key.serialize_pem());
        };
        leaf(
            "caucus test redis node",
            "node",
            &["127.0.0.1", "localhost"],
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        );
        leaf(
            "caucus test client",
            "client",
            &["caucus-client"],
            vec![ExtendedKeyUsagePurpose::ClientAuth],
        );
        write("ca.pem", ca.pem());
        Pki { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).expect("read pem")
    }

    /// The CA and the client certificate, as redis-rs takes them.
    fn client_certs(&self) -> TlsCertificates {
        TlsCertificates {
            client_tls: Some(ClientTlsConfig {
                client_cert: self.read("client.pem"),
                client_key: self.read("client-key.pem"),
            }),
            root_cert: Some(self.read("ca.pem")),
        }
    }

    fn sentinel(&self) -> RedisSentinel {
        RedisSentinel::start_tls(
            &self.path("ca.pem"),
            &self.path("node.pem"),
            &self.path("node-key.pem"),
        )
    }

    /// `url` parsed the way the standalone pool does with `redis.tls_*`:
    /// the CA and client certificate in its TLS parameters.
    fn carrying_certs(&self, url: &str) -> ConnectionInfo {
        let info = url.into_connection_info().unwrap();
        redis::Client::build_with_tls(info, self.client_certs())
            .unwrap()
            .get_connection_info()
            .clone()
    }

    fn cluster(&self) -> RedisCluster {
        RedisCluster::start_tls(
            &self.path("ca.pem"),
            &self.path("node.pem"),
            &self.path("node-key.pem"),
        )
    }
}

fn seeds(cluster: &RedisCluster) -> Vec<String> {
    cluster.url().split(',').map(str::to_string).collect()
}

/// Keys whose slots are served by every master (so a command on each
/// reaches every node's TLS port).
fn keys_on_every_master(cluster: &RedisCluster) -> Vec<String> {
    let mut keys = Vec::new();
    let mut masters = std::collections::BTreeSet::new();
    for i in 0.. {
        let key = format!("caucus:tls:{i}");
        if masters.insert(cluster.master_for(&key)) {
            keys.push(key);
        }
        if masters.len() == cluster.masters().len() {
            return keys;
        }
        assert!(i < 10_000, "no key found for every master");
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_client_given_the_certificates_reaches_every_master() {
    let pki = Pki::generate();
    let cluster = pki.cluster();
    assert!(cluster.url().starts_with("rediss://"), "{}", cluster.url());
    let client = ClusterClientBuilder::new(seeds(&cluster))
        .certs(pki.client_certs())
        .build()
        .expect("cluster client");
    let mut conn = client
        .get_async_connection()
        .await
        .expect("connect over TLS with the private CA and a client certificate");
    let keys = keys_on_every_master(&cluster);
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
    let pki = Pki::generate();
    let cluster = pki.cluster();
    let infos = seeds(&cluster)
        .iter()
        .map(|u| pki.carrying_certs(u))
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
    let pki = Pki::generate();
    let group = pki.sentinel();
    assert!(group.url().starts_with("rediss://"), "{}", group.url());
    let addrs = sentinels(&group)
        .iter()
        .map(|u| u.as_str().into_connection_info().unwrap().addr().clone())
        .collect::<Vec<_>>();
    let mut client =
        SentinelClientBuilder::new(addrs, group.master_name(), SentinelServerType::Master)
            .unwrap()
            .set_client_to_sentinel_certificates(pki.client_certs())
            .set_client_to_redis_tls_mode(TlsMode::Secure)
            .set_client_to_redis_certificates(pki.client_certs())
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
    let pki = Pki::generate();
    let group = pki.sentinel();
    let infos = sentinels(&group)
        .iter()
        .map(|u| pki.carrying_certs(u))
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
