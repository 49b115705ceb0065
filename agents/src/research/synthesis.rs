//! The final report: executive summary, findings, recommendations, citations.

use std::collections::BTreeMap;

use serde_json::Value;

use caucus_shared::outputs::research::{AnalysisOutput, Section, SynthesisOutput};
use caucus_shared::outputs::to_value;
use caucus_shared::task::{TaskDispatch, TaskError};

use super::{completion, list_param, typed_input, write, OUTPUT_SCHEMA_VERSION};

pub(super) fn run(task: &TaskDispatch) -> Result<Value, TaskError> {
    let a: AnalysisOutput = typed_input(task, "analyze")?;
    let topic = task.item.as_str();
    let patterns = a.patterns.unwrap_or_default();
    let insights = a.insights.unwrap_or_default();
    let cited = a.validated_sources.unwrap_or_default();
    let text = |t: &Option<String>| t.clone().unwrap_or_default();
    let summary = format!(
        "{topic}: {} patterns and {} key insights from {} validated sources.",
        patterns.len(),
        insights.len(),
        cited.len()
    );
    let findings: String = insights
        .iter()
        .map(|i| {
            format!(
                "- {} (confidence {:.2})\n",
                text(&i.text),
                i.confidence.unwrap_or(0.0)
            )
        })
        .collect();
    let recommendations: Vec<Value> = patterns
        .iter()
        .take(3)
        .map(|p| {
            let name = p.name.as_deref().unwrap_or("this pattern");
            Value::String(format!("Follow up on {name}"))
        })
        .collect();
    let citations: Vec<Value> = cited
        .iter()
        .map(|c| {
            Value::String(format!(
                "[{}] {} — {}",
                text(&c.id),
                text(&c.title),
                text(&c.url)
            ))
        })
        .collect();
    let mut sections = BTreeMap::from([
        ("executive_summary".to_string(), Section::Text(summary)),
        ("findings".to_string(), Section::Text(findings)),
        (
            "recommendations".to_string(),
            Section::List(recommendations),
        ),
        ("citations".to_string(), Section::List(citations)),
    ]);
    for s in list_param(task, "omit_sections") {
        if let Some(name) = s.as_str() {
            sections.remove(name);
        }
    }
    let text_of = |name: &str| sections.get(name).and_then(Section::text).unwrap_or("");
    let bullets = |name: &str| sections.get(name).map(Section::bullets).unwrap_or_default();
    let executive_summary = text_of("executive_summary").to_string();
    let markdown = format!(
        "# Research report: {topic}\n\n## Executive summary\n\n{}\n\n## Findings\n\n{}\n## Recommendations\n\n{}\n## Citations\n\n{}",
        executive_summary,
        text_of("findings"),
        bullets("recommendations"),
        bullets("citations"),
    );
    Ok(to_value(&SynthesisOutput {
        schema_version: OUTPUT_SCHEMA_VERSION,
        agent_type: task.agent_type.clone(),
        topic: topic.into(),
        sections: Some(sections),
        markdown: markdown.clone(),
        writes: vec![
            write("report/final-report.md".into(), markdown),
            write("report/executive-summary.md".into(), executive_summary),
            write(
                "report/report-progress.md".into(),
                completion(task, "report generated"),
            ),
        ],
    }))
}
