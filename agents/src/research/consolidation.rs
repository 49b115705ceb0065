//! Merges the discovery streams' sources (duplicate URLs dropped).

use std::collections::BTreeSet;

use serde_json::{json, Value};

use caucus_shared::task::{TaskDispatch, TaskError};

use super::{completion, input, write, OUTPUT_SCHEMA_VERSION};

pub(super) fn run(task: &TaskDispatch) -> Result<Value, TaskError> {
    let streams = input(task, "discover")?;
    let outputs: Vec<&Value> = match streams {
        Value::Array(a) => a.iter().collect(),
        one => vec![one],
    };
    let mut seen = BTreeSet::new();
    let mut sources = Vec::new();
    let mut used = Vec::new();
    let mut missing = Vec::new();
    let mut duplicates = 0;
    for (i, o) in outputs.iter().enumerate() {
        let Some(list) = o["sources"].as_array() else {
            // A failed stream leaves `null`: the seed continues without it.
            missing.push(i as u64 + 1);
            continue;
        };
        used.push(o["stream"].as_u64().unwrap_or(i as u64 + 1));
        for s in list {
            let url = s["url"].as_str().unwrap_or("").to_string();
            if seen.insert(url) {
                sources.push(s.clone());
            } else {
                duplicates += 1;
            }
        }
    }
    let md: String = sources
        .iter()
        .map(|s| {
            format!(
                "- {} | {} | {}\n",
                s["id"].as_str().unwrap_or(""),
                s["url"].as_str().unwrap_or(""),
                s["domain"].as_str().unwrap_or("")
            )
        })
        .collect();
    Ok(json!({
        "schema_version": OUTPUT_SCHEMA_VERSION,
        "agent_type": task.agent_type,
        "topic": task.item,
        "sources": sources,
        "streams_used": used,
        "streams_missing": missing,
        "duplicates_removed": duplicates,
        "writes": [
            write("validation/all-sources.md".into(), format!("# All sources ({})\n\n{md}", sources.len())),
            write("validation/consolidation-progress.md".into(), completion(task, &format!("{} sources merged", sources.len()))),
        ],
    }))
}
