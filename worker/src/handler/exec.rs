//! `exec:CMD`: run a command per task. Task JSON on stdin, result JSON on
//! stdout; a non-zero exit is a failure with stderr kept. Exit code 75
//! (EX_TEMPFAIL) means transient unless stdout carries an explicit error.
//!
//! The command runs in its own process group: when the run is cancelled (a
//! time-out, a lost capacity lease) the whole group is killed, so a shell's
//! children (`sh -c "step1; step2"`) stop with it.
//!
//! It gets none of the worker's secrets: its environment is cleared down to
//! PATH, HOME, LANG, TZ, the `task` span's TRACEPARENT (and TRACESTATE, if
//! the trace has one) and the names in
//! `worker.exec_env_passthrough`. Its output is bounded: more stdout than
//! `worker.exec_max_output_bytes` kills it and fails the task
//! (`output_too_large`); of stderr only the last
//! `worker.exec_max_stderr_bytes` are kept.

use std::ffi::OsString;
use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use caucus_shared::config::WorkerConfig;
use caucus_shared::task::{TaskDispatch, TaskError};

use super::bounded::{read_bounded, read_tail, Bounded, Tail};
use super::trace_context::{self, TraceContext};
use super::{
    error_from_body, permanent, split_findings, thousands, transient, HandlerOutput, Scrubber,
};

const EX_TEMPFAIL: i32 = 75;

/// Bytes of stderr (its end) put in a task's error message; the rest of
/// what was kept goes to the worker's log.
const STDERR_IN_MESSAGE: usize = 1024;

/// Variables an agent gets from the worker's environment whatever the
/// configuration says (when the worker has them).
const BASE_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TZ"];

/// How `exec:` commands are run (from `[worker]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSettings {
    /// Names passed from the worker's environment besides PATH, HOME, LANG and TZ.
    pub env_passthrough: Vec<String>,
    /// Most stdout read; more fails the task.
    pub max_stdout_bytes: usize,
    /// Stderr kept (its end).
    pub max_stderr_bytes: usize,
}

impl ExecSettings {
    /// `worker.exec_env_passthrough`, `worker.exec_max_output_bytes` and
    /// `worker.exec_max_stderr_bytes`.
    pub fn from_config(w: &WorkerConfig) -> Self {
        ExecSettings {
            env_passthrough: w.exec_env_passthrough.clone(),
            max_stdout_bytes: w.exec_max_output_bytes,
            max_stderr_bytes: w.exec_max_stderr_bytes,
        }
    }
}

impl Default for ExecSettings {
    fn default() -> Self {
        Self::from_config(&WorkerConfig::default())
    }
}

/// The environment of an agent: [`BASE_ENV`] and `passthrough` as `lookup`
/// finds them in the worker's, plus TRACEPARENT (and TRACESTATE) when the
/// task runs in a trace, so the agent can join the task's trace.
fn agent_env(
    lookup: impl Fn(&str) -> Option<OsString>,
    passthrough: &[String],
    trace: TraceContext,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = BASE_ENV
        .iter()
        .copied()
        .chain(passthrough.iter().map(String::as_str))
        .filter_map(|name| lookup(name).map(|v| (OsString::from(name), v)))
        .collect();
    if let Some(tp) = trace.traceparent {
        env.push(("TRACEPARENT".into(), tp.into()));
    }
    if let Some(ts) = trace.tracestate {
        env.push(("TRACESTATE".into(), ts.into()));
    }
    env
}

pub(super) async fn run(
    cmd: &str,
    task: &TaskDispatch,
    settings: &ExecSettings,
    scrubber: &Scrubber,
) -> Result<HandlerOutput, TaskError> {
    let body = serde_json::to_vec(task).map_err(|e| permanent("encode", e.to_string()))?;
    let env = agent_env(
        |n| std::env::var_os(n),
        &settings.env_passthrough,
        // Handlers run inside the `task` span: this is its context.
        trace_context::current(),
    );
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        // Nothing of the worker's environment (its NATS and Redis
        // credentials) reaches the agent unless allowed.
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A timed-out or cancelled task must not leave the process running.
        .kill_on_drop(true)
        .process_group(0)
        .spawn()
        .map_err(|e| permanent("spawn", format!("cannot start `{cmd}`: {e}")))?;
    let mut group = GroupGuard(child.id());
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    // Feed stdin while draining both pipes: a command that writes before it
    // has read all its input must not block on a full pipe.
    let write = async {
        if let Some(mut stdin) = stdin {
            // A command that ignores stdin closes it early: not an error.
            let _ = stdin.write_all(&body).await;
        }
        Ok::<_, TaskError>(())
    };
    let max_out = settings.max_stdout_bytes;
    let read_out = async {
        let Some(out) = stdout else {
            return Ok(Vec::new());
        };
        match read_bounded(out, max_out).await {
            Ok(Bounded::Complete(v)) => Ok(v),
            // Returning drops the guard: the command's group is killed.
            Ok(Bounded::Over { read }) => Err(permanent(
                "output_too_large",
                format!(
                    "`{cmd}` wrote more than {} bytes to stdout (stopped at {}), over \
                     worker.exec_max_output_bytes = {}; the command was killed",
                    thousands(max_out),
                    thousands(read),
                    thousands(max_out)
                ),
            )),
            Err(e) => Err(transient("read", format!("reading stdout of `{cmd}`: {e}"))),
        }
    };
    let read_err = async {
        Ok(match stderr {
            Some(err) => read_tail(err, settings.max_stderr_bytes).await,
            None => Tail::default(),
        })
    };
    let ((), stdout, stderr) = tokio::try_join!(write, read_out, read_err)?;
    let status = child
        .wait()
        .await
        .map_err(|e| transient("wait", e.to_string()))?;
    // Finished on its own: nothing to kill.
    group.0 = None;
    let stderr_all = scrubber.text_to(&stderr.text(), settings.max_stderr_bytes);
    let stderr = message_tail(&stderr_all);
    if status.success() {
        let v: serde_json::Value = serde_json::from_slice(&stdout).map_err(|e| {
            permanent(
                "bad_output",
                format!("`{cmd}` exited 0 but stdout is not JSON ({e}); stderr: {stderr}"),
            )
        })?;
        return Ok(split_findings(v, &task.task_id));
    }
    if stderr.len() < stderr_all.len() {
        tracing::warn!(task_id = %task.task_id, stderr = %stderr_all,
            "exec: agent failed; its stderr (the end kept)");
    }
    if let Some(mut e) = error_from_body(&stdout) {
        if !stderr.is_empty() {
            e.message = format!("{} (stderr: {stderr})", e.message);
        }
        return Err(e);
    }
    let code = status.code();
    let msg = format!(
        "`{cmd}` exited with {}; stderr: {stderr}",
        code.map(|c| c.to_string())
            .unwrap_or_else(|| "a signal".into())
    );
    Err(if code == Some(EX_TEMPFAIL) {
        transient("exit_status", msg)
    } else {
        permanent("exit_status", msg)
    })
}

/// Kills the process group `0` (the child's pid, as it leads its own group)
/// when dropped before the child finished.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let Some(pgid) = self.0.and_then(|p| i32::try_from(p).ok()) else {
            return;
        };
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// The end of an (already scrubbed) stderr text that goes into a message:
/// at most [`STDERR_IN_MESSAGE`] bytes, from a character boundary.
fn message_tail(s: &str) -> String {
    if s.len() <= STDERR_IN_MESSAGE {
        return s.to_string();
    }
    let mut cut = s.len() - STDERR_IN_MESSAGE;
    while !s.is_char_boundary(cut) {
        cut += 1;
    }
    format!("…{}", &s[cut..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::FindingAnswers;
    use caucus_shared::inbound::FindingResponse;
    use serde_json::json;

    fn task_with_findings() -> TaskDispatch {
        serde_json::from_value(json!({
            "task_id": "wf/valuation", "workflow_id": "wf", "item": "AAPL",
            "pipeline": "p", "stage": "valuation", "agent_type": "valuation",
            "attempt": 1, "dispatched_at": "2025-11-16T10:30:00Z",
            "inputs": {"findings": [{
                "id": "f1", "from_agent": "financial_analyst", "to_agent": "valuation_agent",
                "priority": "high", "requires_response": true,
                "content": {"finding": "Abnormal capex increase", "confidence": 0.85},
                "stored_at": "2026-11-25T10:00:00Z"
            }]}
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn stdin_carries_the_findings_of_the_dispatch() {
        let task = task_with_findings();
        // `cat` echoes its stdin: the output is the dispatch as received.
        let out = run("cat", &task, &ExecSettings::default(), &Scrubber::default())
            .await
            .unwrap();
        assert_eq!(out.output["inputs"]["findings"], task.inputs["findings"]);
        assert_eq!(out.output["inputs"]["findings"][0]["id"], "f1");
    }

    #[tokio::test]
    async fn responses_are_lifted_out_of_the_output() {
        let cmd = r#"printf '%s' '{"ok":true,"responses":[{"finding_id":"f1","used":true,"note":"cut FCF"},7]}'"#;
        let out = run(
            cmd,
            &task_with_findings(),
            &ExecSettings::default(),
            &Scrubber::default(),
        )
        .await
        .unwrap();
        assert_eq!(out.output, json!({"ok": true}));
        assert_eq!(
            out.answers,
            FindingAnswers::Reported(vec![FindingResponse {
                finding_id: "f1".into(),
                used: Some(true),
                note: Some("cut FCF".into()),
            }])
        );
    }

    fn limits(max_stdout_bytes: usize, max_stderr_bytes: usize) -> ExecSettings {
        ExecSettings {
            env_passthrough: Vec::new(),
            max_stdout_bytes,
            max_stderr_bytes,
        }
    }

    async fn run_with(cmd: &str, settings: &ExecSettings) -> Result<HandlerOutput, TaskError> {
        run(cmd, &task_with_findings(), settings, &Scrubber::default()).await
    }

    #[test]
    fn the_environment_is_the_base_names_the_passthrough_and_the_trace() {
        let worker_env = |n: &str| match n {
            "PATH" => Some(OsString::from("/bin")),
            "LANG" => Some("C.UTF-8".into()),
            "CAUCUS_NATS_PASSWORD" => Some("s3cret".into()),
            "MY_PROXY" => Some("http://proxy".into()),
            _ => None,
        };
        let names = |env: Vec<(OsString, OsString)>| -> Vec<String> {
            env.into_iter()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(
            names(agent_env(worker_env, &[], TraceContext::default())),
            ["PATH", "LANG"]
        );
        let pass = vec!["MY_PROXY".to_string(), "UNSET_ONE".to_string()];
        let trace = TraceContext {
            traceparent: Some("00-ab-cd-01".into()),
            tracestate: None,
        };
        let env = agent_env(worker_env, &pass, trace);
        assert_eq!(
            names(env.clone()),
            ["PATH", "LANG", "MY_PROXY", "TRACEPARENT"]
        );
        assert_eq!(env[3].1, "00-ab-cd-01");
        let trace = TraceContext {
            traceparent: Some("00-ab-cd-01".into()),
            tracestate: Some("vendor=x".into()),
        };
        let env = agent_env(worker_env, &[], trace);
        assert_eq!(
            names(env.clone()),
            ["PATH", "LANG", "TRACEPARENT", "TRACESTATE"]
        );
        assert_eq!(env[3].1, "vendor=x");
    }

    #[tokio::test]
    async fn the_command_gets_the_task_spans_traceparent() {
        use opentelemetry::trace::TraceContextExt;
        use tracing::Instrument;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        crate::test_trace::init();
        let mut dispatch = async_nats::HeaderMap::new();
        dispatch.insert(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        );
        let span =
            crate::runtime::task_span::task_span(&task_with_findings(), "w1", Some(&dispatch));
        let sc = span.context().span().span_context().clone();
        let cmd = r#"printf '{"tp":"%s","ts":"%s"}' "${TRACEPARENT-}" "${TRACESTATE-unset}""#;
        let out = run_with(cmd, &ExecSettings::default())
            .instrument(span)
            .await
            .unwrap();
        assert_eq!(
            out.output["tp"],
            format!("00-0af7651916cd43dd8448eb211c80319c-{}-01", sc.span_id())
        );
        assert_eq!(out.output["ts"], "unset", "no tracestate: no variable");
        // Outside any span the command gets no TRACEPARENT.
        let out = run_with(cmd, &ExecSettings::default()).await.unwrap();
        assert_eq!(out.output["tp"], "");
    }

    #[tokio::test]
    async fn the_command_sees_only_the_allowed_environment() {
        // The test process has CARGO_* variables: none may reach the child.
        assert!(
            std::env::var_os("CARGO_PKG_NAME").is_some() || std::env::var_os("CARGO").is_some()
        );
        let cmd = r#"printf '{"cargo":"%s","path":"%s"}' "${CARGO-}${CARGO_PKG_NAME-}" "$PATH""#;
        let out = run_with(cmd, &ExecSettings::default()).await.unwrap();
        assert_eq!(out.output["cargo"], "");
        assert_ne!(out.output["path"], "");
    }

    #[tokio::test]
    async fn endless_stdout_kills_the_command_and_fails_permanently() {
        let t0 = std::time::Instant::now();
        let e = run_with("yes", &limits(10_000, 1000)).await.unwrap_err();
        assert_eq!(e.class, caucus_shared::task::ErrorClass::Permanent);
        assert_eq!(e.error_type, "output_too_large");
        assert!(
            e.message
                .contains("more than 10,000 bytes to stdout (stopped at 10,001)")
                && e.message.contains("worker.exec_max_output_bytes = 10,000"),
            "{}",
            e.message
        );
        assert!(t0.elapsed() < std::time::Duration::from_secs(10));
    }

    #[tokio::test]
    async fn long_stderr_keeps_only_its_end() {
        // 2,000 lines (about 210 KB) on stderr, then a failure: 4 KiB are
        // kept, and the message carries the last line.
        let cmd = "i=0; while [ $i -lt 2000 ]; do printf 'noise %0100d\\n' $i >&2; i=$((i+1)); done; echo last-line >&2; exit 3";
        let e = run_with(cmd, &limits(1000, 4096)).await.unwrap_err();
        assert_eq!(e.error_type, "exit_status");
        assert!(e.message.ends_with("last-line"), "{}", e.message);
        assert!(e.message.len() < 1500, "{}", e.message.len());
    }

    #[tokio::test]
    async fn stderr_in_the_message_is_scrubbed() {
        let scrubber = Scrubber::new(vec!["s3cret-value".into()]);
        // Built at run time: the command line itself holds no secret.
        let cmd =
            "printf 'connecting to redis://w:pw%s@r:6379 with s3cret-%s\\n' 1234 value >&2; exit 1";
        let e = run(
            cmd,
            &task_with_findings(),
            &ExecSettings::default(),
            &scrubber,
        )
        .await
        .unwrap_err();
        assert!(
            !e.message.contains("s3cret-value") && !e.message.contains("pw1234"),
            "{}",
            e.message
        );
        assert!(
            e.message.contains("redis://w:***@r:6379 with ***"),
            "{}",
            e.message
        );
    }

    #[tokio::test]
    async fn a_large_input_the_command_ignores_does_not_block() {
        // The dispatch is bigger than a pipe buffer; the command never reads
        // it and writes its answer at once.
        let mut task = task_with_findings();
        task.inputs
            .insert("big".into(), json!("z".repeat(1_000_000)));
        let out = run(
            "echo '{\"ok\":1}'",
            &task,
            &ExecSettings::default(),
            &Scrubber::default(),
        )
        .await
        .unwrap();
        assert_eq!(out.output, json!({"ok": 1}));
    }
}
