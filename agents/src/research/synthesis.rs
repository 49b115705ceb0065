//! The final report: executive summary, findings, recommendations, citations.

use serde_json::{json, Value};

use caucus_shared::task::{TaskDispatch, TaskError};

use super::{completion, input, list_param, write, OUTPUT_SCHEMA_VERSION};

pub(super) fn run(task: &TaskDispatch) -> Result<Value, TaskError> {
    let a = input(task, "analyze")?;
    let topic = task.item.as_str();
    let patterns = a["patterns"].as_array().cloned().unwrap_or_default();
    let insights = a["insights"].as_array().cloned().unwrap_or_default();
    let cited = a["validated_sources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
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
                i["text"].as_str().unwrap_or(""),
                i["confidence"].as_f64().unwrap_or(0.0)
            )
        })
        .collect();
    let recommendations: Vec<String> = patterns
        .iter()
        .take(3)
        .map(|p| {
            format!(
                "Follow up on {}",
                p["name"].as_str().unwrap_or("this pattern")
            )
        })
        .collect();
    let citations: Vec<String> = cited
        .iter()
        .map(|c| {
            format!(
                "[{}] {} — {}",
                c["id"].as_str().unwrap_or(""),
                c["title"].as_str().unwrap_or(""),
                c["url"].as_str().unwrap_or("")
            )
        })
        .collect();
    let mut sections = json!({
        "executive_summary": summary,
        "findings": findings,
        "recommendations": recommendations,
        "citations": citations,
    });
    for s in list_param(task, "omit_sections") {
        if let (Some(name), Some(m)) = (s.as_str(), sections.as_object_mut()) {
            m.remove(name);
        }
    }
    let list = |v: &Value| -> String {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|s| format!("- {s}\n"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let markdown = format!(
        "# Research report: {topic}\n\n## Executive summary\n\n{}\n\n## Findings\n\n{}\n## Recommendations\n\n{}\n## Citations\n\n{}",
        sections["executive_summary"].as_str().unwrap_or(""),
        sections["findings"].as_str().unwrap_or(""),
        list(&sections["recommendations"]),
        list(&sections["citations"]),
    );
    Ok(json!({
        "schema_version": OUTPUT_SCHEMA_VERSION,
        "agent_type": task.agent_type,
        "topic": topic,
        "sections": sections,
        "markdown": markdown,
        "writes": [
            write("report/final-report.md".into(), markdown.clone()),
            write("report/executive-summary.md".into(), sections["executive_summary"].as_str().unwrap_or("").to_string()),
            write("report/report-progress.md".into(), completion(task, "report generated")),
        ],
    }))
}
