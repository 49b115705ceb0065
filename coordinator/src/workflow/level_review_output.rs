//! What a review agent returns, made dependable: [`normalise`] turns any
//! JSON a reviewer produced (caucus names, the seed's names, a bare text)
//! into a [`LevelReview`] that next-level tasks can rely on. Nothing a
//! reviewer sends is fatal; every problem is listed in `issues`, and a
//! conflict the reviewer did not mark resolved becomes a warning.

use serde_json::Value;

pub use caucus_shared::outputs::review::{Conflict, LevelReview, ReviewedConflict};

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The first of `names` present in `m`.
fn field<'a>(m: &'a serde_json::Map<String, Value>, names: &[&str]) -> Option<(&'a Value, String)> {
    names
        .iter()
        .find_map(|n| m.get(*n).map(|v| (v, n.to_string())))
}

/// A list of texts: strings kept, a single string accepted, other values
/// written as JSON.
fn texts(v: &Value, name: &str, issues: &mut Vec<String>) -> Vec<String> {
    let one = |x: &Value| match x {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match v {
        Value::Array(a) => a.iter().map(one).filter(|s| !s.is_empty()).collect(),
        Value::String(s) if !s.is_empty() => vec![s.clone()],
        Value::Null => Vec::new(),
        other => {
            issues.push(format!(
                "`{name}` is {}, not a list of texts; kept as one entry",
                type_name(other)
            ));
            vec![other.to_string()]
        }
    }
}

/// A reviewer's conflict entry: `resource` (or the seed's `file_path`, or
/// `path`), `resolved`, `resolution` (or `resolution_description`), `tasks`.
fn reviewed(v: &Value) -> Option<ReviewedConflict> {
    let m = v.as_object()?;
    let resource = field(m, &["resource", "file_path", "path"])?.0.as_str()?;
    let tasks = m
        .get("tasks")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    Some(ReviewedConflict {
        resource: resource.trim().trim_start_matches("./").to_string(),
        tasks,
        resolved: m.get("resolved").and_then(Value::as_bool).unwrap_or(false),
        resolution: field(m, &["resolution", "resolution_description"])
            .and_then(|(v, _)| v.as_str())
            .unwrap_or_default()
            .to_string(),
    })
}

/// Normalises the output of the review of `level`, which was dispatched
/// with `detected` conflicts and took `measured_ms` by the task's clock.
pub fn normalise(
    level: u32,
    detected: &[Conflict],
    output: &Value,
    measured_ms: u64,
) -> LevelReview {
    let mut issues = Vec::new();
    let mut review = LevelReview {
        level,
        conflicts: Vec::new(),
        summary: String::new(),
        fixes_applied: Vec::new(),
        warnings_for_next_level: Vec::new(),
        duration_ms: measured_ms,
        issues: Vec::new(),
    };
    let mut reported: Vec<ReviewedConflict> = Vec::new();
    match output {
        Value::String(s) => review.summary = s.clone(),
        Value::Object(m) => {
            if let Some((v, name)) = field(m, &["summary", "review_summary"]) {
                match v.as_str() {
                    Some(s) => review.summary = s.to_string(),
                    None => issues.push(format!("`{name}` is {}, not a text", type_name(v))),
                }
            }
            if let Some(v) = m.get("fixes_applied") {
                review.fixes_applied = texts(v, "fixes_applied", &mut issues);
            }
            if let Some((v, name)) = field(m, &["warnings_for_next_level", "warnings"]) {
                review.warnings_for_next_level = texts(v, &name, &mut issues);
            }
            if let Some((v, name)) = field(m, &["conflicts", "conflicts_detected"]) {
                match v.as_array() {
                    Some(a) => {
                        for c in a {
                            match reviewed(c) {
                                Some(r) => reported.push(r),
                                None => {
                                    issues.push(format!("a `{name}` entry names no resource: {c}"))
                                }
                            }
                        }
                    }
                    None => issues.push(format!("`{name}` is {}, not a list", type_name(v))),
                }
            }
            if let Some(ms) = m.get("duration_ms").and_then(Value::as_f64) {
                review.duration_ms = ms.max(0.0).round() as u64;
            } else if let Some(s) = m.get("duration_seconds").and_then(Value::as_f64) {
                review.duration_ms = (s.max(0.0) * 1000.0).round() as u64;
            }
            if let Some(l) = m.get("level").and_then(Value::as_u64) {
                if l != u64::from(level) {
                    issues.push(format!(
                        "the reviewer answered for level {l}; this is the review of level {level}"
                    ));
                }
            }
        }
        other => issues.push(format!(
            "the review output is {}, not an object or a text",
            type_name(other)
        )),
    }
    for d in detected {
        let mine = reported.iter().position(|r| r.resource == d.resource);
        let (resolved, resolution) = match mine {
            Some(i) => {
                let r = reported.remove(i);
                (r.resolved, r.resolution)
            }
            None => (false, String::new()),
        };
        review.conflicts.push(ReviewedConflict {
            resource: d.resource.clone(),
            tasks: d.tasks.clone(),
            resolved,
            resolution,
        });
    }
    review.conflicts.extend(reported);
    for c in review.conflicts.iter().filter(|c| !c.resolved) {
        let by = if c.tasks.is_empty() {
            String::new()
        } else {
            format!(" (modified by {})", c.tasks.join(", "))
        };
        review.warnings_for_next_level.push(format!(
            "unresolved conflict on `{}`{by}: the review did not resolve it",
            c.resource
        ));
    }
    review.issues = issues;
    review
}
