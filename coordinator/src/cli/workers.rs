//! `caucus workers`.

use serde_json::Value;

use super::Client;

pub async fn run(client: &Client, as_json: bool) -> anyhow::Result<i32> {
    let v = client
        .call_ok("coordinator", "workers", Value::Null)
        .await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    print!("{}", render(&v));
    Ok(0)
}

/// The text table of a `coordinator.workers` reply.
pub fn render(v: &Value) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<12} {:>8} {:>7} {:>7} {:>6} {:>10}  workers\n",
        "agent", "capacity", "in use", "queued", "ready", "oldest ms"
    ));
    for a in v["agents"].as_array().into_iter().flatten() {
        let workers: Vec<String> = a["workers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| {
                let missed = if w["heartbeat_missed"].as_bool().unwrap_or(false) {
                    " (missed heartbeat)"
                } else {
                    ""
                };
                format!(
                    "{}×{}{missed}",
                    w["worker_id"].as_str().unwrap_or("?"),
                    w["slots"]
                )
            })
            .collect();
        out.push_str(&format!(
            "{:<12} {:>8} {:>7} {:>7} {:>6} {:>10}  {}\n",
            a["agent_type"].as_str().unwrap_or("?"),
            a["capacity"],
            a["in_use"],
            a["queue_depth"],
            a["ready"],
            a["oldest_wait_ms"],
            workers.join(", ")
        ));
    }
    match v["bottleneck"].as_object() {
        Some(b) => out.push_str(&format!(
            "live bottleneck: {} (oldest ready task waiting {} ms, {} ready); about {} more slot(s) would clear it\n",
            b["agent_type"].as_str().unwrap_or("?"),
            b["oldest_wait_ms"],
            b["ready"],
            b["more_slots"]
        )),
        None => out.push_str("live bottleneck: none (no ready task is waiting)\n"),
    }
    out
}
