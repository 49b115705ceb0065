//! Patterns and key insights over the validated sources.

use std::collections::BTreeMap;

use serde_json::Value;

use caucus_shared::outputs::research::{
    AnalysisOutput, CitedSource, Insight, Pattern, Source, ValidationOutput,
};
use caucus_shared::outputs::to_value;
use caucus_shared::task::{TaskDispatch, TaskError};

use super::{completion, kind_of, typed_input, u64_param, write, OUTPUT_SCHEMA_VERSION};

/// Insights produced at most.
const MAX_INSIGHTS: usize = 8;

pub(super) fn run(task: &TaskDispatch) -> Result<Value, TaskError> {
    let checked: ValidationOutput = typed_input(task, "validate")?;
    let mut valid: Vec<Source> = checked
        .sources
        .unwrap_or_default()
        .into_iter()
        .filter(Source::is_validated)
        .collect();
    let text = |t: &Option<String>| t.clone().unwrap_or_default();
    let mut by_kind: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    let mut by_aspect: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in &valid {
        let id = text(&s.id);
        by_kind
            .entry(kind_of(s.domain.as_deref().unwrap_or("")))
            .or_default()
            .push(id.clone());
        by_aspect
            .entry(s.aspect.clone().unwrap_or_else(|| "general".into()))
            .or_default()
            .push(id);
    }
    let pattern = |name: String, description: String, ids: &Vec<String>| Pattern {
        name: Some(name),
        description: Some(description),
        sources: Some(ids.clone()),
    };
    let mut patterns: Vec<Pattern> = by_kind
        .iter()
        .map(|(k, ids)| {
            pattern(
                format!("{k} sources"),
                format!(
                    "{} validated {k} sources agree on the topic's direction",
                    ids.len()
                ),
                ids,
            )
        })
        .chain(
            by_aspect
                .iter()
                .filter(|(_, ids)| ids.len() >= 2)
                .map(|(a, ids)| {
                    pattern(
                        a.clone(),
                        format!("{} corroborating sources on {a}", ids.len()),
                        ids,
                    )
                }),
        )
        .collect();
    let credibility = |s: &Source| s.credibility.as_ref().and_then(|c| c.as_u64());
    valid.sort_by(|a, b| {
        credibility(b)
            .cmp(&credibility(a))
            .then_with(|| a.id.cmp(&b.id))
    });
    let omit_evidence = task.params.get("omit_evidence").and_then(Value::as_bool) == Some(true);
    let mut insights: Vec<Insight> = valid
        .iter()
        .take(MAX_INSIGHTS)
        .map(|s| Insight {
            text: Some(format!("{} ({})", text(&s.title), text(&s.domain))),
            confidence: Some(credibility(s).unwrap_or(0) as f64 / 100.0),
            evidence: Some(if omit_evidence {
                Vec::new()
            } else {
                vec![s.id.clone().map_or(Value::Null, Value::String)]
            }),
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
        .map(|p| format!("- pattern: {}\n", text(&p.description)))
        .chain(
            insights
                .iter()
                .map(|i| format!("- insight: {}\n", text(&i.text))),
        )
        .collect();
    let cited: Vec<CitedSource> = valid
        .into_iter()
        .map(|s| CitedSource {
            id: s.id,
            title: s.title,
            url: s.url,
        })
        .collect();
    let done = format!("{} patterns, {} insights", patterns.len(), insights.len());
    Ok(to_value(&AnalysisOutput {
        schema_version: OUTPUT_SCHEMA_VERSION,
        agent_type: task.agent_type.clone(),
        topic: task.item.clone(),
        patterns: Some(patterns),
        insights: Some(insights),
        validated_sources: Some(cited),
        writes: vec![
            write("analysis/findings.md".into(), format!("# Findings\n\n{md}")),
            write(
                "analysis/analysis-progress.md".into(),
                completion(task, &done),
            ),
        ],
    }))
}
