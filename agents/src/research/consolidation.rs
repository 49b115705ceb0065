//! Merges the discovery streams' sources (duplicate URLs dropped).

use std::collections::BTreeSet;

use serde_json::Value;

use caucus_shared::outputs::research::{ConsolidationOutput, DiscoveryOutput};
use caucus_shared::outputs::to_value;
use caucus_shared::task::{TaskDispatch, TaskError};

use super::{completion, decode, input, write, OUTPUT_SCHEMA_VERSION};

/// The upstream stage.
const STAGE: &str = "discover";

pub(super) fn run(task: &TaskDispatch) -> Result<Value, TaskError> {
    let streams = input(task, STAGE)?;
    let outputs: Vec<DiscoveryOutput> = match streams {
        Value::Array(a) => a.iter().map(|o| decode(task, STAGE, o)).collect(),
        one => decode(task, STAGE, one).map(|o| vec![o]),
    }?;
    let mut seen = BTreeSet::new();
    let mut sources = Vec::new();
    let mut used = Vec::new();
    let mut missing = Vec::new();
    let mut duplicates = 0;
    for (i, o) in outputs.into_iter().enumerate() {
        let Some(list) = o.sources else {
            // A failed stream leaves `null`: the seed continues without it.
            missing.push(i as u64 + 1);
            continue;
        };
        used.push(o.stream.unwrap_or(i as u64 + 1));
        for s in list {
            if seen.insert(s.url.clone().unwrap_or_default()) {
                sources.push(s);
            } else {
                duplicates += 1;
            }
        }
    }
    let text = |t: &Option<String>| t.clone().unwrap_or_default();
    let md: String = sources
        .iter()
        .map(|s| {
            format!(
                "- {} | {} | {}\n",
                text(&s.id),
                text(&s.url),
                text(&s.domain)
            )
        })
        .collect();
    let n = sources.len();
    Ok(to_value(&ConsolidationOutput {
        schema_version: OUTPUT_SCHEMA_VERSION,
        agent_type: task.agent_type.clone(),
        topic: task.item.clone(),
        sources: Some(sources),
        streams_used: used,
        streams_missing: missing,
        duplicates_removed: duplicates,
        writes: vec![
            write(
                "validation/all-sources.md".into(),
                format!("# All sources ({n})\n\n{md}"),
            ),
            write(
                "validation/consolidation-progress.md".into(),
                completion(task, &format!("{n} sources merged")),
            ),
        ],
    }))
}
