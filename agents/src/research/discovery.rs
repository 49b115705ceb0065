//! One discovery stream: sources on one aspect of the topic.

use serde_json::Value;

use caucus_shared::outputs::research::{DiscoveryOutput, Progress, Signals, Source};
use caucus_shared::outputs::to_value;
use caucus_shared::task::{TaskDispatch, TaskError};

use super::{completion, fnv, list_param, permanent, u64_param, write, OUTPUT_SCHEMA_VERSION};

/// Domains sources come from.
pub(crate) const DOMAINS: [&str; 16] = [
    "arxiv.org",
    "nature.com",
    "reuters.com",
    "who.int",
    "ieee.org",
    "acm.org",
    "data.gov.uk",
    "oecd.org",
    "worldbank.org",
    "ft.com",
    "economist.com",
    "sciencedirect.com",
    "jstor.org",
    "bbc.co.uk",
    "nih.gov",
    "europa.eu",
];

/// The aspect each stream covers (stream N takes entry N-1, cycling).
const ASPECTS: [&str; 5] = [
    "background",
    "recent developments",
    "quantitative evidence",
    "expert opinion",
    "counterarguments",
];

fn slug(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    s.split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

pub(super) fn run(task: &TaskDispatch) -> Result<Value, TaskError> {
    let stream = task.shard.unwrap_or(0) + 1;
    let topic = task.item.as_str();
    let listed = |key: &str| {
        list_param(task, key)
            .iter()
            .any(|v| v.as_u64() == Some(stream as u64))
    };
    if listed("fail_streams") {
        return Err(permanent(
            "discovery_failed",
            format!(
                "stream {stream}: the search backend returned no results (params.fail_streams)"
            ),
        ));
    }
    let h = fnv(&[topic, &stream.to_string()]);
    let count = task
        .params
        .get("stream_sources")
        .and_then(|m| m.get(stream.to_string()))
        .and_then(Value::as_u64)
        .or_else(|| u64_param(task, "sources_per_stream"))
        .unwrap_or(5 + h % 4)
        .min(100) as usize;
    let aspect = ASPECTS[(stream as usize - 1) % ASPECTS.len()];
    let single = task.params.get("single_domain").and_then(Value::as_bool) == Some(true);
    let topic_slug = slug(topic);
    let sources: Vec<Source> = (0..count)
        .map(|i| {
            let hi = fnv(&[topic, &stream.to_string(), &i.to_string()]);
            let domain = if single {
                DOMAINS[0]
            } else {
                DOMAINS[((h as usize) + i * 7) % DOMAINS.len()]
            };
            Source {
                id: Some(format!("s{stream}-{}", i + 1)),
                title: Some(format!("{topic}: {aspect} ({})", i + 1)),
                url: Some(format!("https://{domain}/{topic_slug}/{stream}-{}", i + 1)),
                domain: Some(domain.into()),
                aspect: Some(aspect.into()),
                credibility: Some((55 + hi % 41).into()),
                stream: Some(stream.into()),
                ..Source::default()
            }
        })
        .collect();
    let queries: Vec<String> = [
        format!("{topic} {aspect}"),
        format!("{topic} {aspect} review"),
        format!("{topic} {aspect} data"),
    ]
    .to_vec();
    let space = format!("streams/stream-{stream}");
    let text = |t: &Option<String>| t.clone().unwrap_or_default();
    let sources_md: String = sources
        .iter()
        .map(|s| {
            format!(
                "- [{}]({}) — {} (credibility {})\n",
                text(&s.title),
                text(&s.url),
                text(&s.domain),
                s.credibility_text()
            )
        })
        .collect();
    let mut writes = vec![
        write(
            format!("{space}/sources.md"),
            format!("# Stream {stream}: {aspect}\n\n{sources_md}"),
        ),
        write(
            format!("{space}/search-history.md"),
            queries.iter().map(|q| format!("- {q}\n")).collect(),
        ),
        write(
            format!("{space}/progress.md"),
            completion(task, &format!("{count} sources on {aspect}")),
        ),
    ];
    if listed("rogue_streams") {
        // A misbehaving agent: the coordinator must refuse these.
        let other = if stream == 1 { 2 } else { 1 };
        writes.push(write(
            format!("streams/stream-{other}/injected.md"),
            format!("written by stream {stream}"),
        ));
        writes.push(write("validation/validated.md".into(), "all valid".into()));
    }
    // The seed's error signal: the stream wants a person to look.
    let intervention = listed("intervention_streams");
    Ok(to_value(&DiscoveryOutput {
        schema_version: OUTPUT_SCHEMA_VERSION,
        agent_type: task.agent_type.clone(),
        topic: topic.into(),
        stream: Some(stream.into()),
        aspect: aspect.into(),
        sources: Some(sources),
        search_history: queries,
        writes,
        signals: Signals {
            progress: Some(Progress {
                items_done: Some(count as u64),
                items_total: Some(count as u64),
            }),
            needs_intervention: intervention,
            intervention_reason: intervention.then(|| {
                format!("stream {stream}: sources raise an ethical concern (params.intervention_streams)")
            }),
        },
    }))
}
