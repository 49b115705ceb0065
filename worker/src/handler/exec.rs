//! `exec:CMD`: run a command per task. Task JSON on stdin, result JSON on
//! stdout; a non-zero exit is a failure with stderr kept. Exit code 75
//! (EX_TEMPFAIL) means transient unless stdout carries an explicit error.
//!
//! The command runs in its own process group: when the run is cancelled (a
//! time-out, a lost capacity lease) the whole group is killed, so a shell's
//! children (`sh -c "step1; step2"`) stop with it.

use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use caucus_shared::task::{TaskDispatch, TaskError};

use super::{error_from_body, permanent, split_findings, transient, HandlerOutput};

const EX_TEMPFAIL: i32 = 75;
/// stderr kept in an error message, at most.
const STDERR_KEEP: usize = 4000;

pub(super) async fn run(cmd: &str, task: &TaskDispatch) -> Result<HandlerOutput, TaskError> {
    let body = serde_json::to_vec(task).map_err(|e| permanent("encode", e.to_string()))?;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A timed-out or cancelled task must not leave the process running.
        .kill_on_drop(true)
        .process_group(0)
        .spawn()
        .map_err(|e| permanent("spawn", format!("cannot start `{cmd}`: {e}")))?;
    let mut group = GroupGuard(child.id());
    if let Some(mut stdin) = child.stdin.take() {
        // A command that ignores stdin closes it early: not an error.
        let _ = stdin.write_all(&body).await;
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| transient("wait", e.to_string()))?;
    // Finished on its own: nothing to kill.
    group.0 = None;
    let stderr = tail(&String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
            permanent(
                "bad_output",
                format!("`{cmd}` exited 0 but stdout is not JSON ({e}); stderr: {stderr}"),
            )
        })?;
        return Ok(split_findings(v));
    }
    if let Some(mut e) = error_from_body(&out.stdout) {
        if !stderr.is_empty() {
            e.message = format!("{} (stderr: {stderr})", e.message);
        }
        return Err(e);
    }
    let code = out.status.code();
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

fn tail(s: &str) -> String {
    let s = s.trim();
    if s.len() <= STDERR_KEEP {
        return s.to_string();
    }
    let mut cut = s.len() - STDERR_KEEP;
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
        let out = run("cat", &task).await.unwrap();
        assert_eq!(out.output["inputs"]["findings"], task.inputs["findings"]);
        assert_eq!(out.output["inputs"]["findings"][0]["id"], "f1");
    }

    #[tokio::test]
    async fn responses_are_lifted_out_of_the_output() {
        let cmd = r#"printf '%s' '{"ok":true,"responses":[{"finding_id":"f1","used":true,"note":"cut FCF"},7]}'"#;
        let out = run(cmd, &task_with_findings()).await.unwrap();
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
}
