//! The deep-research phases' outputs (docs/RESEARCH.md): what each
//! built-in research agent returns, what the next agent reads as its input
//! and what the coordinator's quality gate of the phase checks.
//!
//! Fields another agent may leave out or get wrong are `Option`s read with
//! [`lenient`]; a source passes through consolidation and validation with
//! the fields it had (none added, unknown ones kept in `extra`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use super::{items, lenient, or_default, schema_v1};

/// One `{key, value}` write into the run's key space; the coordinator
/// stores the ones inside the task's `output_key_space` and refuses the rest.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Write {
    /// Key inside the run's key space (`streams/stream-2/sources.md`).
    pub key: String,
    /// The content (markdown).
    pub value: String,
}

/// One source found by a discovery stream, as it travels through
/// consolidation (unchanged) and validation (plus the three verdicts).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Source {
    /// Unique in the run: `s<stream>-<n>`.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub id: Option<String>,
    /// Title.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub title: Option<String>,
    /// Where it is; consolidation drops later sources with the same URL.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub url: Option<String>,
    /// Host name, e.g. `arxiv.org` (diversity and source kinds).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub domain: Option<String>,
    /// The aspect of the topic its stream covered.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub aspect: Option<String>,
    /// Credibility score, 0..=100 (kept as given: an integer from the
    /// built-in agents).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub credibility: Option<Number>,
    /// The stream that found it (1-based).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub stream: Option<u64>,
    /// Validation: credible enough to build on.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub validated: Option<bool>,
    /// Validation: other sources confirm it.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub cross_referenced: Option<bool>,
    /// Validation: other sources contradict it.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub contradicted: Option<bool>,
    /// Fields another agent added, passed on as they are.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Source {
    /// `validated` is `true`.
    pub fn is_validated(&self) -> bool {
        self.validated == Some(true)
    }

    /// The credibility as text (`null` when absent), as the markdown shows it.
    pub fn credibility_text(&self) -> String {
        self.credibility
            .as_ref()
            .map_or_else(|| "null".to_string(), Number::to_string)
    }
}

/// A stream's own progress count (`7/7 items`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Progress {
    /// Items done.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub items_done: Option<u64>,
    /// Items in all.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub items_total: Option<u64>,
}

/// The output of one discovery stream (`research_discovery`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DiscoveryOutput {
    /// Version of this shape.
    #[serde(default = "schema_v1")]
    pub schema_version: u32,
    /// The agent type that produced it.
    #[serde(default, deserialize_with = "or_default")]
    pub agent_type: String,
    /// The research topic (the workflow's item).
    #[serde(default, deserialize_with = "or_default")]
    pub topic: String,
    /// Stream number (1-based).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub stream: Option<u64>,
    /// The aspect of the topic this stream covered.
    #[serde(default, deserialize_with = "or_default")]
    pub aspect: String,
    /// The sources found; `None` when the output has no list (a failed
    /// stream's `null` output).
    #[serde(
        default,
        deserialize_with = "items",
        skip_serializing_if = "Option::is_none"
    )]
    pub sources: Option<Vec<Source>>,
    /// The search queries run.
    #[serde(default, deserialize_with = "or_default")]
    pub search_history: Vec<String>,
    /// Writes into the stream's key space.
    #[serde(default, deserialize_with = "or_default")]
    pub writes: Vec<Write>,
    /// Its progress count and intervention request.
    #[serde(flatten)]
    pub signals: Signals,
}

/// What any research output may tell the coordinator besides its phase's
/// figures (the built-in discovery agent sends them).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Signals {
    /// The task's own progress count.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub progress: Option<Progress>,
    /// The seed's `NeedsIntervention` signal: a person must look.
    #[serde(
        default,
        deserialize_with = "or_default",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub needs_intervention: bool,
    /// Why, with `needs_intervention`.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub intervention_reason: Option<String>,
}

impl Signals {
    /// `<done>/<total> items`, when the output gave both counts.
    pub fn progress_text(&self) -> Option<String> {
        let p = self.progress.as_ref()?;
        Some(format!("{}/{} items", p.items_done?, p.items_total?))
    }

    /// Why a person must look, when the output asks for one.
    pub fn intervention(&self) -> Option<String> {
        self.needs_intervention.then(|| {
            self.intervention_reason
                .clone()
                .unwrap_or_else(|| "no reason given".into())
        })
    }
}

impl DiscoveryOutput {
    /// The domains of its sources (`unknown` when a source has none).
    pub fn domains(&self) -> Vec<String> {
        self.sources
            .iter()
            .flatten()
            .map(|s| s.domain.clone().unwrap_or_else(|| "unknown".into()))
            .collect()
    }
}

/// The merged sources (`research_consolidation`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ConsolidationOutput {
    /// Version of this shape.
    #[serde(default = "schema_v1")]
    pub schema_version: u32,
    /// The agent type that produced it.
    #[serde(default, deserialize_with = "or_default")]
    pub agent_type: String,
    /// The research topic.
    #[serde(default, deserialize_with = "or_default")]
    pub topic: String,
    /// Every stream's sources, later duplicates of a URL dropped.
    #[serde(
        default,
        deserialize_with = "items",
        skip_serializing_if = "Option::is_none"
    )]
    pub sources: Option<Vec<Source>>,
    /// Streams whose sources were merged.
    #[serde(default, deserialize_with = "or_default")]
    pub streams_used: Vec<u64>,
    /// Streams without output (failed: the run went on without them).
    #[serde(default, deserialize_with = "or_default")]
    pub streams_missing: Vec<u64>,
    /// Sources dropped as duplicate URLs.
    #[serde(default, deserialize_with = "or_default")]
    pub duplicates_removed: u64,
    /// Writes into the validation key space.
    #[serde(default, deserialize_with = "or_default")]
    pub writes: Vec<Write>,
}

/// The checked sources (`research_validation`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ValidationOutput {
    /// Version of this shape.
    #[serde(default = "schema_v1")]
    pub schema_version: u32,
    /// The agent type that produced it.
    #[serde(default, deserialize_with = "or_default")]
    pub agent_type: String,
    /// The research topic.
    #[serde(default, deserialize_with = "or_default")]
    pub topic: String,
    /// The sources with `validated`, `cross_referenced`, `contradicted`.
    #[serde(
        default,
        deserialize_with = "items",
        skip_serializing_if = "Option::is_none"
    )]
    pub sources: Option<Vec<Source>>,
    /// Sources validated.
    #[serde(default, deserialize_with = "or_default")]
    pub validated: u64,
    /// Sources checked.
    #[serde(default, deserialize_with = "or_default")]
    pub total: u64,
    /// The validator checked only part of the sources (the gate then
    /// passes with a fallback).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub partial: Option<bool>,
    /// Writes into the validation key space.
    #[serde(default, deserialize_with = "or_default")]
    pub writes: Vec<Write>,
}

/// A pattern the analysis found among the validated sources.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Pattern {
    /// Short name (`academic sources`, an aspect).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub name: Option<String>,
    /// One sentence.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub description: Option<String>,
    /// Ids of the sources behind it.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub sources: Option<Vec<String>>,
}

/// A key insight with its evidence chain.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Insight {
    /// The insight.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub text: Option<String>,
    /// Confidence, 0..=1 (the gate wants one on every insight).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub confidence: Option<f64>,
    /// The evidence chain: source ids (kept as JSON: other agents may cite
    /// otherwise); the gate wants a non-empty one.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub evidence: Option<Vec<Value>>,
}

/// A validated source as the analysis cites it (`null` fields kept: the
/// report lists them as they are).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CitedSource {
    /// Source id.
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<String>,
    /// Title.
    #[serde(default, deserialize_with = "lenient")]
    pub title: Option<String>,
    /// URL.
    #[serde(default, deserialize_with = "lenient")]
    pub url: Option<String>,
}

/// Patterns and insights (`research_analysis`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AnalysisOutput {
    /// Version of this shape.
    #[serde(default = "schema_v1")]
    pub schema_version: u32,
    /// The agent type that produced it.
    #[serde(default, deserialize_with = "or_default")]
    pub agent_type: String,
    /// The research topic.
    #[serde(default, deserialize_with = "or_default")]
    pub topic: String,
    /// Patterns found.
    #[serde(
        default,
        deserialize_with = "items",
        skip_serializing_if = "Option::is_none"
    )]
    pub patterns: Option<Vec<Pattern>>,
    /// Key insights.
    #[serde(
        default,
        deserialize_with = "items",
        skip_serializing_if = "Option::is_none"
    )]
    pub insights: Option<Vec<Insight>>,
    /// The validated sources, for the report's citations.
    #[serde(
        default,
        deserialize_with = "items",
        skip_serializing_if = "Option::is_none"
    )]
    pub validated_sources: Option<Vec<CitedSource>>,
    /// Writes into the analysis key space.
    #[serde(default, deserialize_with = "or_default")]
    pub writes: Vec<Write>,
}

/// One report section: a text or a list (other shapes are kept as given;
/// the gate counts them missing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Section {
    /// A text section (executive summary, findings).
    Text(String),
    /// A list section (recommendations, citations); entries are texts from
    /// the built-in agent, any JSON from others.
    List(Vec<Value>),
    /// A section given as an object.
    Object(Map<String, Value>),
    /// Anything else (a number, `null`…).
    Other(Value),
}

impl Section {
    /// Missing for the gate: blank text, empty list or object, or another shape.
    pub fn is_empty(&self) -> bool {
        match self {
            Section::Text(t) => t.trim().is_empty(),
            Section::List(a) => a.is_empty(),
            Section::Object(m) => m.is_empty(),
            Section::Other(_) => true,
        }
    }

    /// The text of a text section.
    pub fn text(&self) -> Option<&str> {
        match self {
            Section::Text(t) => Some(t),
            _ => None,
        }
    }

    /// The text entries of a list section, one `- entry` line each.
    pub fn bullets(&self) -> String {
        match self {
            Section::List(a) => a
                .iter()
                .filter_map(Value::as_str)
                .map(|s| format!("- {s}\n"))
                .collect(),
            _ => String::new(),
        }
    }
}

/// The report (`research_synthesis`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SynthesisOutput {
    /// Version of this shape.
    #[serde(default = "schema_v1")]
    pub schema_version: u32,
    /// The agent type that produced it.
    #[serde(default, deserialize_with = "or_default")]
    pub agent_type: String,
    /// The research topic.
    #[serde(default, deserialize_with = "or_default")]
    pub topic: String,
    /// Sections by name (`executive_summary`, `findings`,
    /// `recommendations`, `citations`); `None` when not an object.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub sections: Option<BTreeMap<String, Section>>,
    /// The whole report as markdown.
    #[serde(default, deserialize_with = "or_default")]
    pub markdown: String,
    /// Writes into the report key space.
    #[serde(default, deserialize_with = "or_default")]
    pub writes: Vec<Write>,
}

impl SynthesisOutput {
    /// Section `name`, when present.
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.as_ref()?.get(name)
    }
}
