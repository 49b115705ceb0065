//! The real [`AgentCaller`]: one [`TaskDispatch`] per call on
//! `caucus.tasks.<agent_type>` (JetStream, `Nats-Msg-Id`, trace context in
//! the headers), answered by the worker's `completed` / `failed` event.
//!
//! The caller subscribes to `caucus.events.task.<agent_type>.*` (core NATS)
//! before it publishes, so the answer cannot slip past, and keeps only the
//! event whose `task_id` is its own. The coordinator's durable event
//! consumer sees these events too; their workflow id (`pattern-<run_id>`)
//! is not one it holds, so it acknowledges and ignores them.

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::jetstream;
use async_nats::HeaderMap;
use futures::StreamExt;
use serde_json::{json, Value};

use caucus_shared::clock::SharedClock;
use caucus_shared::nats::trace;
use caucus_shared::subjects::{encode_token, StreamKind, Subjects};
use caucus_shared::task::{TaskDispatch, TaskEvent, TaskStatus};

use super::result::{AgentResult, PatternTask};
use super::runner::AgentCaller;

/// Calls agents through the workers of their type.
#[derive(Clone)]
pub struct NatsCaller {
    nats: async_nats::Client,
    js: jetstream::Context,
    subjects: Subjects,
    clock: SharedClock,
    run_id: String,
    item: String,
    timeout: Duration,
}

impl NatsCaller {
    /// A caller for run `run_id`; every call waits at most `timeout`.
    pub fn new(
        nats: async_nats::Client,
        subjects: Subjects,
        clock: SharedClock,
        run_id: impl Into<String>,
        item: Option<String>,
        timeout: Duration,
    ) -> Self {
        let run_id = run_id.into();
        NatsCaller {
            js: jetstream::new(nats.clone()),
            nats,
            subjects,
            clock,
            item: item.unwrap_or_else(|| workflow_id(&run_id)),
            run_id,
            timeout,
        }
    }

    /// The dispatch for one call.
    pub fn dispatch(&self, agent_type: &str, task: &PatternTask) -> TaskDispatch {
        let inputs: BTreeMap<String, Value> = task.context.clone().into_iter().collect();
        TaskDispatch {
            schema_version: caucus_shared::task::TASK_SCHEMA_VERSION,
            task_id: task_id(&self.run_id, task.round, agent_type, task.index),
            workflow_id: workflow_id(&self.run_id),
            item: self.item.clone(),
            pipeline: format!("pattern:{}", task.pattern),
            stage: task.phase.clone(),
            agent_type: agent_type.to_string(),
            attempt: 1,
            shard: None,
            inputs,
            params: json!({
                "pattern": task.pattern,
                "prompt": task.description,
                "round": task.round,
                "phase": task.phase,
                "label": task.label,
                "agent_index": task.index,
            }),
            expected_ms: 0,
            timeout_ms: self.timeout.as_millis() as u64,
            priority: 0.0,
            dispatched_at: self.clock.now(),
            partition: None,
        }
    }

    async fn call_inner(&self, agent_type: &str, task: &PatternTask) -> AgentResult {
        let d = self.dispatch(agent_type, task);
        let fail = |kind: &str, msg: String| {
            let mut r = AgentResult::failed(agent_type, task, kind, msg);
            r.task_id = Some(d.task_id.clone());
            r
        };
        let events = format!(
            "{}.events.task.{}.*",
            self.subjects.prefix(),
            encode_token(agent_type)
        );
        let mut sub = match self.nats.subscribe(events.clone()).await {
            Ok(s) => s,
            Err(e) => return fail("subscribe", format!("cannot subscribe to {events}: {e}")),
        };
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", d.msg_id().as_str());
        trace::inject(&mut headers);
        let body = match serde_json::to_vec(&d) {
            Ok(b) => b,
            Err(e) => return fail("encode", e.to_string()),
        };
        let subject = self.subjects.tasks(agent_type);
        let seq = match self
            .js
            .publish_with_headers(subject.clone(), headers, body.into())
            .await
        {
            Ok(ack) => match ack.await {
                Ok(a) => a.sequence,
                Err(e) => return fail("publish", format!("{subject}: {e}")),
            },
            Err(e) => return fail("publish", format!("{subject}: {e}")),
        };
        let wait = async {
            while let Some(msg) = sub.next().await {
                let Ok(ev) = serde_json::from_slice::<TaskEvent>(&msg.payload) else {
                    continue;
                };
                if ev.task_id != d.task_id {
                    continue;
                }
                match ev.status {
                    TaskStatus::Completed | TaskStatus::Failed => return Some(ev),
                    TaskStatus::Started | TaskStatus::Progress => {}
                }
            }
            None
        };
        let ev = match tokio::time::timeout(self.timeout, wait).await {
            Ok(Some(ev)) => ev,
            Ok(None) => return fail("subscribe", format!("subscription to {events} ended")),
            Err(_) => {
                self.withdraw(seq).await;
                return fail(
                    "timeout",
                    format!(
                        "no answer from a `{agent_type}` worker within {} ms",
                        self.timeout.as_millis()
                    ),
                );
            }
        };
        let _ = sub.unsubscribe().await;
        let mut r = match ev.status {
            TaskStatus::Completed => {
                AgentResult::ok(agent_type, task, output_text(ev.output.as_ref()))
            }
            _ => {
                let (kind, msg) = ev
                    .error
                    .map(|e| (e.error_type, e.message))
                    .unwrap_or_else(|| ("failed".into(), "the agent failed".into()));
                AgentResult::failed(agent_type, task, kind, msg)
            }
        };
        r.task_id = Some(d.task_id);
        r.worker_id = Some(ev.worker_id);
        r
    }

    /// A call that timed out must not run later: remove its message if no
    /// worker took it yet (a worker that did take it is answered by nobody).
    async fn withdraw(&self, seq: u64) {
        let stream = self.subjects.stream(StreamKind::Tasks);
        if let Ok(s) = self.js.get_stream(&stream).await {
            let _ = s.delete_message(seq).await;
        }
    }
}

impl AgentCaller for NatsCaller {
    fn call(
        &self,
        agent_type: &str,
        task: PatternTask,
    ) -> impl std::future::Future<Output = AgentResult> + Send {
        let agent_type = agent_type.to_string();
        async move { self.call_inner(&agent_type, &task).await }
    }
}

/// `pattern-<run_id>`: the workflow id every dispatch of a run carries.
pub fn workflow_id(run_id: &str) -> String {
    format!("pattern-{run_id}")
}

/// `pattern-<run_id>/<round>-<agent>-<index>`.
pub fn task_id(run_id: &str, round: u32, agent_type: &str, index: usize) -> String {
    format!("pattern-{run_id}/{round}-{agent_type}-{index}")
}

/// The text of an output: `output.text` when it is a string, a bare string
/// as-is, anything else as compact JSON.
pub fn output_text(output: Option<&Value>) -> String {
    match output {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => match v.get("text") {
            Some(Value::String(s)) => s.clone(),
            _ => v.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_text_prefers_the_text_field() {
        assert_eq!(output_text(Some(&json!({"text": "hi", "n": 1}))), "hi");
        assert_eq!(output_text(Some(&json!("plain"))), "plain");
        assert_eq!(output_text(Some(&json!({"n": 1}))), r#"{"n":1}"#);
        assert_eq!(output_text(None), "");
    }

    #[test]
    fn ids_name_run_round_agent_and_position() {
        assert_eq!(task_id("r1", 2, "critic", 0), "pattern-r1/2-critic-0");
        assert_eq!(workflow_id("r1"), "pattern-r1");
    }
}
