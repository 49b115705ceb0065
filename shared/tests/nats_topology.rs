//! Stream, KV and consumer set-up on a real nats-server: concurrent
//! start-ups must all succeed, and a changed config is applied.

use std::time::Duration;

use async_nats::jetstream::{self, stream::RetentionPolicy};
use caucus_harness::Nats;
use caucus_shared::nats::{self, topology};
use caucus_shared::subjects::{StreamKind, Subjects};
use caucus_shared::Config;

fn config_for(server: &Nats) -> Config {
    let mut cfg = Config::default();
    cfg.nats.url = server.url();
    cfg.nats.connect_attempts = 3;
    cfg
}

async fn setup_once(cfg: &Config, subjects: &Subjects) -> anyhow::Result<()> {
    // A separate connection per "service", as in production.
    let client = nats::connect(&cfg.nats, "topology-test").await?;
    let js = jetstream::new(client);
    nats::ensure_streams(&js, subjects, cfg).await?;
    nats::ensure_kv(&js, subjects, "workflows", 5, Duration::ZERO, 1).await?;
    nats::ensure_task_consumer(&js, subjects, "valuation", Duration::from_secs(30), 5).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_concurrent_setups_on_a_fresh_server_all_succeed() -> anyhow::Result<()> {
    let server = Nats::start();
    let cfg = config_for(&server);
    let subjects = Subjects::new(cfg.subject_prefix.clone());
    let results = futures::future::join_all((0..5).map(|_| setup_once(&cfg, &subjects))).await;
    for (i, r) in results.into_iter().enumerate() {
        r.map_err(|e| anyhow::anyhow!("setup #{i} failed: {e}"))?;
    }

    let js = jetstream::new(nats::connect(&cfg.nats, "check").await?);
    for kind in StreamKind::ALL {
        let mut s = js.get_stream(subjects.stream(kind)).await?;
        let c = s.info().await?.config.clone();
        assert_eq!(c.subjects, subjects.stream_subjects(kind), "{kind:?}");
        assert_eq!(c.duplicate_window, Duration::from_secs(120), "{kind:?}");
        let want = if kind == StreamKind::Tasks {
            RetentionPolicy::WorkQueue
        } else {
            RetentionPolicy::Limits
        };
        assert_eq!(c.retention, want, "{kind:?}");
    }
    let mut dlq = js.get_stream("CAUCUS_DLQ").await?;
    assert_eq!(
        dlq.info().await?.config.max_age,
        Duration::from_secs(7 * 24 * 3600)
    );
    let mut consumer = js
        .get_stream("CAUCUS_TASKS")
        .await?
        .get_consumer::<jetstream::consumer::pull::Config>("workers-valuation")
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let info = consumer.info().await?;
    assert_eq!(info.config.filter_subject, "caucus.tasks.valuation");
    assert_eq!(info.config.max_deliver, 5);
    let kv = js.get_key_value("caucus_workflows").await?;
    assert_eq!(kv.status().await?.history(), 5);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_call_with_changed_config_updates() -> anyhow::Result<()> {
    let server = Nats::start();
    let mut cfg = config_for(&server);
    let subjects = Subjects::new("acme");
    let js = jetstream::new(nats::connect(&cfg.nats, "update-test").await?);

    nats::ensure_streams(&js, &subjects, &cfg).await?;
    nats::ensure_kv(&js, &subjects, "debates", 1, Duration::ZERO, 1).await?;
    nats::ensure_task_consumer(&js, &subjects, "BRK.B", Duration::from_secs(30), 3).await?;

    cfg.nats.stream_max_age = Duration::from_secs(3600);
    cfg.nats.dlq_max_age = Duration::from_secs(600);
    cfg.nats.stream_max_bytes = 64 * 1024 * 1024;
    nats::ensure_streams(&js, &subjects, &cfg).await?;
    let kv = nats::ensure_kv(&js, &subjects, "debates", 10, Duration::from_secs(60), 1).await?;
    nats::ensure_task_consumer(&js, &subjects, "BRK.B", Duration::from_secs(45), 7).await?;

    let mut findings = js.get_stream("ACME_FINDINGS").await?;
    let c = findings.info().await?.config.clone();
    assert_eq!(c.max_age, Duration::from_secs(3600));
    assert_eq!(c.max_bytes, 64 * 1024 * 1024);
    assert_eq!(c.subjects, vec!["acme.findings.>".to_string()]);
    let mut dlq = js.get_stream("ACME_DLQ").await?;
    assert_eq!(dlq.info().await?.config.max_age, Duration::from_secs(600));
    let status = kv.status().await?;
    assert_eq!(status.history(), 10);
    assert_eq!(status.max_age(), Duration::from_secs(60));
    let name = topology::task_consumer_name("BRK.B");
    assert_eq!(name, "workers-BRK~2EB");
    let mut consumer = js
        .get_stream("ACME_TASKS")
        .await?
        .get_consumer::<jetstream::consumer::pull::Config>(&name)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let info = consumer.info().await?;
    assert_eq!(info.config.ack_wait, Duration::from_secs(45));
    assert_eq!(info.config.max_deliver, 7);
    assert_eq!(info.config.filter_subject, "acme.tasks.BRK~2EB");
    Ok(())
}

#[tokio::test]
async fn the_dlq_window_never_exceeds_a_short_max_age() {
    let mut cfg = Config::default();
    cfg.nats.stream_max_age = Duration::from_secs(30);
    let c = topology::stream_config(&Subjects::default(), StreamKind::Events, &cfg);
    assert_eq!(c.duplicate_window, Duration::from_secs(30));
}

/// A binder (worker, facilitator, correlator) never creates: while a
/// consumer or bucket is missing it fails naming it and what creates it;
/// once the administrator ran, it binds to exactly that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binders_wait_for_what_the_administrator_creates() -> anyhow::Result<()> {
    use caucus_shared::nats::{admin, bind, consumers};

    let server = Nats::start();
    let mut cfg = config_for(&server);
    // The administrator's settings are the ones the consumers get.
    cfg.worker.max_deliver = 5;
    let subjects = Subjects::new("acme");
    let js = jetstream::new(nats::connect(&cfg.nats, "bind-test").await?);
    let short = bind::BindBudget {
        total: Duration::from_millis(300),
        max_pause: Duration::from_millis(100),
    };
    let spec = consumers::task_consumer(&subjects, "valuation", Duration::from_secs(30), 5);

    let err = bind::streams(&js, &subjects, short).await.unwrap_err();
    assert!(err.to_string().contains("stream ACME_"), "{err}");
    assert!(err.to_string().contains("`caucus init`"), "{err}");
    let err = bind::consumer(&js, &spec, short).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("consumer workers-valuation on ACME_TASKS does not exist"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("caucus init --agent-types valuation"),
        "{err}"
    );
    // Binding created nothing.
    assert!(js.get_stream("ACME_TASKS").await.is_err());

    nats::ensure_streams(&js, &subjects, &cfg).await?;
    let err = bind::consumer(&js, &spec, short).await.unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    let err = bind::kv(&js, &subjects, "debates", short)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("kv bucket acme_debates does not exist"),
        "{err}"
    );

    let done = admin::everything(&js, &subjects, &cfg, &["valuation".to_string()]).await?;
    assert!(done
        .consumers
        .contains(&"workers-valuation on ACME_TASKS".to_string()));
    bind::streams(&js, &subjects, short).await?;
    let mut bound = bind::consumer(&js, &spec, short).await?;
    let info = bound.info().await?;
    assert_eq!(info.config.filter_subject, "acme.tasks.valuation");
    assert_eq!(info.config.max_deliver, 5);
    for b in ["debates", "credibility", "facilitator", "correlations"] {
        bind::kv(&js, &subjects, b, short).await?;
    }
    for spec in consumers::fixed(&subjects, &cfg) {
        bind::consumer(&js, &spec, short).await?;
    }
    Ok(())
}
