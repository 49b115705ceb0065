//! Text rendering of status replies.

use serde_json::Value;

/// `[#####.]` for `done` of `total`.
pub fn bar(done: u64, total: u64, width: usize) -> String {
    let filled = if total == 0 {
        0
    } else {
        (done as usize * width).div_ceil(total as usize).min(width)
    };
    format!("[{}{}]", "#".repeat(filled), ".".repeat(width - filled))
}

/// One line per workflow.
pub fn workflow_line(w: &Value) -> String {
    let done = w["progress"]["completed"].as_u64().unwrap_or(0);
    let total = w["progress"]["total"].as_u64().unwrap_or(0);
    let mut line = format!(
        "{:<8} {} {}/{} {:<9} {}",
        w["item"].as_str().unwrap_or("?"),
        bar(done, total, 12),
        done,
        total,
        w["state"].as_str().unwrap_or("?"),
        &w["workflow_id"].as_str().unwrap_or("?"),
    );
    if let Some(o) = w["overdue_tasks"].as_array().filter(|o| !o.is_empty()) {
        let names: Vec<&str> = o.iter().filter_map(Value::as_str).collect();
        line.push_str(&format!("  overdue: {}", names.join(",")));
    }
    if let Some(g) = w["open_gates"].as_array().filter(|g| !g.is_empty()) {
        let names: Vec<&str> = g.iter().filter_map(Value::as_str).collect();
        line.push_str(&format!(
            "  waiting for a decision at gate {} (caucus gate show {})",
            names.join(","),
            w["workflow_id"].as_str().unwrap_or("?")
        ));
    }
    if let Some(f) = w["failure"].as_str() {
        line.push_str(&format!("  ({f})"));
    }
    line
}

/// Utilisation per agent type from a status reply's `load` and `capacity`.
pub fn utilisation(status: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(load) = status["load"].as_object() {
        for (agent, l) in load {
            let cap = status["capacity"][agent].as_u64().unwrap_or(0);
            parts.push(format!(
                "{agent} {}/{} busy, {} ready",
                l["in_flight"].as_u64().unwrap_or(0),
                cap,
                l["ready"].as_u64().unwrap_or(0)
            ));
        }
    }
    parts.join(" | ")
}
