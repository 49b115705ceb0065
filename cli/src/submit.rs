//! `caucus submit`, `status`, `result`, and the live `--watch` display.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::plan::pipeline_value;
use super::render::{utilisation, workflow_line};
use super::{Client, PipelineArg};

/// How often `--watch` polls.
const WATCH_EVERY: Duration = Duration::from_millis(250);

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

/// Longest wait for one `submit` answer (100,000 items take seconds).
const SUBMIT_TIMEOUT: Duration = Duration::from_secs(120);
/// Attempts of one submit that times out or meets a coordinator stepping
/// down; safe because every attempt carries the same idempotency key.
const SUBMIT_ATTEMPTS: u32 = 5;
/// Workflows listed by `submit` before it refers to `caucus submission`.
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

/// Sends `body` to `coordinator.submit`, again with the same body (and so
/// the same idempotency key) after a time-out or a coordinator that
/// stepped down or failed to store part of it.
async fn submit_retrying(client: &Client, body: Value) -> anyhow::Result<Value> {
    let mut attempt = 1;
    loop {
        match client
            .call_waiting("coordinator", "submit", body.clone(), SUBMIT_TIMEOUT)
            .await
        {
            Ok(v) => return Ok(v),
            Err(e)
                if attempt < SUBMIT_ATTEMPTS
                    && matches!(
                        e.code.as_str(),
                        "timeout" | "unavailable" | "store_failed" | "no_responders"
                    ) =>
            {
                eprintln!(
                    "submit: {} ({}); retrying with the same idempotency key ({attempt}/{})",
                    e.message,
                    e.code,
                    SUBMIT_ATTEMPTS - 1
                );
                tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt))).await;
                attempt += 1;
            }
            Err(e) => anyhow::bail!("coordinator.submit: {} ({})", e.message, e.code),
        }
    }
}

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
    let mut body = json!({"items": [], "pipeline": pipeline_value(pipeline)?,
                          "idempotency_key": key});
    if let Some(u) = opts.time_unit_ms {
        body["time_unit_ms"] = json!(u);
    }
    if opts.auto_approve_gates {
        body["auto_approve_gates"] = json!(true);
    }
    // A request over NATS's max_payload cannot be sent: it goes as several
    // submissions, each with a key derived from this one (so each is
    // retry-safe on its own).
    let limit = client
        .nats()
        .server_info()
        .max_payload
        .saturating_sub(PAYLOAD_HEADROOM);
    let base = serde_json::to_vec(&body)?.len();
    let parts = split_items(items, base, limit);
    if parts.len() > 1 {
        if watch {
            eprintln!(
                "--watch follows one submission; this one goes as {} (see caucus submission)",
                parts.len()
            );
        }
        return run_parts(client, body, &key, parts, as_json).await;
    }
    body["items"] = json!(parts.into_iter().next().unwrap_or_default());
    let reply = submit_retrying(client, body).await?;
    let ids: Vec<String> = reply["workflow_ids"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let count = reply["count"].as_u64().unwrap_or(ids.len() as u64) as usize;
    if as_json && !watch {
        println!("{}", serde_json::to_string_pretty(&reply)?);
        return Ok(0);
    }
    if !as_json {
        print_submitted(&reply, count);
    }
    if !watch {
        return Ok(0);
    }
    if ids.len() < count {
        eprintln!(
            "watching the first {} of {count} workflows (the rest: caucus submission {} --all)",
            ids.len(),
            reply["submission_id"].as_str().unwrap_or("?")
        );
    }
    let fin = match watch_until_done(client, &ids, !as_json, true).await? {
        WatchEnd::Done(fin) => fin,
        WatchEnd::AtGates(fin, waiting) => {
            if as_json {
                let mut fin = fin;
                fin["waiting_at_gates"] = json!(waiting);
                println!("{}", serde_json::to_string_pretty(&fin)?);
            } else {
                print_at_gates(&waiting);
            }
            return Ok(EXIT_AT_GATE);
        }
    };
    if as_json {
        println!("{}", serde_json::to_string_pretty(&fin)?);
    }
    let failed = fin["workflows"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|w| w["state"] == "failed" || w["state"] == "paused")
                .count()
        })
        .unwrap_or(0);
    Ok(if failed > 0 { 1 } else { 0 })
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
    body: Value,
    key: &str,
    parts: Vec<Vec<String>>,
    as_json: bool,
) -> anyhow::Result<i32> {
    let n = parts.len();
    let mut replies = Vec::with_capacity(n);
    for (i, items) in parts.into_iter().enumerate() {
        let mut b = body.clone();
        b["items"] = json!(items);
        b["idempotency_key"] = json!(format!("{key}#{}", i + 1));
        replies.push(submit_retrying(client, b).await?);
    }
    let total: u64 = replies.iter().filter_map(|r| r["count"].as_u64()).sum();
    let pipeline = replies[0]["pipeline"].clone();
    if as_json {
        let out = json!({"pipeline": pipeline, "count": total, "idempotency_key": key,
                         "parts": replies});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    println!(
        "submitted {total} workflow(s) to {} as {n} submissions (one request would exceed NATS's max_payload):",
        pipeline.as_str().unwrap_or("?")
    );
    for r in &replies {
        println!(
            "  submission {}  idempotency key {}  {} workflow(s){}",
            r["submission_id"].as_str().unwrap_or("?"),
            r["idempotency_key"].as_str().unwrap_or("?"),
            r["count"],
            if r["replayed"] == true {
                " (already submitted: nothing new created)"
            } else {
                ""
            }
        );
    }
    println!("  list them: caucus submission <submission> --all");
    Ok(0)
}

/// The summary of a `submit` reply: the submission, and up to [`LISTED`]
/// workflows.
fn print_submitted(reply: &Value, count: usize) {
    let sub = reply["submission_id"].as_str().unwrap_or("?");
    let verb = if reply["replayed"] == true {
        "already submitted (nothing new created):"
    } else {
        "submitted"
    };
    println!(
        "{verb} {count} workflow(s) to {}",
        reply["pipeline"].as_str().unwrap_or("?")
    );
    print!("  submission {sub}");
    if let Some(k) = reply["idempotency_key"].as_str() {
        print!("  idempotency key {k}");
    }
    println!();
    let existing = reply["existing"].as_u64().unwrap_or(0);
    if existing > 0 {
        println!("  {existing} workflow(s) were stored by an earlier attempt and kept");
    }
    let listed: Vec<&Value> = reply["workflows"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    for w in listed.iter().take(LISTED) {
        println!(
            "  {:<8} {}",
            w["item"].as_str().unwrap_or("?"),
            w["workflow_id"].as_str().unwrap_or("?")
        );
    }
    if count > LISTED.min(listed.len()) {
        println!(
            "  … {} more: caucus submission {sub} --all",
            count - LISTED.min(listed.len())
        );
    }
}

/// `caucus submission`: a submission's state and its workflow ids, one
/// page (`--cursor`, `--limit`) or all of them (`--all`).
pub async fn submission(
    client: &Client,
    target: SubmissionTarget,
    cursor: usize,
    limit: Option<usize>,
    all: bool,
    as_json: bool,
) -> anyhow::Result<i32> {
    let mut body = match &target {
        SubmissionTarget::Id(id) => json!({"submission_id": id}),
        SubmissionTarget::Key(k) => json!({"idempotency_key": k}),
    };
    if let Some(l) = limit {
        body["limit"] = json!(l);
    }
    let mut cursor = Some(cursor);
    let mut first = true;
    while let Some(c) = cursor {
        body["cursor"] = json!(c);
        let page = client
            .call_ok("coordinator", "submission", body.clone())
            .await?;
        if as_json {
            println!("{}", serde_json::to_string(&page)?);
        } else {
            if first {
                println!(
                    "submission {}  {}  {} workflow(s), {} stored, pipeline {}{}",
                    page["submission_id"].as_str().unwrap_or("?"),
                    page["state"].as_str().unwrap_or("?"),
                    page["count"],
                    page["stored"],
                    page["pipeline"].as_str().unwrap_or("?"),
                    page["idempotency_key"]
                        .as_str()
                        .map(|k| format!(", idempotency key {k}"))
                        .unwrap_or_default()
                );
            }
            for id in page["workflow_ids"].as_array().into_iter().flatten() {
                println!("{}", id.as_str().unwrap_or("?"));
            }
        }
        first = false;
        cursor = page["next_cursor"].as_u64().map(|n| n as usize);
        if !all {
            if let (Some(n), false) = (cursor, as_json) {
                println!("next page: --cursor {n}");
            }
            break;
        }
    }
    Ok(0)
}

/// Which submission `caucus submission` shows.
#[derive(Debug, Clone)]
pub enum SubmissionTarget {
    /// By id.
    Id(String),
    /// By the idempotency key it was submitted with.
    Key(String),
}

/// How `--watch` ended.
#[derive(Debug)]
pub enum WatchEnd {
    /// Every workflow completed, failed or was paused: the last status.
    Done(Value),
    /// Every unfinished workflow waits for a person at a gate: the last
    /// status and the waiting workflows (`[{workflow_id, item, gates}]`).
    AtGates(Value, Vec<Value>),
}

/// Exit code of `submit --watch` when it stops because every unfinished
/// workflow waits for a person at a gate.
pub const EXIT_AT_GATE: i32 = 4;

/// Polls status until every workflow in `ids` completed, failed or paused
/// (or, with `stop_at_gates`, until every unfinished one waits for a
/// person at a gate), drawing progress. On a terminal the view is redrawn
/// in place; otherwise a line is printed only when the count of finished
/// workflows changes, and the workflows' final lines at the end.
pub async fn watch_until_done(
    client: &Client,
    ids: &[String],
    draw: bool,
    stop_at_gates: bool,
) -> anyhow::Result<WatchEnd> {
    let tty = std::io::stdout().is_terminal();
    let started = Instant::now();
    let mut last_lines = 0usize;
    let mut last_done = usize::MAX;
    // Progress of the previous poll when every unfinished workflow sat at a
    // gate: the same picture twice in a row means nothing else moves.
    let mut gate_picture: Option<Vec<(String, u64)>> = None;
    loop {
        let st = client
            .call_ok("coordinator", "status", json!({"ids": ids}))
            .await?;
        let wfs = st["workflows"].as_array().cloned().unwrap_or_default();
        let done = wfs.iter().filter(|w| finished(w)).count();
        if draw {
            let mut out = std::io::stdout().lock();
            let summary = format!(
                "{:>6.1}s  {}/{} done  {}",
                started.elapsed().as_secs_f64(),
                done,
                ids.len(),
                utilisation(&st)
            );
            if tty {
                if last_lines > 0 {
                    write!(out, "\x1b[{last_lines}A\x1b[J")?;
                }
                for w in &wfs {
                    writeln!(out, "{}", workflow_line(w))?;
                }
                writeln!(out, "{summary}")?;
                last_lines = wfs.len() + 1;
            } else if done != last_done {
                writeln!(out, "{summary}")?;
            }
            last_done = done;
            out.flush()?;
        }
        let all_in = !wfs.is_empty() && wfs.len() == ids.len();
        if all_in && done == ids.len() {
            print_final(draw && !tty, &wfs)?;
            return Ok(WatchEnd::Done(st));
        }
        if stop_at_gates && all_in {
            let picture = gate_waits(&wfs);
            if picture.is_some() && picture == gate_picture {
                let waiting = waiting_for_people(client, &wfs).await;
                if waiting.len() == ids.len() - done {
                    print_final(draw && !tty, &wfs)?;
                    return Ok(WatchEnd::AtGates(st, waiting));
                }
            }
            gate_picture = picture;
        }
        tokio::time::sleep(WATCH_EVERY).await;
    }
}

/// Completed, failed, or paused (a paused workflow waits for a person:
/// stop watching it).
fn finished(w: &Value) -> bool {
    matches!(w["state"].as_str(), Some("completed" | "failed" | "paused"))
}

/// When every unfinished workflow has an open gate: their ids and
/// progress (to tell a standing picture from a moving one).
fn gate_waits(wfs: &[Value]) -> Option<Vec<(String, u64)>> {
    let mut out = Vec::new();
    for w in wfs.iter().filter(|w| !finished(w)) {
        if w["open_gates"].as_array().is_none_or(|g| g.is_empty()) {
            return None;
        }
        out.push((
            w["workflow_id"].as_str().unwrap_or_default().to_string(),
            w["progress"]["completed"].as_u64().unwrap_or(0),
        ));
    }
    Some(out)
}

/// The unfinished workflows whose open gate waits for a person: every one
/// not submitted with `auto_approve_gates`, and an auto-approving one
/// whose decision package holds provisional decisions to review.
async fn waiting_for_people(client: &Client, wfs: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for w in wfs.iter().filter(|w| !finished(w)) {
        let id = w["workflow_id"].as_str().unwrap_or_default();
        let needs_person = if w["auto_approve_gates"] == true {
            client
                .call("coordinator", "gate", json!({"workflow_id": id}))
                .await
                .is_ok_and(|p| p["provisional"]["count"].as_u64().unwrap_or(0) > 0)
        } else {
            true
        };
        if needs_person {
            out.push(json!({"workflow_id": id, "item": w["item"], "gates": w["open_gates"]}));
        }
    }
    out
}

/// Without a terminal, the workflows' final lines (the first [`LISTED`]).
fn print_final(print: bool, wfs: &[Value]) -> std::io::Result<()> {
    if !print {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    for w in wfs.iter().take(LISTED) {
        writeln!(out, "{}", workflow_line(w))?;
    }
    if wfs.len() > LISTED {
        writeln!(out, "… and {} more (caucus status)", wfs.len() - LISTED)?;
    }
    out.flush()
}

/// Tells the person what to run at each waiting gate.
fn print_at_gates(waiting: &[Value]) {
    println!(
        "\n{} workflow(s) wait for a person at a gate:",
        waiting.len()
    );
    for w in waiting.iter().take(LISTED) {
        let id = w["workflow_id"].as_str().unwrap_or("?");
        let gates: Vec<&str> = w["gates"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        println!(
            "  {:<8} gate {}:  caucus gate show {id}   then   caucus gate approve {id} --rationale \"…\"",
            w["item"].as_str().unwrap_or("?"),
            gates.join(",")
        );
    }
    if waiting.len() > LISTED {
        println!("  … and {} more (caucus gate list)", waiting.len() - LISTED);
    }
    println!(
        "(exit code {EXIT_AT_GATE}: waiting at a human gate; submit with --auto-approve-gates for an unattended run)"
    );
}

/// Paging of `caucus status` without ids.
#[derive(Debug, Clone, Default)]
pub struct StatusPage {
    /// Workflows per page.
    pub limit: Option<usize>,
    /// Where the first page starts.
    pub cursor: Option<String>,
    /// Follow `next_cursor` to the end.
    pub all: bool,
}

pub async fn status(
    client: &Client,
    ids: Vec<String>,
    states: Vec<String>,
    tasks: bool,
    page: StatusPage,
    as_json: bool,
) -> anyhow::Result<i32> {
    let listing = ids.is_empty();
    let mut cursor = page.cursor.clone();
    let mut shown = 0usize;
    // `--json --all`: one document with every page's workflows.
    let mut merged: Option<Value> = None;
    // Named workflows the coordinator does not hold.
    let mut missing: Vec<String> = Vec::new();
    loop {
        let mut body = json!({"ids": ids, "states": states, "tasks": tasks});
        if listing {
            if let Some(l) = page.limit {
                body["limit"] = json!(l);
            }
            if let Some(c) = &cursor {
                body["cursor"] = json!(c);
            }
        }
        let st = client.call_ok("coordinator", "status", body).await?;
        if !listing && states.is_empty() {
            missing = super::render::missing_ids(&ids, &st);
        }
        let next = st["next_cursor"].as_str().map(String::from);
        if as_json {
            shown += st["workflows"].as_array().map_or(0, Vec::len);
            merged = Some(match merged.take() {
                None => st,
                Some(mut m) => {
                    let more = st["workflows"].as_array().cloned().unwrap_or_default();
                    if let Some(a) = m["workflows"].as_array_mut() {
                        a.extend(more);
                    }
                    for k in ["next_cursor", "load", "capacity"] {
                        m[k] = st[k].clone();
                    }
                    m
                }
            });
        } else {
            shown += print_status(&st);
        }
        match next {
            Some(c) if page.all && listing => cursor = Some(c),
            Some(c) => {
                if !as_json {
                    println!(
                        "more workflows: caucus status --cursor {c}{} (or --all)",
                        page.limit
                            .map(|l| format!(" --limit {l}"))
                            .unwrap_or_default()
                    );
                }
                break;
            }
            None => break,
        }
    }
    if let Some(m) = merged {
        println!("{}", serde_json::to_string_pretty(&m)?);
    } else if shown == 0 && missing.is_empty() {
        println!("no workflows");
    }
    for id in &missing {
        eprintln!("no workflow {id} (finished workflows are kept for coordinator.retain_history)");
    }
    Ok(if missing.is_empty() { 0 } else { 1 })
}

/// Prints one status reply; returns how many workflows it showed.
fn print_status(st: &Value) -> usize {
    let wfs = st["workflows"].as_array().cloned().unwrap_or_default();
    for w in &wfs {
        println!("{}", workflow_line(w));
        for line in super::render::research_lines(w) {
            println!("    {line}");
        }
        if let Some(t) = w["tasks"].as_object() {
            for (k, t) in t {
                println!(
                    "    {:<14} {:<10} attempt {} {}",
                    k,
                    t["state"].as_str().unwrap_or("?"),
                    t["attempt"],
                    t["worker_id"].as_str().unwrap_or("")
                );
            }
            for line in super::level_review::level_review_lines(w) {
                println!("    {line}");
            }
        }
    }
    let u = utilisation(st);
    if !u.is_empty() {
        println!("{u}");
    }
    wfs.len()
}

/// Finds a workflow by id or item and prints its report. An id is asked
/// for alone; an item is looked up in pages of the list (no outputs), and
/// its newest workflow then asked for alone.
pub async fn result(client: &Client, target: &str) -> anyhow::Result<i32> {
    let one =
        |id: &str| client.call_ok("coordinator", "status", json!({"ids": [id], "tasks": true}));
    let st = one(target).await?;
    if let Some(w) = st["workflows"].as_array().and_then(|a| a.first()).cloned() {
        return print_report(&w);
    }
    let mut newest: Option<(String, String)> = None;
    let mut cursor: Option<String> = None;
    loop {
        let mut body = json!({"limit": 1000});
        if let Some(c) = &cursor {
            body["cursor"] = json!(c);
        }
        let page = client.call_ok("coordinator", "status", body).await?;
        for w in page["workflows"].as_array().into_iter().flatten() {
            if w["item"] == target {
                let at = w["created_at"].as_str().unwrap_or("").to_string();
                let id = w["workflow_id"].as_str().unwrap_or("").to_string();
                if newest.as_ref().is_none_or(|(a, _)| at >= *a) {
                    newest = Some((at, id));
                }
            }
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let Some((_, id)) = newest else {
        eprintln!("no workflow with id or item `{target}`");
        return Ok(1);
    };
    let st = one(&id).await?;
    match st["workflows"].as_array().and_then(|a| a.first()) {
        Some(w) => print_report(w),
        None => {
            eprintln!("workflow {id} (item `{target}`) is no longer held");
            Ok(1)
        }
    }
}

fn print_report(w: &Value) -> anyhow::Result<i32> {
    match report_of(w) {
        Some(md) => {
            println!("{md}");
            Ok(0)
        }
        None => {
            eprintln!(
                "workflow {} ({}) has no report yet: state {}",
                w["workflow_id"].as_str().unwrap_or("?"),
                w["item"].as_str().unwrap_or("?"),
                w["state"].as_str().unwrap_or("?")
            );
            Ok(1)
        }
    }
}

/// The markdown report in a workflow's `report` task output, if any.
pub fn report_of(w: &Value) -> Option<String> {
    // A research run's report is its SYNTHESIZING stage's output.
    let stage = w["research"]["phase_stages"]["SYNTHESIZING"]
        .as_str()
        .unwrap_or("report");
    let out = &w["tasks"][stage]["output"];
    out["markdown"]
        .as_str()
        .or_else(|| out["report"].as_str())
        .map(String::from)
        .or_else(|| (!out.is_null()).then(|| serde_json::to_string_pretty(out).unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
