//! What runs a task: the built-in analysts, an external command, an HTTP
//! endpoint, or a no-op (benchmarks). Every kind gets the same
//! [`TaskDispatch`] JSON and returns a JSON output or a [`TaskError`].

mod exec;
mod http;
mod spec;

use std::time::Duration;

use serde_json::Value;

use caucus_shared::task::{ErrorClass, TaskDispatch, TaskError};

pub use spec::{HandlerSpec, HandlerSpecError};

/// A finding a handler wants published on `caucus.findings.<item>`.
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerFinding {
    /// Envelope content (the `finding` message shape).
    pub content: Value,
}

/// Where a [`HandlerMessage`] goes.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageTarget {
    /// `caucus.debates.<debate_id>.<event>`.
    Debate {
        /// The debate.
        debate_id: String,
        /// `challenge`, `ack`, `evidence`, `verdict`.
        event: String,
    },
    /// `caucus.msg.all`.
    Broadcast,
}

/// An envelope a handler wants published besides its findings (a challenge,
/// a macro broadcast); its id is the `Nats-Msg-Id`, so a re-run task does
/// not publish it twice.
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerMessage {
    /// Where it goes.
    pub target: MessageTarget,
    /// The message.
    pub envelope: caucus_shared::envelope::Envelope,
}

/// A successful run.
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerOutput {
    /// The task's result.
    pub output: Value,
    /// Findings to publish.
    pub findings: Vec<HandlerFinding>,
    /// Other messages to publish (before the completion is reported).
    pub messages: Vec<HandlerMessage>,
}

impl HandlerOutput {
    /// Output without findings.
    pub fn plain(output: Value) -> Self {
        HandlerOutput {
            output,
            findings: Vec::new(),
            messages: Vec::new(),
        }
    }
}

/// A configured handler.
#[derive(Clone)]
pub struct Handler {
    spec: HandlerSpec,
    http: reqwest::Client,
    builtin: Option<BuiltinFn>,
}

/// The built-in analysts, plugged in by the crate root.
pub type BuiltinFn =
    std::sync::Arc<dyn Fn(&TaskDispatch) -> Result<HandlerOutput, TaskError> + Send + Sync>;

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handler").field("spec", &self.spec).finish()
    }
}

impl Handler {
    /// A handler for `spec`; `builtin` runs the built-in analysts.
    pub fn new(spec: HandlerSpec, builtin: Option<BuiltinFn>) -> Self {
        Handler {
            spec,
            http: reqwest::Client::new(),
            builtin,
        }
    }

    /// The spec it was built from.
    pub fn spec(&self) -> &HandlerSpec {
        &self.spec
    }

    /// Runs one task, bounded by its `timeout_ms` (0 = no limit).
    pub async fn run(&self, task: &TaskDispatch) -> Result<HandlerOutput, TaskError> {
        let fut = self.run_unbounded(task);
        if task.timeout_ms == 0 {
            return fut.await;
        }
        match tokio::time::timeout(Duration::from_millis(task.timeout_ms), fut).await {
            Ok(r) => r,
            Err(_) => Err(TaskError {
                class: ErrorClass::Transient,
                error_type: "timeout".into(),
                message: format!("task exceeded its time limit of {} ms", task.timeout_ms),
                data_source: None,
            }),
        }
    }

    async fn run_unbounded(&self, task: &TaskDispatch) -> Result<HandlerOutput, TaskError> {
        match &self.spec {
            HandlerSpec::Noop => Ok(HandlerOutput::plain(Value::Object(Default::default()))),
            HandlerSpec::Sleep(ms) => {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                Ok(HandlerOutput::plain(serde_json::json!({ "slept_ms": ms })))
            }
            HandlerSpec::Builtin => match &self.builtin {
                Some(f) => {
                    let f = f.clone();
                    let t = task.clone();
                    tokio::task::spawn_blocking(move || f(&t))
                        .await
                        .map_err(|e| permanent("handler_panic", e.to_string()))?
                }
                None => Err(permanent(
                    "no_builtin",
                    "this worker has no built-in analysts".into(),
                )),
            },
            HandlerSpec::Exec(cmd) => exec::run(cmd, task).await,
            HandlerSpec::Http(url) => http::run(&self.http, url, task).await,
        }
    }
}

pub(crate) fn permanent(error_type: &str, message: String) -> TaskError {
    TaskError {
        class: ErrorClass::Permanent,
        error_type: error_type.into(),
        message,
        data_source: None,
    }
}

pub(crate) fn transient(error_type: &str, message: String) -> TaskError {
    TaskError {
        class: ErrorClass::Transient,
        error_type: error_type.into(),
        message,
        data_source: None,
    }
}

/// A handler may describe its own failure as
/// `{"error": {"class", "error_type", "message", "data_source"}}`.
pub(crate) fn error_from_body(body: &[u8]) -> Option<TaskError> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let e = v.get("error")?;
    serde_json::from_value(e.clone()).ok()
}

/// Splits a handler's successful JSON into output and findings: a top-level
/// `findings` array (of finding contents) is lifted out.
pub(crate) fn split_findings(mut v: Value) -> HandlerOutput {
    let findings = v
        .as_object_mut()
        .and_then(|m| m.remove("findings"))
        .and_then(|f| match f {
            Value::Array(a) => Some(a),
            _ => None,
        })
        .unwrap_or_default()
        .into_iter()
        .map(|content| HandlerFinding { content })
        .collect();
    HandlerOutput {
        output: v,
        findings,
        messages: Vec::new(),
    }
}
