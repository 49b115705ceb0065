//! `caucus workers`.

use serde_json::Value;

use super::render::{duration, table, text, Align::Left, Align::Right};
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

/// The text table of a `coordinator.workers` reply: per agent type its
/// capacity (live workers' slots, capped), the leases held now (Redis), the
/// tasks the scheduler has in flight, the task queue, ready tasks and the
/// oldest ready task's wait; columns as wide as their widest cell.
pub fn render(v: &Value) -> String {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for a in v["agents"].as_array().into_iter().flatten() {
        let agent = text(&a["agent_type"]);
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
                format!("{}×{}{missed}", text(&w["worker_id"]), text(&w["slots"]))
            })
            .collect();
        let mut capacity = text(&a["capacity"]);
        if let Some(cap) = a["cap"].as_u64() {
            capacity.push_str(&format!(" (cap {cap})"));
        }
        let wait = match a["oldest_wait_ms"].as_i64() {
            Some(ms) if a["ready"].as_u64().unwrap_or(0) > 0 => duration(ms),
            _ => "-".into(),
        };
        if let Some(ms) = a["recovering_ms"].as_i64().filter(|ms| *ms > 0) {
            notes.push(format!(
                "{agent}: recovering after a Redis restart, no new lease for {}",
                duration(ms)
            ));
        }
        rows.push(vec![
            agent,
            capacity,
            text(&a["in_use"]),
            text(&a["in_flight"]),
            text(&a["queue_depth"]),
            text(&a["ready"]),
            wait,
            if workers.is_empty() {
                "none".into()
            } else {
                workers.join(", ")
            },
        ]);
    }
    let mut out = if rows.is_empty() {
        "no agent types: no worker is registered and no task is waiting\n".to_string()
    } else {
        table(
            &[
                ("agent", Left),
                ("capacity", Right),
                ("leased", Right),
                ("in flight", Right),
                ("queued", Right),
                ("ready", Right),
                ("oldest wait", Right),
                ("workers", Left),
            ],
            &rows,
        )
    };
    for n in notes {
        out.push_str(&n);
        out.push('\n');
    }
    match v["bottleneck"].as_object() {
        Some(b) => out.push_str(&format!(
            "live bottleneck: {} (oldest ready task waiting {}, {} ready); about {} more slot(s) would clear it\n",
            b.get("agent_type").map(text).unwrap_or_default(),
            duration(b.get("oldest_wait_ms").and_then(Value::as_i64).unwrap_or(0)),
            b.get("ready").map(text).unwrap_or_default(),
            b.get("more_slots").map(text).unwrap_or_default(),
        )),
        None => out.push_str("live bottleneck: none (no ready task is waiting)\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn columns_fit_long_agent_types_and_leases_are_shown() {
        let v = json!({
            "agents": [
                {"agent_type": "fundamental_analysis_long_name", "capacity": 3, "cap": null,
                 "in_use": 0, "in_flight": 0, "queue_depth": 0, "ready": 0,
                 "oldest_wait_ms": 0, "recovering_ms": 0,
                 "workers": [{"worker_id": "w-1", "slots": 3, "heartbeat_missed": false}]},
                {"agent_type": "valuation", "capacity": 1, "cap": 1,
                 "in_use": 1, "in_flight": 1, "queue_depth": 4, "ready": 2,
                 "oldest_wait_ms": 4210, "recovering_ms": 0,
                 "workers": [{"worker_id": "w-2", "slots": 2, "heartbeat_missed": true}]},
            ],
            "bottleneck": {"agent_type": "valuation", "oldest_wait_ms": 4210, "ready": 2, "more_slots": 2},
        });
        assert_eq!(
            render(&v),
            "agent                            capacity  leased  in flight  queued  ready  oldest wait  workers\n\
             fundamental_analysis_long_name          3       0          0       0      0            -  w-1×3\n\
             valuation                       1 (cap 1)       1          1       4      2         4.2s  w-2×2 (missed heartbeat)\n\
             live bottleneck: valuation (oldest ready task waiting 4.2s, 2 ready); about 2 more slot(s) would clear it\n"
        );
    }

    #[test]
    fn no_agents_and_recovery() {
        let out = render(&json!({"agents": [], "bottleneck": null}));
        assert!(out.starts_with("no agent types"), "{out}");
        let out = render(&json!({"agents": [
            {"agent_type": "a", "capacity": 1, "in_use": 0, "recovering_ms": 12000, "workers": []}
        ], "bottleneck": null}));
        assert!(
            out.contains("a: recovering after a Redis restart, no new lease for 12.0s"),
            "{out}"
        );
    }
}
