//! `caucus submit`, `submission`, `status`, `result`, and the live
//! `--watch` display: submitting (here), retrying a submit (`retry`),
//! watching (`watch`, drawn by `progress`), reading a submission back
//! (`submission`) and status text (`status`).

use serde::Serialize;

use caucus_shared::api::coordinator::status::{StatusReply, WorkflowState};
use caucus_shared::api::coordinator::submit::{SubmitReply, SubmitRequest};

use super::plan::pipeline_value;
use super::{Client, PipelineArg};

mod progress;
mod retry;
mod status;
mod submission;
mod watch;

use retry::submit_retrying;
pub use status::{report_of, result, status, StatusPage};
pub use submission::{submission, SubmissionTarget};
pub use watch::{watch_until_done, WaitingWorkflow, WatchEnd, EXIT_AT_GATE};

/// How `caucus submit` submits.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Wall time of one time unit.
    pub time_unit_ms: Option<u64>,
    /// Follow progress until done.
    pub watch: bool,
    /// Gates approve themselves when nothing needs review.
    pub auto_approve_gates: bool,
    /// The submission's idempotency key (default: a new one per run, so
    /// the CLI's own retries never submit twice).
    pub idempotency_key: Option<String>,
}

/// Workflows listed by `submit` (and `--watch`'s final lines) before it
/// refers to `caucus submission` (or `caucus status`).
const LISTED: usize = 50;

/// Items from the command line, then from `file` (one per line, blank
/// lines and `#` comments skipped; `-` reads stdin).
pub fn gather_items(
    mut items: Vec<String>,
    file: Option<&std::path::Path>,
) -> anyhow::Result<Vec<String>> {
    if let Some(f) = file {
        let text = if f.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())?
        } else {
            std::fs::read_to_string(f)
                .map_err(|e| anyhow::anyhow!("items file {}: {e}", f.display()))?
        };
        items.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from),
        );
    }
    if items.is_empty() {
        anyhow::bail!("name at least one item (arguments or --items-file)");
    }
    Ok(items)
}

/// `caucus submit`: submits `items` (in parts when one request would be
/// too large) and, with `--watch`, follows them.
pub async fn run(
    client: &Client,
    items: Vec<String>,
    pipeline: &PipelineArg,
    opts: Options,
    as_json: bool,
) -> anyhow::Result<i32> {
    let watch = opts.watch;
    let key = opts
        .idempotency_key
        .clone()
        .unwrap_or_else(|| format!("cli-{}", uuid::Uuid::new_v4()));
    let mut request = SubmitRequest {
        items: Vec::new(),
        pipeline: pipeline_value(pipeline)?,
        time_unit_ms: opts.time_unit_ms,
        auto_approve_gates: opts.auto_approve_gates,
        idempotency_key: Some(key.clone()),
    };
    // A request over NATS's max_payload cannot be sent: it goes as several
    // submissions, each with a key derived from this one (so each is
    // retry-safe on its own).
    let limit = client
        .nats()
        .server_info()
        .max_payload
        .saturating_sub(PAYLOAD_HEADROOM);
    let base = serde_json::to_vec(&request)?.len();
    let parts = split_items(items, base, limit);
    if parts.len() > 1 {
        if watch {
            eprintln!(
                "--watch follows one submission; this one goes as {} (see caucus submission)",
                parts.len()
            );
        }
        return run_parts(client, request, &key, parts, as_json).await;
    }
    request.items = parts.into_iter().next().unwrap_or_default();
    let reply = submit_retrying(client, &request).await?;
    if as_json && !watch {
        println!("{}", serde_json::to_string_pretty(&reply)?);
        return Ok(0);
    }
    if !as_json {
        print_submitted(&reply);
    }
    if !watch {
        return Ok(0);
    }
    let ids = &reply.summary.workflow_ids;
    let count = reply.summary.count;
    if ids.len() < count {
        eprintln!(
            "watching the first {} of {count} workflows (the rest: caucus submission {} --all)",
            ids.len(),
            reply.summary.submission_id
        );
    }
    let fin = match watch_until_done(client, ids, !as_json, true).await? {
        WatchEnd::Done(fin) => fin,
        WatchEnd::AtGates(fin, waiting) => {
            if as_json {
                let out = AtGatesJson {
                    status: &fin,
                    waiting_at_gates: &waiting,
                };
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                watch::print_at_gates(&waiting);
            }
            return Ok(EXIT_AT_GATE);
        }
    };
    if as_json {
        println!("{}", serde_json::to_string_pretty(&fin)?);
    }
    let failed = fin
        .workflows
        .iter()
        .filter(|w| matches!(w.state, WorkflowState::Failed | WorkflowState::Paused))
        .count();
    Ok(if failed > 0 { 1 } else { 0 })
}

/// `submit --watch --json`'s document when it stops at gates: the last
/// status and the workflows that wait for a person.
#[derive(Serialize)]
struct AtGatesJson<'a> {
    /// The last status reply.
    #[serde(flatten)]
    status: &'a StatusReply,
    /// The workflows waiting at a gate.
    waiting_at_gates: &'a [WaitingWorkflow],
}

/// Bytes of a request kept free below `max_payload` (headers, slack).
const PAYLOAD_HEADROOM: usize = 16 * 1024;

/// `items` in consecutive parts whose JSON, added to a body of `base`
/// bytes, stays within `limit` bytes (one part when it all fits; an item
/// never splits).
pub fn split_items(items: Vec<String>, base: usize, limit: usize) -> Vec<Vec<String>> {
    let budget = limit.saturating_sub(base).max(1);
    let mut parts: Vec<Vec<String>> = vec![Vec::new()];
    let mut used = 0usize;
    for item in items {
        // Quoted, escaped, and a comma.
        let cost = serde_json::to_string(&item).map_or(item.len() + 3, |s| s.len() + 1);
        let last = parts.last_mut().expect("one part");
        if !last.is_empty() && used + cost > budget {
            parts.push(Vec::new());
            used = 0;
        }
        used += cost;
        parts.last_mut().expect("one part").push(item);
    }
    parts
}

/// A submission too large for one request, as consecutive submissions
/// with the keys `<key>#1`, `<key>#2`, ….
async fn run_parts(
    client: &Client,
    request: SubmitRequest,
    key: &str,
    parts: Vec<Vec<String>>,
    as_json: bool,
) -> anyhow::Result<i32> {
    let n = parts.len();
    let mut replies = Vec::with_capacity(n);
    for (i, items) in parts.into_iter().enumerate() {
        let part = SubmitRequest {
            items,
            idempotency_key: Some(format!("{key}#{}", i + 1)),
            ..request.clone()
        };
        replies.push(submit_retrying(client, &part).await?);
    }
    let total: usize = replies.iter().map(|r| r.summary.count).sum();
    let pipeline = replies
        .first()
        .map_or("?", |r| r.summary.pipeline.as_str())
        .to_string();
    if as_json {
        let out = PartsJson {
            pipeline: &pipeline,
            count: total,
            idempotency_key: key,
            parts: &replies,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    println!(
        "submitted {total} workflow(s) to {pipeline} as {n} submissions (one request would exceed NATS's max_payload):"
    );
    for r in &replies {
        println!(
            "  submission {}  idempotency key {}  {} workflow(s){}",
            r.summary.submission_id,
            r.summary.idempotency_key.as_deref().unwrap_or("?"),
            r.summary.count,
            if r.replayed {
                " (already submitted: nothing new created)"
            } else {
                ""
            }
        );
    }
    println!("  list them: caucus submission <submission> --all");
    Ok(0)
}

/// `submit --json`'s document for a submission sent in parts.
#[derive(Serialize)]
struct PartsJson<'a> {
    /// The pipeline's name.
    pipeline: &'a str,
    /// Workflows in all parts.
    count: usize,
    /// The key the parts' keys derive from.
    idempotency_key: &'a str,
    /// Each part's reply, in order.
    parts: &'a [SubmitReply],
}

/// The summary of a `submit` reply: the submission, and up to [`LISTED`]
/// workflows.
fn print_submitted(reply: &SubmitReply) {
    let s = &reply.summary;
    let sub = &s.submission_id;
    let verb = if reply.replayed {
        "already submitted (nothing new created):"
    } else {
        "submitted"
    };
    println!("{verb} {} workflow(s) to {}", s.count, s.pipeline);
    print!("  submission {sub}");
    if let Some(k) = &s.idempotency_key {
        print!("  idempotency key {k}");
    }
    println!();
    if reply.existing > 0 {
        println!(
            "  {} workflow(s) were stored by an earlier attempt and kept",
            reply.existing
        );
    }
    for w in reply.workflows.iter().take(LISTED) {
        println!("  {:<8} {}", w.item, w.workflow_id);
    }
    let listed = LISTED.min(reply.workflows.len());
    if s.count > listed {
        println!(
            "  … {} more: caucus submission {sub} --all",
            s.count - listed
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn items_split_only_past_the_payload_limit() {
        let items: Vec<String> = (0..100).map(|i| format!("T{i:03}")).collect();
        // Each costs 7 bytes (`"T000",`).
        assert_eq!(split_items(items.clone(), 100, 10_000).len(), 1);
        let parts = split_items(items.clone(), 100, 100 + 70);
        assert_eq!(parts.len(), 10);
        assert!(parts.iter().all(|p| p.len() == 10));
        assert_eq!(parts.concat(), items, "order kept, nothing lost");
        // An item larger than the budget still goes, alone.
        let big = vec!["x".repeat(50), "y".into()];
        assert_eq!(split_items(big, 0, 10).len(), 2);
        // 100,000 eight-character names (1.1 MB of JSON): two requests at 1 MiB.
        let many: Vec<String> = (0..100_000).map(|i| format!("S{i:07}")).collect();
        let parts = split_items(many, 200, 1_048_576 - PAYLOAD_HEADROOM);
        assert_eq!(parts.len(), 2);
        for p in &parts {
            // The items' bytes on top of a 200-byte rest of the body.
            let items = serde_json::to_vec(&json!({"items": p})).unwrap().len() - 12;
            assert!(items + 200 <= 1_048_576 - PAYLOAD_HEADROOM);
        }
    }
}
