//! Text rendering of replies for people: status lines, numbers rounded,
//! durations, timestamps and aligned tables.

use serde_json::Value;

use caucus_shared::api::coordinator::status::{Progress, StatusReply, WorkflowView};

/// A number for people: two decimals (`0.999997851310515` → `1.00`); a
/// small non-zero one keeps two significant digits (`0.0042`, `0.001`); whole JSON
/// integers stay whole.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let a = x.abs();
    if a > 0.0 && a < 0.005 {
        let digits = (-a.log10().floor()) as usize + 1;
        let s = format!("{x:.digits$}");
        return s.trim_end_matches('0').to_string();
    }
    let s = format!("{x:.2}");
    if s == "-0.00" {
        "0.00".into()
    } else {
        s
    }
}

/// A JSON value for people: strings as they are, numbers through [`num`]
/// (integers whole), arrays joined by `, `, null as `-`.
pub fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        Value::Number(n) => n.as_f64().map(num).unwrap_or_else(|| n.to_string()),
        Value::Array(a) if a.is_empty() => "-".into(),
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// A ratio 0..=1 as a whole percentage (`0.875` → `88%`); `-` when absent.
pub fn percent(v: &Value) -> String {
    match v.as_f64() {
        Some(x) => format!("{:.0}%", x * 100.0),
        None => "-".into(),
    }
}

/// Milliseconds for people: `850ms`, `4.2s`, `3m07s`, `2h05m`.
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    let s = ms / 1000;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if ms >= 1000 {
        format!("{}.{}s", s, (ms % 1000) / 100)
    } else {
        format!("{ms}ms")
    }
}

/// An RFC 3339 timestamp to the second, in UTC (`2026-11-25 14:58:57 UTC`);
/// anything else as [`text`] shows it.
pub fn when(v: &Value) -> String {
    v.as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|t| {
            t.with_timezone(&chrono::Utc)
                .format("%Y-%m-%d %H:%M:%S UTC")
                .to_string()
        })
        .unwrap_or_else(|| text(v))
}

/// Column alignment in [`table`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Padded on the right (names).
    Left,
    /// Padded on the left (numbers).
    Right,
}

/// Rows under headers, each column as wide as its widest cell (counted in
/// characters), separated by two spaces; the last column is not padded.
pub fn table(headers: &[(&str, Align)], rows: &[Vec<String>]) -> String {
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = headers.iter().map(|(h, _)| width(h)).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(widths.len()) {
            widths[i] = widths[i].max(width(c));
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, c) in cells.into_iter().enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            let pad = " ".repeat(widths[i].saturating_sub(width(c)));
            match headers[i].1 {
                Align::Right => {
                    out.push_str(&pad);
                    out.push_str(c);
                }
                Align::Left if i == last => out.push_str(c),
                Align::Left => {
                    out.push_str(c);
                    out.push_str(&pad);
                }
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    };
    let mut out = line(headers.iter().map(|(h, _)| *h).collect());
    for r in rows {
        out.push_str(&line(
            (0..headers.len())
                .map(|i| r.get(i).map_or("", String::as_str))
                .collect(),
        ));
    }
    out
}

/// The ids of a `coordinator.status` request for named workflows that its
/// reply does not hold (a request without a state filter: with one, a held
/// workflow in another state is left out as well).
pub fn missing_ids(ids: &[String], reply: &StatusReply) -> Vec<String> {
    ids.iter()
        .filter(|id| !reply.workflows.iter().any(|w| &w.workflow_id == *id))
        .cloned()
        .collect()
}

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
pub fn workflow_line(w: &WorkflowView) -> String {
    let Progress { completed, total } = w.progress;
    let mut line = format!(
        "{:<8} {} {}/{} {:<9} {}",
        w.item,
        bar(completed as u64, total as u64, 12),
        completed,
        total,
        w.state.as_str(),
        w.workflow_id,
    );
    if let Some(r) = &w.research {
        line.push_str(&format!("  phase {}", r.phase));
    }
    if !w.overdue_tasks.is_empty() {
        line.push_str(&format!("  overdue: {}", w.overdue_tasks.join(",")));
    }
    if !w.open_gates.is_empty() {
        line.push_str(&format!(
            "  waiting for a decision at gate {} (caucus gate show {})",
            w.open_gates.join(","),
            w.workflow_id
        ));
    }
    if let Some(f) = &w.failure {
        line.push_str(&format!("  ({f})"));
    }
    // A request workflow's "answered" mark is bookkeeping, not a reason
    // to look again at the analysis.
    let reevaluate: Vec<_> = w
        .flags
        .iter()
        .filter(|f| f.kind != "request_answered")
        .collect();
    if !reevaluate.is_empty() {
        let what: Vec<String> = reevaluate
            .iter()
            .map(
                |f| match f.detail.get("new_regime").and_then(Value::as_str) {
                    Some(r) => format!("{} → {r}", f.kind),
                    None => f.kind.clone(),
                },
            )
            .collect();
        line.push_str(&format!("  re-evaluate: {}", what.join(", ")));
    }
    line
}

/// Utilisation per agent type from a status reply's `load` and `capacity`.
pub fn utilisation(status: &StatusReply) -> String {
    status
        .load
        .iter()
        .map(|(agent, l)| {
            let cap = status.capacity.get(agent).copied().unwrap_or(0);
            format!("{agent} {}/{cap} busy, {} ready", l.in_flight, l.ready)
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The research phases whose gates `research_lines` shows, in run order.
const GATED_PHASES: [&str; 5] = [
    "DISCOVERING",
    "CONSOLIDATING",
    "VALIDATING",
    "ANALYZING",
    "SYNTHESIZING",
];

/// A research run's streams, gates and refused writes, one per line.
pub fn research_lines(w: &WorkflowView) -> Vec<String> {
    let Some(r) = &w.research else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (n, s) in &r.streams {
        let mut l = format!("stream-{n:<2} {:<12} {} sources", s.state, s.sources);
        if let Some(p) = &s.progress {
            l.push_str(&format!("  progress {p}"));
        }
        if let (Some(eta), "running") = (s.eta, s.state.as_str()) {
            l.push_str(&format!(
                "  eta {}",
                eta.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
            ));
        }
        if let Some(e) = &s.error {
            l.push_str(&format!("  ({e})"));
        }
        out.push(l);
    }
    for (phase, g) in GATED_PHASES
        .iter()
        .filter_map(|p| r.gates.get(*p).map(|g| (p, g)))
    {
        let mut l = format!("gate {phase:<13} {}", g.verdict);
        if !g.reasons.is_empty() {
            l.push_str(&format!(": {}", g.reasons.join("; ")));
        }
        out.push(l);
    }
    if r.refused_count > 0 {
        out.push(format!(
            "{} write(s) refused outside their key space",
            r.refused_count
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_are_rounded_for_people() {
        assert_eq!(num(0.999997851310515), "1.00");
        assert_eq!(num(0.28), "0.28");
        assert_eq!(num(185.456), "185.46");
        assert_eq!(num(-0.001), "-0.001");
        assert_eq!(num(0.00049999), "0.0005");
        assert_eq!(num(0.0042), "0.0042");
        assert_eq!(num(-0.0001), "-0.0001");
        assert_eq!(num(0.0), "0.00");
        assert_eq!(num(-0.0000), "0.00");
        assert_eq!(text(&json!(0.999997851310515)), "1.00");
        assert_eq!(text(&json!(3)), "3");
        assert_eq!(text(&json!(9.0)), "9.00");
        assert_eq!(text(&json!(null)), "-");
        assert_eq!(text(&json!(["a", 0.126, 2])), "a, 0.13, 2");
        assert_eq!(text(&json!([])), "-");
        assert_eq!(percent(&json!(0.875)), "88%");
        assert_eq!(percent(&json!(null)), "-");
    }

    #[test]
    fn durations_and_timestamps() {
        assert_eq!(duration(850), "850ms");
        assert_eq!(duration(4_210), "4.2s");
        assert_eq!(duration(187_000), "3m07s");
        assert_eq!(duration(7_500_000), "2h05m");
        assert_eq!(duration(-5), "0ms");
        assert_eq!(
            when(&json!("2026-11-25T14:58:57.123456789Z")),
            "2026-11-25 14:58:57 UTC"
        );
        assert_eq!(
            when(&json!("2026-11-25T16:58:57+02:00")),
            "2026-11-25 14:58:57 UTC"
        );
        assert_eq!(when(&json!("soon")), "soon");
        assert_eq!(when(&json!(null)), "-");
    }

    #[test]
    fn table_columns_fit_the_widest_cell() {
        let t = table(
            &[
                ("agent", Align::Left),
                ("n", Align::Right),
                ("who", Align::Left),
            ],
            &[
                vec!["fundamental_analysis".into(), "3".into(), "w1×3".into()],
                vec!["val".into(), "12".into(), String::new()],
            ],
        );
        assert_eq!(
            t,
            "agent                  n  who\n\
             fundamental_analysis   3  w1×3\n\
             val                   12\n"
        );
    }

    fn reply(workflows: serde_json::Value) -> StatusReply {
        serde_json::from_value(json!({"workflows": workflows, "next_cursor": null,
                                      "load": {}, "capacity": {}}))
        .unwrap()
    }

    #[test]
    fn ids_a_status_reply_does_not_hold() {
        let one = json!({"workflow_id": "wf-1", "item": "A", "item_token": "A",
            "pipeline": "p", "state": "running", "progress": {"completed": 1, "total": 4},
            "overdue_tasks": [], "created_at": "2026-11-25T12:00:00Z",
            "updated_at": "2026-11-25T12:00:00Z"});
        let ids = vec!["wf-1".to_string(), "wf-2".to_string()];
        assert_eq!(
            missing_ids(&ids, &reply(json!([one]))),
            vec!["wf-2".to_string()]
        );
        assert_eq!(missing_ids(&ids, &reply(json!([]))), ids);
        let w = &reply(json!([one])).workflows[0];
        assert_eq!(
            workflow_line(w),
            "A        [###.........] 1/4 running   wf-1"
        );
    }
}
