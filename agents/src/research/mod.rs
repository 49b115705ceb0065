//! Built-in research agents for the `deep-research` pipeline (seed 004).
//!
//! Simple and deterministic: no network, no clock, no randomness; every
//! figure follows from the topic (the task's item), the stream number and
//! the stage params, so tests can predict them. Real agents plug in through
//! the `exec:` / `http:` handlers with the same input and output shapes
//! (docs/RESEARCH.md).
//!
//! | agent type | does |
//! |---|---|
//! | `research_discovery` | one stream: 5–8 sources on one aspect of the topic |
//! | `research_consolidation` | merges the streams' sources, drops duplicate URLs |
//! | `research_validation` | credibility, cross-references, contradictions per source |
//! | `research_analysis` | patterns (by source kind and aspect) and key insights |
//! | `research_synthesis` | the report: summary, findings, recommendations, citations |
//!
//! Every agent returns `writes: [{key, value}]` inside its key space; the
//! coordinator stores them (and refuses anything outside).
//!
//! Test knobs (stage params): discovery `fail_streams`, `sources_per_stream`,
//! `stream_sources`, `single_domain`, `rogue_streams`,
//! `intervention_streams`; validation
//! `validated_ratio`, `contradicted_ratio`; analysis `emit_patterns`,
//! `emit_insights`, `omit_evidence`; synthesis `omit_sections`.

mod analysis;
mod consolidation;
mod discovery;
mod synthesis;
mod validation;

use serde::de::DeserializeOwned;
use serde_json::Value;

use caucus_shared::outputs::research::Write;
use caucus_shared::outputs::{self, OutputError};
use caucus_shared::task::{ErrorClass, TaskDispatch, TaskError};

/// Version of the research agents' outputs.
pub const OUTPUT_SCHEMA_VERSION: u32 = outputs::OUTPUT_SCHEMA_VERSION;

/// The research agent types, in pipeline order.
pub const AGENT_TYPES: [&str; 5] = [
    "research_discovery",
    "research_consolidation",
    "research_validation",
    "research_analysis",
    "research_synthesis",
];

/// Runs the research agent `task.agent_type`; `None` when it is not one.
pub fn run(task: &TaskDispatch) -> Option<Result<Value, TaskError>> {
    let f: fn(&TaskDispatch) -> Result<Value, TaskError> = match task.agent_type.as_str() {
        "research_discovery" => discovery::run,
        "research_consolidation" => consolidation::run,
        "research_validation" => validation::run,
        "research_analysis" => analysis::run,
        "research_synthesis" => synthesis::run,
        _ => return None,
    };
    Some(f(task))
}

/// FNV-1a: a hash that is the same on every machine and Rust version.
pub(crate) fn fnv(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0xff)) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

pub(crate) fn permanent(error_type: &str, message: String) -> TaskError {
    TaskError {
        class: ErrorClass::Permanent,
        error_type: error_type.into(),
        message,
        data_source: None,
    }
}

/// A `{key, value}` write.
pub(crate) fn write(key: String, value: String) -> Write {
    Write { key, value }
}

/// The seed's completion signal for a `progress.md`.
pub(crate) fn completion(task: &TaskDispatch, results: &str) -> String {
    format!(
        "Status: COMPLETE\nCompleted: {}\nResults: {results}\nHandoffReady: true\n",
        task.dispatched_at.to_rfc3339()
    )
}

pub(crate) fn u64_param(task: &TaskDispatch, key: &str) -> Option<u64> {
    task.params.get(key).and_then(Value::as_u64)
}

pub(crate) fn f64_param(task: &TaskDispatch, key: &str) -> Option<f64> {
    task.params.get(key).and_then(Value::as_f64)
}

pub(crate) fn list_param(task: &TaskDispatch, key: &str) -> Vec<Value> {
    task.params
        .get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The single upstream output named `stage`, or a clear error.
pub(crate) fn input<'a>(task: &'a TaskDispatch, stage: &str) -> Result<&'a Value, TaskError> {
    match task.inputs.get(stage) {
        Some(v) if !v.is_null() => Ok(v),
        _ => Err(permanent(
            "bad_input",
            format!(
                "{} needs the output of stage `{stage}` (inputs: {})",
                task.agent_type,
                task.inputs.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// One upstream output read as `T` (see [`outputs::decode`]); another
/// `schema_version` is a permanent `bad_input`.
pub(crate) fn decode<T: DeserializeOwned + Default>(
    task: &TaskDispatch,
    stage: &str,
    v: &Value,
) -> Result<T, TaskError> {
    outputs::decode(v).map_err(|e: OutputError| {
        permanent(
            "bad_input",
            format!("{}: the output of stage `{stage}`: {e}", task.agent_type),
        )
    })
}

/// The single upstream output named `stage`, read as `T`.
pub(crate) fn typed_input<T: DeserializeOwned + Default>(
    task: &TaskDispatch,
    stage: &str,
) -> Result<T, TaskError> {
    decode(task, stage, input(task, stage)?)
}

/// Where a domain's sources come from, for patterns.
pub(crate) fn kind_of(domain: &str) -> &'static str {
    if domain.ends_with(".gov")
        || domain.ends_with(".gov.uk")
        || domain.ends_with(".int")
        || domain.ends_with(".eu")
    {
        "official"
    } else if [
        "arxiv.org",
        "nature.com",
        "ieee.org",
        "acm.org",
        "jstor.org",
        "sciencedirect.com",
    ]
    .contains(&domain)
    {
        "academic"
    } else if ["reuters.com", "ft.com", "economist.com", "bbc.co.uk"].contains(&domain) {
        "press"
    } else {
        "institutional"
    }
}

#[cfg(test)]
mod tests;
