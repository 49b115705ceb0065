//! Fact-checks the merged sources: credibility, cross-references,
//! contradictions.

use std::collections::BTreeMap;

use serde_json::Value;

use caucus_shared::outputs::research::{ConsolidationOutput, Source, ValidationOutput};
use caucus_shared::outputs::to_value;
use caucus_shared::task::{TaskDispatch, TaskError};

use super::{completion, f64_param, fnv, typed_input, write, OUTPUT_SCHEMA_VERSION};

/// Sources at or above this credibility are validated.
const VALID_FROM: u64 = 60;

pub(super) fn run(task: &TaskDispatch) -> Result<Value, TaskError> {
    let merged: ConsolidationOutput = typed_input(task, "consolidate")?;
    let list = merged.sources.unwrap_or_default();
    let n = list.len();
    let mut per_domain: BTreeMap<String, usize> = BTreeMap::new();
    for s in &list {
        *per_domain
            .entry(s.domain.clone().unwrap_or_default())
            .or_default() += 1;
    }
    // Test knobs: exactly this share validated / contradicted (first ones).
    let forced =
        |key: &str| f64_param(task, key).map(|r| (r.clamp(0.0, 1.0) * n as f64).round() as usize);
    let force_valid = forced("validated_ratio");
    let force_contra = forced("contradicted_ratio");
    let checked: Vec<Source> = list
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let id = s.id.as_deref().unwrap_or("");
            let credibility = s
                .credibility
                .as_ref()
                .and_then(|c| c.as_u64())
                .unwrap_or(50);
            let validated = match force_valid {
                Some(k) => i < k,
                None => credibility >= VALID_FROM,
            };
            let domain = s.domain.as_deref().unwrap_or("");
            let cross =
                per_domain.get(domain).copied().unwrap_or(0) >= 2 || fnv(&[id, "xref"]) % 10 < 6;
            let contradicted = match force_contra {
                Some(k) => i < k,
                None => fnv(&[id, "contra"]) % 100 < 8,
            };
            Source {
                validated: Some(validated),
                cross_referenced: Some(cross),
                contradicted: Some(contradicted),
                ..s
            }
        })
        .collect();
    let valid = checked.iter().filter(|s| s.is_validated()).count();
    let md: String = checked
        .iter()
        .map(|s| {
            format!(
                "- {} {} (credibility {}{})\n",
                if s.is_validated() { "✓" } else { "✗" },
                s.id.as_deref().unwrap_or(""),
                s.credibility_text(),
                if s.contradicted == Some(true) {
                    ", contradicted"
                } else {
                    ""
                }
            )
        })
        .collect();
    Ok(to_value(&ValidationOutput {
        schema_version: OUTPUT_SCHEMA_VERSION,
        agent_type: task.agent_type.clone(),
        topic: task.item.clone(),
        sources: Some(checked),
        validated: valid as u64,
        total: n as u64,
        partial: None,
        writes: vec![
            write(
                "validation/validated.md".into(),
                format!("# Validation: {valid} of {n}\n\n{md}"),
            ),
            write(
                "validation/validation-progress.md".into(),
                completion(task, &format!("{valid}/{n} sources validated")),
            ),
        ],
    }))
}
