//! Patterns and key insights over the validated sources.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use caucus_shared::task::{TaskDispatch, TaskError};

use super::{completion, input, kind_of, u64_param, write, OUTPUT_SCHEMA_VERSION};

/// Insights produced at most.
const MAX_INSIGHTS: usize = 8;

pub(super) fn run(task: &TaskDispatch) -> Result<Value, TaskError> {
    let checked = input(task, "validate")?;
    let mut valid: Vec<Value> = checked["sources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["validated"] == true)
        .cloned()
        .collect();
    let mut by_kind: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    let mut by_aspect: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in &valid {
        let id = s["id"].as_str().unwrap_or("").to_string();
        by_kind
            .entry(kind_of(s["domain"].as_str().unwrap_or("")))
            .or_default()
            .push(id.clone());
        by_aspect
            .entry(s["aspect"].as_str().unwrap_or("general").to_string())
            .or_default()
            .push(id);
    }
    let mut patterns: Vec<Value> = by_kind
        .iter()
        .map(|(k, ids)| {
            json!({"name": format!("{k} sources"), "description": format!("{} validated {k} sources agree on the topic's direction", ids.len()), "sources": ids})
        })
        .chain(by_aspect.iter().filter(|(_, ids)| ids.len() >= 2).map(|(a, ids)| {
            json!({"name": a, "description": format!("{} corroborating sources on {a}", ids.len()), "sources": ids})
        }))
        .collect();
    valid.sort_by(|a, b| {
        b["credibility"]
            .as_u64()
            .cmp(&a["credibility"].as_u64())
            .then_with(|| a["id"].as_str().cmp(&b["id"].as_str()))
    });
    let omit_evidence = task.params.get("omit_evidence").and_then(Value::as_bool) == Some(true);
    let mut insights: Vec<Value> = valid
        .iter()
        .take(MAX_INSIGHTS)
        .map(|s| {
            let cred = s["credibility"].as_u64().unwrap_or(0);
            json!({
                "text": format!("{} ({})", s["title"].as_str().unwrap_or(""), s["domain"].as_str().unwrap_or("")),
                "confidence": cred as f64 / 100.0,
                "evidence": if omit_evidence { json!([]) } else { json!([s["id"]]) },
            })
        })
        .collect();
    if let Some(n) = u64_param(task, "emit_patterns") {
        patterns.truncate(n as usize);
    }
    if let Some(n) = u64_param(task, "emit_insights") {
        insights.truncate(n as usize);
    }
    let md: String = patterns
        .iter()
        .map(|p| format!("- pattern: {}\n", p["description"].as_str().unwrap_or("")))
        .chain(
            insights
                .iter()
                .map(|i| format!("- insight: {}\n", i["text"].as_str().unwrap_or(""))),
        )
        .collect();
    let cited: Vec<Value> = valid
        .iter()
        .map(|s| json!({"id": s["id"], "title": s["title"], "url": s["url"]}))
        .collect();
    Ok(json!({
        "schema_version": OUTPUT_SCHEMA_VERSION,
        "agent_type": task.agent_type,
        "topic": task.item,
        "patterns": patterns,
        "insights": insights,
        "validated_sources": cited,
        "writes": [
            write("analysis/findings.md".into(), format!("# Findings\n\n{md}")),
            write("analysis/analysis-progress.md".into(), completion(task, &format!("{} patterns, {} insights", patterns.len(), insights.len()))),
        ],
    }))
}
