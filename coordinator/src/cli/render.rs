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
    if let Some(p) = w["research"]["phase"].as_str() {
        line.push_str(&format!("  phase {p}"));
    }
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
    if let Some(flags) = w["flags"].as_array().filter(|f| !f.is_empty()) {
        let what: Vec<String> = flags
            .iter()
            .map(|f| match f["detail"]["new_regime"].as_str() {
                Some(r) => format!("{} → {r}", f["kind"].as_str().unwrap_or("?")),
                None => f["kind"].as_str().unwrap_or("?").to_string(),
            })
            .collect();
        line.push_str(&format!("  re-evaluate: {}", what.join(", ")));
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

/// A research run's streams, gates and refused writes, one per line.
pub fn research_lines(w: &Value) -> Vec<String> {
    let r = &w["research"];
    if r.is_null() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (n, s) in r["streams"].as_object().into_iter().flatten() {
        let mut l = format!(
            "stream-{n:<2} {:<12} {} sources",
            s["state"].as_str().unwrap_or("?"),
            s["sources"]
        );
        if let Some(p) = s["progress"].as_str() {
            l.push_str(&format!("  progress {p}"));
        }
        if let (Some(eta), "running") = (s["eta"].as_str(), s["state"].as_str().unwrap_or("")) {
            l.push_str(&format!("  eta {eta}"));
        }
        if let Some(e) = s["error"].as_str() {
            l.push_str(&format!("  ({e})"));
        }
        out.push(l);
    }
    let phases = [
        "DISCOVERING",
        "CONSOLIDATING",
        "VALIDATING",
        "ANALYZING",
        "SYNTHESIZING",
    ];
    for (phase, g) in phases
        .iter()
        .map(|p| (p, &r["gates"][p]))
        .filter(|(_, g)| !g.is_null())
    {
        let reasons: Vec<&str> = g["reasons"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut l = format!("gate {phase:<13} {}", g["verdict"].as_str().unwrap_or("?"));
        if !reasons.is_empty() {
            l.push_str(&format!(": {}", reasons.join("; ")));
        }
        out.push(l);
    }
    if let Some(n) = r["refused_count"].as_u64().filter(|n| *n > 0) {
        out.push(format!("{n} write(s) refused outside their key space"));
    }
    out
}
