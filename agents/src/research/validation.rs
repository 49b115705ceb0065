//! Fact-checks the merged sources: credibility, cross-references,
//! contradictions.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use caucus_shared::task::{TaskDispatch, TaskError};

use super::{completion, f64_param, fnv, input, write, OUTPUT_SCHEMA_VERSION};

/// Sources at or above this credibility are validated.
const VALID_FROM: u64 = 60;

pub(super) fn run(task: &TaskDispatch) -> Result<Value, TaskError> {
    let merged = input(task, "consolidate")?;
    let list = merged["sources"].as_array().cloned().unwrap_or_default();
    let n = list.len();
    let mut per_domain: BTreeMap<String, usize> = BTreeMap::new();
    for s in &list {
        *per_domain
            .entry(s["domain"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    // Test knobs: exactly this share validated / contradicted (first ones).
    let forced =
        |key: &str| f64_param(task, key).map(|r| (r.clamp(0.0, 1.0) * n as f64).round() as usize);
    let force_valid = forced("validated_ratio");
    let force_contra = forced("contradicted_ratio");
    let checked: Vec<Value> = list
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let id = s["id"].as_str().unwrap_or("");
            let credibility = s["credibility"].as_u64().unwrap_or(50);
            let validated = match force_valid {
                Some(k) => i < k,
                None => credibility >= VALID_FROM,
            };
            let domain = s["domain"].as_str().unwrap_or("");
            let cross =
                per_domain.get(domain).copied().unwrap_or(0) >= 2 || fnv(&[id, "xref"]) % 10 < 6;
            let contradicted = match force_contra {
                Some(k) => i < k,
                None => fnv(&[id, "contra"]) % 100 < 8,
            };
            let mut v = s.clone();
            v["validated"] = json!(validated);
            v["cross_referenced"] = json!(cross);
            v["contradicted"] = json!(contradicted);
            v
        })
        .collect();
    let valid = checked.iter().filter(|s| s["validated"] == true).count();
    let md: String = checked
        .iter()
        .map(|s| {
            format!(
                "- {} {} (credibility {}{})\n",
                if s["validated"] == true { "✓" } else { "✗" },
                s["id"].as_str().unwrap_or(""),
                s["credibility"],
                if s["contradicted"] == true {
                    ", contradicted"
                } else {
                    ""
                }
            )
        })
        .collect();
    Ok(json!({
        "schema_version": OUTPUT_SCHEMA_VERSION,
        "agent_type": task.agent_type,
        "topic": task.item,
        "sources": checked,
        "validated": valid,
        "total": n,
        "writes": [
            write("validation/validated.md".into(), format!("# Validation: {valid} of {n}\n\n{md}")),
            write("validation/validation-progress.md".into(), completion(task, &format!("{valid}/{n} sources validated"))),
        ],
    }))
}
