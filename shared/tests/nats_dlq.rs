//! Dead-lettering on a real nats-server: garbage and oversize bodies go to
//! the DLQ with their reasons and are acked; the loop carries on with the
//! next, valid message.

use std::time::Duration;

use async_nats::jetstream;
use bytes::Bytes;
use caucus_harness::{wait_until, Nats};
use caucus_shared::nats::{self, decode_or_dead_letter, dlq, Dlq};
use caucus_shared::subjects::Subjects;
use caucus_shared::task::TaskDispatch;
use caucus_shared::Config;
use futures::StreamExt;

/// Small enough that a realistic dispatch fits and the padded one does not.
const LIMIT: usize = 600;

fn dispatch(item: &str) -> serde_json::Value {
    serde_json::json!({
        "task_id": "wf1/valuation", "workflow_id": "wf1", "item": item,
        "pipeline": "stock-analysis", "stage": "valuation", "agent_type": "valuation",
        "attempt": 1, "dispatched_at": "2025-11-16T10:30:00Z"
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_are_dead_lettered_and_the_loop_carries_on() -> anyhow::Result<()> {
    let server = Nats::start();
    let mut cfg = Config::default();
    cfg.nats.url = server.url();
    let subjects = Subjects::default();
    let client = nats::connect(&cfg.nats, "dlq-test").await?;
    let js = jetstream::new(client);
    nats::ensure_streams(&js, &subjects, &cfg).await?;
    let consumer =
        nats::ensure_task_consumer(&js, &subjects, "valuation", Duration::from_secs(30), 5).await?;

    let subject = subjects.tasks("valuation");
    let garbage = Bytes::from_static(b"{\"task_id\": \"wf1/valuation\", oops");
    let oversize = serde_json::to_vec(&dispatch(&"X".repeat(LIMIT)))?;
    let valid = serde_json::to_vec(&dispatch("BRK.B"))?;
    assert!(valid.len() < LIMIT && oversize.len() > LIMIT);
    for body in [garbage.to_vec(), oversize.clone(), valid] {
        js.publish(subject.clone(), body.into()).await?.await?;
    }

    let dlq = Dlq::new(js.clone(), subjects.clone());
    let mut messages = consumer.messages().await?;
    let processed = tokio::time::timeout(Duration::from_secs(20), async {
        let mut seen = 0;
        while let Some(msg) = messages.next().await {
            let msg = msg?;
            seen += 1;
            let decoded = decode_or_dead_letter(&dlq, &msg, LIMIT, |b, _| {
                serde_json::from_slice::<TaskDispatch>(b)
            })
            .await;
            if let Some(task) = decoded {
                msg.ack().await.map_err(|e| anyhow::anyhow!("{e}"))?;
                return Ok::<_, anyhow::Error>((task, seen));
            }
        }
        anyhow::bail!("consumer stream ended")
    })
    .await??;
    assert_eq!(processed.0.item, "BRK.B");
    assert_eq!(
        processed.1, 3,
        "the valid message came after the two bad ones"
    );
    assert_eq!(dlq.count(), 2);

    let mut dlq_stream = js.get_stream("CAUCUS_DLQ").await?;
    assert_eq!(dlq_stream.info().await?.state.messages, 2);
    let first = dlq_stream.get_raw_message(1).await?;
    let second = dlq_stream.get_raw_message(2).await?;
    let header = |m: &async_nats::jetstream::message::StreamMessage, k: &str| {
        m.headers
            .get(k)
            .map(|v| v.as_str().to_string())
            .unwrap_or_default()
    };
    for m in [&first, &second] {
        assert_eq!(m.subject.as_str(), "caucus.dlq.caucus.tasks.valuation");
        assert_eq!(header(m, dlq::HEADER_SUBJECT), "caucus.tasks.valuation");
    }
    assert_eq!(header(&first, dlq::HEADER_CODE), "invalid_json");
    assert!(
        header(&first, dlq::HEADER_ERROR).contains("line 1 column"),
        "{}",
        header(&first, dlq::HEADER_ERROR)
    );
    assert_eq!(
        first.payload, garbage,
        "the original body is kept for replay"
    );
    assert_eq!(header(&second, dlq::HEADER_CODE), "too_large");
    assert_eq!(
        header(&second, dlq::HEADER_ERROR),
        format!("body is {} bytes, the limit is {LIMIT}", oversize.len())
    );

    // Every original was acked: nothing pending, and the work queue is empty.
    let mut tasks_consumer = consumer.clone();
    let js2 = js.clone();
    wait_until("all task messages acked", Duration::from_secs(10), || {
        let state = futures::executor::block_on(async {
            let info = tasks_consumer.info().await.ok()?.clone();
            let mut s = js2.get_stream("CAUCUS_TASKS").await.ok()?;
            let msgs = s.info().await.ok()?.state.messages;
            Some((info.num_pending, info.num_ack_pending, msgs))
        });
        (state == Some((0, 0, 0))).then_some(())
    });
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_original_is_not_dead_lettered_twice() -> anyhow::Result<()> {
    let server = Nats::start();
    let mut cfg = Config::default();
    cfg.nats.url = server.url();
    let subjects = Subjects::default();
    let js = jetstream::new(nats::connect(&cfg.nats, "dlq-dedupe").await?);
    nats::ensure_streams(&js, &subjects, &cfg).await?;
    let consumer =
        nats::ensure_task_consumer(&js, &subjects, "report", Duration::from_secs(30), 5).await?;
    js.publish(subjects.tasks("report"), "nope".into())
        .await?
        .await?;

    let dlq = Dlq::new(js.clone(), subjects.clone());
    let mut messages = consumer.messages().await?;
    let msg = tokio::time::timeout(Duration::from_secs(10), messages.next())
        .await?
        .ok_or_else(|| anyhow::anyhow!("no message"))??;
    // As if the first attempt's ack had been lost: dead-letter the same
    // delivery twice.
    dlq.dead_letter_message(&msg, "invalid_json", "first")
        .await?;
    dlq.dead_letter_message(&msg, "invalid_json", "again")
        .await?;
    let mut dlq_stream = js.get_stream("CAUCUS_DLQ").await?;
    assert_eq!(dlq_stream.info().await?.state.messages, 1);
    Ok(())
}
