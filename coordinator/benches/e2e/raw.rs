//! The ceiling: a bare JetStream task round trip with no caucus code in it.
//!
//! A "dispatcher" publishes tasks (awaiting the stream's ack) to a
//! work-queue stream and keeps `in_flight` outstanding; a "worker" pulls
//! each, acks it and publishes a result (awaiting the ack) to a second
//! stream; the dispatcher consumes the results, acks them and publishes the
//! next task. Both are file-backed like caucus's streams, replicated as
//! caucus's would be on the same servers (1 on one server, 3 on a 3-node
//! cluster), and each side has its own connection, as separate processes
//! would.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy, stream};
use bytes::Bytes;
use futures::StreamExt;

/// Round trips per second on streams of `replicas` replicas; `url` is one
/// server or a cluster's comma-separated seed list.
pub async fn round_trip(url: &str, total: usize, in_flight: usize, replicas: usize) -> Result<f64> {
    let d_client = crate::support::connect(url).await?;
    let w_client = crate::support::connect(url).await?;
    let djs = jetstream::new(d_client);
    let wjs = jetstream::new(w_client);
    let tasks = djs
        .create_stream(stream::Config {
            name: "RAW_TASKS".into(),
            subjects: vec!["raw.tasks".into()],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            num_replicas: replicas,
            ..Default::default()
        })
        .await?;
    let results = djs
        .create_stream(stream::Config {
            name: "RAW_RESULTS".into(),
            subjects: vec!["raw.results".into()],
            storage: stream::StorageType::File,
            num_replicas: replicas,
            ..Default::default()
        })
        .await?;
    let task_consumer = tasks
        .create_consumer(pull::Config {
            durable_name: Some("raw-workers".into()),
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        })
        .await?;
    let result_consumer = results
        .create_consumer(pull::Config {
            durable_name: Some("raw-dispatcher".into()),
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        })
        .await?;
    // A body the size of a real TaskDispatch (~450 bytes of JSON).
    let body = Bytes::from(vec![b'x'; 450]);

    let worker = {
        let body = body.clone();
        tokio::spawn(async move {
            let msgs = task_consumer.messages().await?;
            msgs.for_each_concurrent(in_flight, |m| {
                let wjs = wjs.clone();
                let body = body.clone();
                async move {
                    let Ok(m) = m else { return };
                    let _ = m.ack().await;
                    if let Ok(ack) = wjs.publish("raw.results", body).await {
                        let _ = ack.await;
                    }
                }
            })
            .await;
            anyhow::Ok(())
        })
    };

    let t0 = Instant::now();
    let mut sent = 0usize;
    let mut acks = Vec::new();
    while sent < in_flight.min(total) {
        acks.push(djs.publish("raw.tasks", body.clone()).await?);
        sent += 1;
    }
    for a in acks.drain(..) {
        a.await?;
    }
    let mut results = result_consumer.messages().await?;
    let mut done = 0usize;
    let mut pending = futures::stream::FuturesUnordered::new();
    while done < total {
        let m = tokio::time::timeout(Duration::from_secs(30), results.next())
            .await
            .context("raw round trip stalled")?
            .context("result stream ended")?
            .map_err(|e| anyhow::anyhow!("result: {e}"))?;
        m.ack().await.map_err(|e| anyhow::anyhow!("ack: {e}"))?;
        done += 1;
        if sent < total {
            pending.push(std::future::IntoFuture::into_future(
                djs.publish("raw.tasks", body.clone()).await?,
            ));
            sent += 1;
        }
        // Reap publish acks that are already in without blocking.
        while let Some(Some(r)) = futures::FutureExt::now_or_never(pending.next()) {
            r?;
        }
    }
    let elapsed = t0.elapsed();
    while let Some(r) = pending.next().await {
        r?;
    }
    worker.abort();
    if done != total {
        bail!("raw round trip: {done} of {total}");
    }
    Ok(total as f64 / elapsed.as_secs_f64())
}
