//! The quality gates of every phase (seed 004, "Quality Gates"), with the
//! seed's thresholds as defaults and the stage `params` overriding them.
//! Pure: outputs in, a [`GateDecision`] out.
//!
//! A gate passes, passes with a fallback (the seed's Level 2 handling:
//! continue with the successful streams, accept partial validation, use a
//! basic analysis), or fails. A failed discovery gate, and contradictions
//! above the escalation rate, need a person (Level 3).

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use caucus_shared::outputs;
use caucus_shared::outputs::research::{
    AnalysisOutput, ConsolidationOutput, Section, Source, SynthesisOutput, ValidationOutput,
};

pub use super::streams::{stream_domains, StreamFailed, StreamResult, StreamShortfall};
use super::Phase;

/// What a gate decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every requirement met.
    Pass,
    /// The hard requirements met; the run continues with a documented fallback.
    PassWithFallback,
    /// A hard requirement missed: the run fails.
    Fail,
}

impl Verdict {
    /// The run may go on.
    pub fn passed(self) -> bool {
        self != Verdict::Fail
    }

    /// The spelling in status and audit.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::PassWithFallback => "pass_with_fallback",
            Verdict::Fail => "fail",
        }
    }
}

/// A gate decision with its reasons.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateDecision {
    /// The phase whose gate this is.
    pub phase: Phase,
    /// The decision.
    pub verdict: Verdict,
    /// Why (requirements missed, fallbacks taken); empty on a clean pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// A person must look (total discovery failure, critical contradictions).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub escalate: bool,
    /// The measured figures the gate compared.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
}

impl GateDecision {
    fn new(phase: Phase) -> Self {
        GateDecision {
            phase,
            verdict: Verdict::Pass,
            reasons: Vec::new(),
            escalate: false,
            metrics: BTreeMap::new(),
        }
    }

    fn fail(&mut self, reason: String) {
        self.verdict = Verdict::Fail;
        self.reasons.push(reason);
    }

    fn fallback(&mut self, reason: String) {
        if self.verdict == Verdict::Pass {
            self.verdict = Verdict::PassWithFallback;
        }
        self.reasons.push(reason);
    }

    /// `pass`, or the verdict with its reasons, for the audit trail.
    pub fn summary(&self) -> String {
        let mut s = self.verdict.as_str().to_string();
        if !self.reasons.is_empty() {
            s.push_str(": ");
            s.push_str(&self.reasons.join("; "));
        }
        if self.escalate {
            s.push_str(" (escalated to a person)");
        }
        s
    }
}

/// A threshold parameter of the wrong type or out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("stage `{stage}`: parameter `{param}` {problem}")]
pub struct ThresholdError {
    /// The stage.
    pub stage: String,
    /// The parameter.
    pub param: String,
    /// What is wrong.
    pub problem: String,
}

struct Params<'a> {
    stage: &'a str,
    v: &'a Value,
}

impl Params<'_> {
    fn num(&self, key: &str, default: f64, min: f64, max: f64) -> Result<f64, ThresholdError> {
        let err = |problem: String| ThresholdError {
            stage: self.stage.to_string(),
            param: key.to_string(),
            problem,
        };
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Number(n)) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                if x.is_finite() && (min..=max).contains(&x) {
                    Ok(x)
                } else {
                    Err(err(format!("is {x}; it must be in {min}..={max}")))
                }
            }
            Some(other) => Err(err(format!("must be a number, not {other}"))),
        }
    }

    fn count(&self, key: &str, default: u32) -> Result<u32, ThresholdError> {
        let x = self.num(key, default as f64, 0.0, 1_000_000.0)?;
        if x.fract() != 0.0 {
            return Err(ThresholdError {
                stage: self.stage.to_string(),
                param: key.to_string(),
                problem: format!("is {x}; it must be a whole number"),
            });
        }
        Ok(x as u32)
    }
}

/// Discovery: per stream and across streams.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveryGate {
    /// A stream with fewer sources did not succeed (seed: 5).
    pub min_sources_per_stream: u32,
    /// Fewer successful streams fail the run (seed: 2).
    pub min_successful_streams: u32,
    /// Simpson diversity of the sources' domains must exceed this (seed: 0.5).
    pub min_diversity: f64,
    /// No single domain may provide more than this share (seed: "no
    /// single-source dominance"; ours: 0.5).
    pub max_source_share: f64,
}

/// Consolidation: the merged list.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsolidationGate {
    /// Merged sources required (ours: 1).
    pub min_sources: u32,
}

/// Validation: the fact-checker's verdicts.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationGate {
    /// Share of sources validated, at least (seed: 0.6); below fails.
    pub min_validated_ratio: f64,
    /// Average credibility must exceed this (seed: 60); else fallback.
    pub min_average_credibility: f64,
    /// Cross-referenced share must exceed this (seed: 0.5); else fallback.
    pub min_cross_reference_rate: f64,
    /// Contradicted share must stay below this (seed: 0.3); else fallback.
    pub max_contradiction_rate: f64,
    /// Contradicted share above this fails and escalates (seed: 0.4).
    pub escalate_contradiction_rate: f64,
}

/// Analysis: patterns and insights.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisGate {
    /// Patterns, at least (seed: 3).
    pub min_patterns: u32,
    /// Key insights, at least (seed: 5).
    pub min_insights: u32,
}

/// Synthesis: the report's sections.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthesisGate {
    /// Sections that must be present and non-empty.
    pub required_sections: Vec<String>,
}

/// The gate of one phase, read from its stage's params.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate {
    /// DISCOVERING.
    Discovery(DiscoveryGate),
    /// CONSOLIDATING.
    Consolidation(ConsolidationGate),
    /// VALIDATING.
    Validation(ValidationGate),
    /// ANALYZING.
    Analysis(AnalysisGate),
    /// SYNTHESIZING.
    Synthesis(SynthesisGate),
}

impl Gate {
    /// The gate of `phase` with thresholds from `params` (defaults: the seed).
    pub fn from_params(phase: Phase, stage: &str, params: &Value) -> Result<Gate, ThresholdError> {
        let p = Params { stage, v: params };
        Ok(match phase {
            Phase::Discovering => Gate::Discovery(DiscoveryGate {
                min_sources_per_stream: p.count("min_sources_per_stream", 5)?,
                min_successful_streams: p.count("min_successful_streams", 2)?,
                min_diversity: p.num("min_diversity", 0.5, 0.0, 1.0)?,
                max_source_share: p.num("max_source_share", 0.5, 0.0, 1.0)?,
            }),
            Phase::Consolidating => Gate::Consolidation(ConsolidationGate {
                min_sources: p.count("min_sources", 1)?,
            }),
            Phase::Validating => Gate::Validation(ValidationGate {
                min_validated_ratio: p.num("min_validated_ratio", 0.6, 0.0, 1.0)?,
                min_average_credibility: p.num("min_average_credibility", 60.0, 0.0, 100.0)?,
                min_cross_reference_rate: p.num("min_cross_reference_rate", 0.5, 0.0, 1.0)?,
                max_contradiction_rate: p.num("max_contradiction_rate", 0.3, 0.0, 1.0)?,
                escalate_contradiction_rate: p.num("escalate_contradiction_rate", 0.4, 0.0, 1.0)?,
            }),
            Phase::Analyzing => Gate::Analysis(AnalysisGate {
                min_patterns: p.count("min_patterns", 3)?,
                min_insights: p.count("min_insights", 5)?,
            }),
            Phase::Synthesizing => Gate::Synthesis(SynthesisGate {
                required_sections: match params.get("required_sections") {
                    None | Some(Value::Null) => [
                        "executive_summary",
                        "findings",
                        "recommendations",
                        "citations",
                    ]
                    .map(String::from)
                    .to_vec(),
                    Some(Value::Array(a)) if a.iter().all(Value::is_string) => a
                        .iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect(),
                    Some(other) => {
                        return Err(ThresholdError {
                            stage: stage.to_string(),
                            param: "required_sections".into(),
                            problem: format!("must be a list of section names, not {other}"),
                        })
                    }
                },
            }),
            Phase::Initializing | Phase::Complete | Phase::Failed => {
                return Err(ThresholdError {
                    stage: stage.to_string(),
                    param: "phase".into(),
                    problem: format!("{phase} has no stage"),
                })
            }
        })
    }
}

/// `output` read as `T`, or `g` failed with why not.
fn read<T: DeserializeOwned + Default>(g: &mut GateDecision, output: &Value) -> Option<T> {
    match outputs::decode(output) {
        Ok(t) => Some(t),
        Err(e) => {
            g.fail(format!("the {} output cannot be read: {e}", g.phase));
            None
        }
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

impl DiscoveryGate {
    /// Whether one stream succeeded, with the reason when not.
    pub fn stream_ok(&self, r: &StreamResult) -> Result<usize, StreamShortfall> {
        match &r.outcome {
            Err(e) => Err(StreamShortfall::Failed(e.clone())),
            Ok(d) if (d.len() as u32) < self.min_sources_per_stream => {
                Err(StreamShortfall::TooFewSources {
                    found: d.len(),
                    min: self.min_sources_per_stream,
                })
            }
            Ok(d) => Ok(d.len()),
        }
    }

    /// The gate over every stream.
    pub fn evaluate(&self, streams: &[StreamResult]) -> GateDecision {
        let mut g = GateDecision::new(Phase::Discovering);
        let mut ok = 0u32;
        let mut marked = Vec::new();
        let mut domains: BTreeMap<&str, usize> = BTreeMap::new();
        for s in streams {
            match self.stream_ok(s) {
                Ok(_) => {
                    ok += 1;
                    for d in s.outcome.as_ref().into_iter().flatten() {
                        *domains.entry(d.as_str()).or_default() += 1;
                    }
                }
                Err(why) => marked.push(format!("stream-{} {why}", s.stream)),
            }
        }
        g.metrics.insert("successful_streams".into(), ok as f64);
        g.metrics.insert("streams".into(), streams.len() as f64);
        if ok < self.min_successful_streams {
            g.escalate = true;
            g.fail(format!(
                "{ok} of {} streams successful, at least {} required ({})",
                streams.len(),
                self.min_successful_streams,
                marked.join(", ")
            ));
            return g;
        }
        let total: usize = domains.values().sum();
        let shares = domains.values().map(|n| *n as f64 / total.max(1) as f64);
        let diversity = 1.0 - shares.clone().map(|s| s * s).sum::<f64>();
        let (top, top_n) = domains
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(d, n)| (*d, *n))
            .unwrap_or(("none", 0));
        let top_share = top_n as f64 / total.max(1) as f64;
        g.metrics.insert("sources".into(), total as f64);
        g.metrics.insert("diversity".into(), round3(diversity));
        g.metrics
            .insert("top_source_share".into(), round3(top_share));
        if diversity <= self.min_diversity {
            g.escalate = true;
            g.fail(format!(
                "source diversity {:.3} is not above {} (sources from too few viewpoints)",
                diversity, self.min_diversity
            ));
        }
        if top_share > self.max_source_share {
            g.escalate = true;
            g.fail(format!(
                "single-source dominance: {top} provides {:.0} % of sources (at most {:.0} %)",
                top_share * 100.0,
                self.max_source_share * 100.0
            ));
        }
        if g.verdict == Verdict::Pass && !marked.is_empty() {
            g.fallback(format!(
                "continuing with {ok} successful streams; marked, not retried: {}",
                marked.join(", ")
            ));
        }
        g
    }
}

impl ConsolidationGate {
    /// The gate over the consolidation output.
    pub fn evaluate(&self, output: &Value) -> GateDecision {
        let mut g = GateDecision::new(Phase::Consolidating);
        let Some(out) = read::<ConsolidationOutput>(&mut g, output) else {
            return g;
        };
        let n = out.sources.map_or(0, |s| s.len());
        g.metrics.insert("sources".into(), n as f64);
        if (n as u32) < self.min_sources {
            g.fail(format!(
                "{n} merged sources, at least {} required",
                self.min_sources
            ));
        }
        g
    }
}

impl ValidationGate {
    /// The gate over the validation output (`sources: [{validated,
    /// credibility, cross_referenced, contradicted}]`, `partial`).
    pub fn evaluate(&self, output: &Value) -> GateDecision {
        let mut g = GateDecision::new(Phase::Validating);
        let Some(out) = read::<ValidationOutput>(&mut g, output) else {
            return g;
        };
        let sources = out.sources.unwrap_or_default();
        let n = sources.len();
        if n == 0 {
            g.fail("no sources were checked".into());
            return g;
        }
        let share = |f: &dyn Fn(&Source) -> Option<bool>| {
            sources.iter().filter(|s| f(s) == Some(true)).count() as f64 / n as f64
        };
        let validated = share(&|s| s.validated);
        let cross = share(&|s| s.cross_referenced);
        let contradicted = share(&|s| s.contradicted);
        let credibility = sources
            .iter()
            .map(|s| {
                s.credibility
                    .as_ref()
                    .and_then(|c| c.as_f64())
                    .unwrap_or(0.0)
            })
            .sum::<f64>()
            / n as f64;
        for (k, v) in [
            ("sources", n as f64),
            ("validated_ratio", validated),
            ("average_credibility", credibility),
            ("cross_reference_rate", cross),
            ("contradiction_rate", contradicted),
        ] {
            g.metrics.insert(k.into(), round3(v));
        }
        if validated < self.min_validated_ratio {
            g.fail(format!(
                "{:.1} % of sources validated, at least {:.1} % required",
                validated * 100.0,
                self.min_validated_ratio * 100.0
            ));
        }
        if contradicted > self.escalate_contradiction_rate {
            g.escalate = true;
            g.fail(format!(
                "contradiction rate {:.1} % above {:.1} %: critical contradictions need human review",
                contradicted * 100.0,
                self.escalate_contradiction_rate * 100.0
            ));
        }
        if g.verdict == Verdict::Fail {
            return g;
        }
        if credibility <= self.min_average_credibility {
            g.fallback(format!(
                "average credibility {credibility:.1} not above {}; accepting partial validation",
                self.min_average_credibility
            ));
        }
        if cross <= self.min_cross_reference_rate {
            g.fallback(format!(
                "cross-reference rate {:.1} % not above {:.1} %; accepting partial validation",
                cross * 100.0,
                self.min_cross_reference_rate * 100.0
            ));
        }
        if contradicted >= self.max_contradiction_rate {
            g.fallback(format!(
                "contradiction rate {:.1} % not below {:.1} %; accepting partial validation",
                contradicted * 100.0,
                self.max_contradiction_rate * 100.0
            ));
        }
        if out.partial == Some(true) {
            g.fallback(
                "the validator checked part of the sources; accepting partial results".into(),
            );
        }
        g
    }
}

impl AnalysisGate {
    /// The gate over the analysis output (`patterns: [..]`, `insights:
    /// [{confidence, evidence: [..]}]`).
    pub fn evaluate(&self, output: &Value) -> GateDecision {
        let mut g = GateDecision::new(Phase::Analyzing);
        let Some(out) = read::<AnalysisOutput>(&mut g, output) else {
            return g;
        };
        let patterns = out.patterns.map_or(0, |p| p.len());
        let insights = out.insights.unwrap_or_default();
        g.metrics.insert("patterns".into(), patterns as f64);
        g.metrics.insert("insights".into(), insights.len() as f64);
        if (patterns as u32) < self.min_patterns {
            g.fail(format!(
                "{patterns} patterns identified, at least {} required",
                self.min_patterns
            ));
        }
        if (insights.len() as u32) < self.min_insights {
            g.fail(format!(
                "{} key insights, at least {} required",
                insights.len(),
                self.min_insights
            ));
        }
        if g.verdict == Verdict::Fail {
            return g;
        }
        let no_evidence = insights
            .iter()
            .filter(|i| i.evidence.as_ref().is_none_or(Vec::is_empty))
            .count();
        let no_confidence = insights
            .iter()
            .filter(|i| !i.confidence.is_some_and(|c| (0.0..=1.0).contains(&c)))
            .count();
        if no_evidence > 0 {
            g.fallback(format!(
                "{no_evidence} insights lack an evidence chain; using the basic analysis"
            ));
        }
        if no_confidence > 0 {
            g.fallback(format!(
                "{no_confidence} insights lack a confidence score; using the basic analysis"
            ));
        }
        g
    }
}

impl SynthesisGate {
    /// The gate over the synthesis output (`sections: {name: text or list}`).
    pub fn evaluate(&self, output: &Value) -> GateDecision {
        let mut g = GateDecision::new(Phase::Synthesizing);
        let Some(out) = read::<SynthesisOutput>(&mut g, output) else {
            return g;
        };
        let missing: Vec<&str> = self
            .required_sections
            .iter()
            .filter(|s| out.section(s).is_none_or(Section::is_empty))
            .map(String::as_str)
            .collect();
        g.metrics.insert(
            "sections".into(),
            (self.required_sections.len() - missing.len()) as f64,
        );
        if !missing.is_empty() {
            g.fail(format!(
                "report sections missing or empty: {}",
                missing.join(", ")
            ));
        }
        g
    }
}

impl Gate {
    /// Evaluates a single-output gate (every phase but discovery).
    pub fn evaluate_output(&self, output: &Value) -> GateDecision {
        match self {
            Gate::Discovery(d) => d.evaluate(&[]),
            Gate::Consolidation(c) => c.evaluate(output),
            Gate::Validation(v) => v.evaluate(output),
            Gate::Analysis(a) => a.evaluate(output),
            Gate::Synthesis(s) => s.evaluate(output),
        }
    }
}
