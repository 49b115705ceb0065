//! What runs a task: the built-in analysts, an external command, an HTTP
//! endpoint, or a no-op (benchmarks). Every kind gets the same
//! [`TaskDispatch`] JSON and returns a JSON output or a [`TaskError`].

mod answers;
mod bounded;
mod exec;
mod http;
mod spec;
mod trace_context;

use std::time::Duration;

use serde_json::Value;

use caucus_shared::task::{ErrorClass, TaskDispatch, TaskError};

pub use answers::{FindingAnswers, MAX_RESPONSES};
pub use exec::ExecSettings;
pub use http::{client as http_client, HttpClientError};
pub use spec::{HandlerSpec, HandlerSpecError};

/// A finding a handler wants published on `caucus.findings.<item>`.
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerFinding {
    /// Envelope content (the `finding` message shape).
    pub content: Value,
}

/// Where a [`HandlerMessage`] goes, and the message itself: the agents
/// crate's types, so the built-in agents' messages pass through unchanged.
pub use caucus_agents::{AgentMessage as HandlerMessage, MessageTarget};

/// A successful run.
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerOutput {
    /// The task's result.
    pub output: Value,
    /// Findings to publish.
    pub findings: Vec<HandlerFinding>,
    /// Other messages to publish (before the completion is reported).
    pub messages: Vec<HandlerMessage>,
    /// Its answers about the findings in `inputs.findings` (sent as
    /// confirmations before the completion is reported).
    pub answers: FindingAnswers,
}

impl HandlerOutput {
    /// Output without findings, messages or answers.
    pub fn plain(output: Value) -> Self {
        HandlerOutput {
            output,
            findings: Vec::new(),
            messages: Vec::new(),
            answers: FindingAnswers::default(),
        }
    }
}

/// A configured handler.
#[derive(Clone)]
pub struct Handler {
    spec: HandlerSpec,
    http: reqwest::Client,
    builtin: Option<BuiltinFn>,
    max_output_bytes: usize,
    exec: ExecSettings,
    scrubber: Scrubber,
}

/// The built-in agents, plugged in by the crate root ([`crate::builtin`]).
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
            http: http::default_client(),
            builtin,
            max_output_bytes: caucus_shared::config::WorkerConfig::default().max_output_bytes,
            exec: ExecSettings::default(),
            scrubber: Scrubber::default(),
        }
    }

    /// Takes its limits from `cfg.worker` (`max_output_bytes` and the
    /// `exec_*` settings) and the secrets to scrub from error texts from the
    /// process's own credentials ([`caucus_shared::scrub::config_secrets`]).
    pub fn with_config(self, cfg: &caucus_shared::Config) -> Self {
        self.with_max_output_bytes(cfg.worker.max_output_bytes)
            .with_exec(ExecSettings::from_config(&cfg.worker))
            .with_secrets(caucus_shared::scrub::config_secrets(cfg))
    }

    /// The client of `http:` handlers ([`http_client`]: `worker.http_timeout`,
    /// `worker.http_ca_file`).
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http = client;
        self
    }

    /// How `exec:` commands run (environment, pipe limits).
    pub fn with_exec(mut self, exec: ExecSettings) -> Self {
        self.exec = exec;
        self
    }

    /// Secret values masked wherever they appear in an error text.
    pub fn with_secrets(mut self, secrets: Vec<String>) -> Self {
        self.scrubber = Scrubber::new(secrets);
        self
    }

    /// The largest output [`Handler::run`] returns as a success
    /// (`worker.max_output_bytes`); a larger one is a permanent failure.
    pub fn with_max_output_bytes(mut self, max: usize) -> Self {
        self.max_output_bytes = max;
        self
    }

    /// The spec it was built from.
    pub fn spec(&self) -> &HandlerSpec {
        &self.spec
    }

    /// Runs one task, bounded by its `timeout_ms` (0 = no limit). An
    /// output larger than the output limit is a permanent failure
    /// (`output_too_large`), whichever kind of handler produced it. An
    /// error's texts are scrubbed of credentials and bounded
    /// ([`Scrubber::error`]): they are stored and shown.
    ///
    /// Dropping the returned future cancels the run: an `exec:` child is
    /// killed, an `http:` request is dropped (a built-in analyst, a blocking
    /// function, finishes on its thread and its result is discarded).
    pub async fn run(&self, task: &TaskDispatch) -> Result<HandlerOutput, TaskError> {
        let out = self
            .run_timed(task)
            .await
            .map_err(|e| self.scrubber.error(e))?;
        check_output_size(&out.output, self.max_output_bytes)?;
        Ok(out)
    }

    async fn run_timed(&self, task: &TaskDispatch) -> Result<HandlerOutput, TaskError> {
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
            // Boxed: these futures are kilobytes (a child process, an HTTP
            // client call), and every attempt's future would otherwise be
            // that large whatever the handler, allocated and copied per
            // task (measured: 9 KB per no-op task before).
            HandlerSpec::Exec(cmd) => {
                Box::pin(exec::run(cmd, task, &self.exec, &self.scrubber)).await
            }
            HandlerSpec::Http(url) => Box::pin(http::run(&self.http, url, task)).await,
        }
    }
}

/// Takes credentials out of the error texts a worker reports
/// ([`caucus_shared::scrub`]): an agent may echo its environment, a URL or a
/// configuration line into its failure, which then lands in the workflow
/// record, events, alert cards and logs.
#[derive(Clone, Default)]
pub struct Scrubber {
    secrets: std::sync::Arc<[String]>,
}

/// Longest `error_type` kept: it is an identifier, not prose.
const MAX_ERROR_TYPE: usize = 64;
/// Longest `data_source` kept.
const MAX_DATA_SOURCE: usize = 256;

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secrets themselves are never printed.
        write!(f, "Scrubber({} secrets)", self.secrets.len())
    }
}

impl Scrubber {
    /// Masks these values (besides the credential shapes every scrub masks).
    pub fn new(secrets: Vec<String>) -> Self {
        Scrubber {
            secrets: secrets.into(),
        }
    }

    fn secrets(&self) -> Vec<&str> {
        self.secrets.iter().map(String::as_str).collect()
    }

    /// `text` scrubbed, at most [`caucus_shared::scrub::MAX_LEN`] bytes.
    pub fn text(&self, text: &str) -> String {
        caucus_shared::scrub::scrub(text, &self.secrets())
    }

    /// `text` scrubbed, at most `max` bytes.
    pub fn text_to(&self, text: &str, max: usize) -> String {
        caucus_shared::scrub::scrub_to(text, &self.secrets(), max)
    }

    /// `e` with its message, type and data source scrubbed and bounded.
    pub fn error(&self, mut e: TaskError) -> TaskError {
        e.message = self.text(&e.message);
        e.error_type = self.text_to(&e.error_type, MAX_ERROR_TYPE);
        e.data_source = e.data_source.map(|d| self.text_to(&d, MAX_DATA_SOURCE));
        e
    }
}

/// `Err(output_too_large)` when `output`, as the JSON that would travel in
/// the `completed` event, is longer than `max` bytes. Permanent: the same
/// task would produce the same output again.
pub fn check_output_size(output: &Value, max: usize) -> Result<(), TaskError> {
    let size = json_len(output);
    if size <= max {
        return Ok(());
    }
    Err(permanent(
        "output_too_large",
        format!(
            "output is {} bytes, over worker.max_output_bytes = {}",
            thousands(size),
            thousands(max)
        ),
    ))
}

/// Length of `v` serialized as compact JSON, without building the string.
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing a `Value` into an infallible writer cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// `614400` → `614,400`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
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

/// Splits a handler's successful JSON into output, findings and answers: a
/// top-level `findings` array (of finding contents) and a top-level
/// `responses` array (of [`caucus_shared::inbound::FindingResponse`]s, see
/// [`answers::lift_responses`]) are lifted out.
pub(crate) fn split_findings(mut v: Value, task_id: &str) -> HandlerOutput {
    let responses = answers::lift_responses(&mut v, task_id);
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
        answers: FindingAnswers::Reported(responses),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(262_144), "262,144");
        assert_eq!(thousands(614_400), "614,400");
        assert_eq!(thousands(1_048_576), "1,048,576");
    }

    #[test]
    fn output_size_is_its_compact_json() {
        let v = json!({"a": "x".repeat(10)});
        let n = serde_json::to_vec(&v).unwrap().len();
        assert_eq!(json_len(&v), n);
        assert!(
            check_output_size(&v, n).is_ok(),
            "exactly the limit is fine"
        );
        let e = check_output_size(&v, n - 1).unwrap_err();
        assert_eq!(e.class, ErrorClass::Permanent);
        assert_eq!(e.error_type, "output_too_large");
    }

    #[test]
    fn oversize_error_names_both_sizes() {
        // A string of 614,398 bytes is 614,400 bytes of JSON with its quotes.
        let v = Value::String("x".repeat(614_398));
        let e = check_output_size(&v, 262_144).unwrap_err();
        assert_eq!(
            e.message,
            "output is 614,400 bytes, over worker.max_output_bytes = 262,144"
        );
    }

    /// Every attempt's future holds the handler's inline, and the slot
    /// boxes it per task: the large arms (exec, http) are boxed so a no-op
    /// or built-in run does not allocate and copy kilobytes each time.
    #[test]
    fn a_handler_run_is_a_small_future() {
        let task: TaskDispatch = serde_json::from_value(json!({
            "task_id": "wf/x", "workflow_id": "wf", "item": "I", "pipeline": "p",
            "stage": "x", "agent_type": "a", "attempt": 1,
            "dispatched_at": "2025-11-16T10:30:00Z"
        }))
        .unwrap();
        let h = Handler::new(HandlerSpec::Noop, None);
        let run = h.run(&task);
        let size = std::mem::size_of_val(&run);
        assert!(size <= 1024, "Handler::run's future is {size} bytes");
    }

    #[tokio::test]
    async fn every_handler_kind_is_held_to_the_limit() {
        let task: TaskDispatch = serde_json::from_value(json!({
            "task_id": "wf/x", "workflow_id": "wf", "item": "I", "pipeline": "p",
            "stage": "x", "agent_type": "a", "attempt": 1,
            "dispatched_at": "2025-11-16T10:30:00Z"
        }))
        .unwrap();
        let big: BuiltinFn = std::sync::Arc::new(|_t: &TaskDispatch| {
            Ok(HandlerOutput::plain(json!({"blob": "y".repeat(2000)})))
        });
        let h = Handler::new(HandlerSpec::Builtin, Some(big.clone())).with_max_output_bytes(1000);
        let e = h.run(&task).await.unwrap_err();
        assert_eq!(e.error_type, "output_too_large");
        let h = Handler::new(HandlerSpec::Builtin, Some(big)).with_max_output_bytes(4000);
        assert!(h.run(&task).await.is_ok());
        let h = Handler::new(HandlerSpec::Sleep(0), None).with_max_output_bytes(5);
        assert_eq!(
            h.run(&task).await.unwrap_err().error_type,
            "output_too_large"
        );
    }

    fn plain_task(timeout_ms: u64) -> TaskDispatch {
        serde_json::from_value(json!({
            "task_id": "wf/x", "workflow_id": "wf", "item": "I", "pipeline": "p",
            "stage": "x", "agent_type": "a", "attempt": 1, "timeout_ms": timeout_ms,
            "dispatched_at": "2025-11-16T10:30:00Z"
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn reported_errors_are_scrubbed_and_bounded() {
        let leaky: BuiltinFn = std::sync::Arc::new(|_t: &TaskDispatch| {
            Err(TaskError {
                class: ErrorClass::Permanent,
                error_type: format!("t{}", "y".repeat(500)),
                message: format!(
                    "env: CAUCUS_NATS_PASSWORD=n4ts-pass, seen hunter22 in nats://u:hunter22@h {}",
                    "z".repeat(5000)
                ),
                data_source: Some("https://u:p4ss@api/x".into()),
            })
        });
        let h =
            Handler::new(HandlerSpec::Builtin, Some(leaky)).with_secrets(vec!["hunter22".into()]);
        let e = h.run(&plain_task(0)).await.unwrap_err();
        assert!(
            e.message
                .starts_with("env: CAUCUS_NATS_PASSWORD=***, seen *** in nats://u:***@h "),
            "{}",
            e.message
        );
        assert!(e.message.len() <= caucus_shared::scrub::MAX_LEN);
        assert!(e.error_type.len() <= MAX_ERROR_TYPE);
        assert_eq!(e.data_source.as_deref(), Some("https://u:***@api/x"));
        assert_eq!(format!("{:?}", h.scrubber), "Scrubber(1 secrets)");
    }

    #[tokio::test]
    async fn a_command_writing_stderr_forever_stops_at_its_time_limit() {
        let h = Handler::new(HandlerSpec::Exec("yes >&2".into()), None);
        let e = h.run(&plain_task(300)).await.unwrap_err();
        assert_eq!(e.error_type, "timeout");
    }

    #[test]
    fn with_config_takes_the_exec_settings_and_the_secrets() {
        let mut cfg = caucus_shared::Config::default();
        cfg.worker.exec_env_passthrough = vec!["HTTPS_PROXY".into()];
        cfg.worker.exec_max_output_bytes = 77;
        cfg.nats.password = Some("n4ts-pass".into());
        let h = Handler::new(HandlerSpec::Noop, None).with_config(&cfg);
        assert_eq!(h.exec.env_passthrough, ["HTTPS_PROXY"]);
        assert_eq!(h.exec.max_stdout_bytes, 77);
        assert_eq!(h.scrubber.text("x n4ts-pass y"), "x *** y");
    }
}
