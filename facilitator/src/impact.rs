//! Downstream impact of overriding a provisional decision (seed 001,
//! "Downstream Impact Calculation Algorithm"): which analyses used the
//! provisional assumption, how much each result would move, which must be
//! re-run, and whether re-runs go serially or in parallel.
//!
//! Valuation sensitivity: price moves in proportion to the relative change
//! of a margin-like assumption (`margin_price_elasticity`, default 1.0). At
//! a 10 % margin that is the seed's "1 point of margin ≈ 10 % of price"; at
//! the seed's 25 % margin, 25 % → 28 % is +12 %, so a $85 target becomes
//! $95.20, the seed's worked example. Assumptions that are conservative
//! when *higher* (risk, discount rate) move price the other way.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::debate::conservative::{direction, Direction};

/// `estimate_method` of every numeric estimate: the result moved in
/// proportion to the assumption's relative change.
pub const LINEAR_SENSITIVITY: &str = "linear sensitivity";

/// `v` rounded to 2 decimals (estimates are not more precise than that).
pub fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Re-run thresholds (seed: target price > 10 %, confidence > 0.15, any
/// rating change, risk > 0.10; anything else 0.10).
pub fn threshold(output_metric: &str) -> f64 {
    match output_metric {
        "target_price" => 0.10,
        "confidence_score" => 0.15,
        "rating" => 1.0,
        "risk_score" => 0.10,
        _ => 0.10,
    }
}

/// True when a change of `delta` in `output_metric` requires a re-run.
/// Ratings re-run on any change of at least one notch; the rest strictly
/// above the threshold.
pub fn requires_rerun(output_metric: &str, delta: f64) -> bool {
    if output_metric == "rating" {
        delta >= 1.0
    } else {
        delta > threshold(output_metric)
    }
}

/// The seed's dependency graph: `parent → [(child, assumption used)]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DependencyGraph {
    edges: BTreeMap<String, Vec<(String, String)>>,
}

impl DependencyGraph {
    /// Records that `child` depends on `parent` through `assumption`.
    pub fn add_dependency(&mut self, parent: &str, child: &str, assumption: &str) {
        self.edges
            .entry(parent.to_string())
            .or_default()
            .push((child.to_string(), assumption.to_string()));
    }

    /// Every analysis using `changed`, then (recursively) every analysis
    /// using those analyses' outputs; deduplicated, cycle-safe, sorted.
    pub fn find_affected_nodes(&self, changed: &str) -> Vec<String> {
        let mut out = BTreeSet::new();
        let mut frontier = vec![changed.to_string()];
        while let Some(assumption) = frontier.pop() {
            for deps in self.edges.values() {
                for (child, used) in deps {
                    if *used == assumption && out.insert(child.clone()) {
                        frontier.push(child.clone());
                    }
                }
            }
        }
        out.into_iter().collect()
    }
}

pub use caucus_shared::api::facilitator::{
    Analysis, AnalysisKind, AssumptionChange, Impact, ImpactReport, RerunPlan, Strategy,
};

/// Sensitivities of the impact estimate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ImpactParams {
    /// Relative price change per relative assumption change.
    pub margin_price_elasticity: f64,
    /// Risk/confidence score change per relative assumption change.
    pub risk_sensitivity: f64,
}

impl Default for ImpactParams {
    fn default() -> Self {
        let cfg = caucus_shared::config::FacilitatorConfig::default();
        ImpactParams {
            margin_price_elasticity: cfg.margin_price_elasticity,
            risk_sensitivity: cfg.risk_sensitivity,
        }
    }
}

/// The analyses of `analyses` affected by `change`.
pub fn affected<'a>(change: &AssumptionChange, analyses: &'a [Analysis]) -> Vec<&'a Analysis> {
    let mut graph = DependencyGraph::default();
    for a in analyses {
        if a.inputs.is_empty() && a.depends_on.is_empty() {
            graph.add_dependency("assumptions", &a.analysis_id, &change.metric);
        }
        for i in &a.inputs {
            graph.add_dependency("assumptions", &a.analysis_id, i);
        }
        for d in &a.depends_on {
            graph.add_dependency(d, &a.analysis_id, d);
        }
    }
    let ids = graph.find_affected_nodes(&change.metric);
    analyses
        .iter()
        .filter(|a| ids.contains(&a.analysis_id))
        .collect()
}

/// Estimates the impact of `change` on every affected analysis.
pub fn calculate(
    change: &AssumptionChange,
    analyses: &[Analysis],
    params: &ImpactParams,
) -> ImpactReport {
    let rel = change.relative();
    // Optimistic-when-higher assumptions (margins) move price with them;
    // cautious-when-higher ones (risk, discount rates) against.
    let sign = match direction(&change.metric) {
        Some(Direction::Higher) => -1.0,
        _ => 1.0,
    };
    let impacts: Vec<Impact> = affected(change, analyses)
        .into_iter()
        .map(|a| {
            let (delta, new, conf) = match a.kind {
                AnalysisKind::Valuation | AnalysisKind::Sensitivity => {
                    let pct = sign * rel * params.margin_price_elasticity;
                    (
                        pct.abs(),
                        a.current_result.map(|v| v * (1.0 + pct)),
                        Some(0.70),
                    )
                }
                AnalysisKind::RiskAssessment => {
                    let d = sign * rel * params.risk_sensitivity;
                    let moved = |v: f64| {
                        let v = if a.output_metric == "risk_score" {
                            v - d
                        } else {
                            v + d
                        };
                        v.clamp(0.0, 1.0)
                    };
                    (d.abs(), a.current_result.map(moved), Some(0.70))
                }
                AnalysisKind::Other => (0.0, a.current_result, None),
            };
            let rerun = requires_rerun(&a.output_metric, delta);
            let action = if rerun {
                format!(
                    "re-run required: {} moves {:.3} (> {})",
                    a.output_metric,
                    delta,
                    threshold(&a.output_metric)
                )
            } else if a.kind == AnalysisKind::Other {
                "flag for review: uses the assumption as context".into()
            } else {
                format!("update only: {} moves {:.3}", a.output_metric, delta)
            };
            Impact {
                analysis_id: a.analysis_id.clone(),
                kind: a.kind,
                output_metric: a.output_metric.clone(),
                old_value: a.current_result,
                estimate_method: new
                    .filter(|_| conf.is_some())
                    .map(|_| LINEAR_SENSITIVITY.to_string()),
                estimated_new_value: if conf.is_some() { new.map(round2) } else { new },
                delta,
                requires_rerun: rerun,
                estimate_confidence: conf,
                rerun_minutes: a.rerun_minutes,
                action,
            }
        })
        .collect();
    let total_rerun_minutes = impacts
        .iter()
        .filter(|i| i.requires_rerun)
        .map(|i| i.rerun_minutes)
        .sum();
    ImpactReport {
        changed_assumption: change.clone(),
        affected_count: impacts.len(),
        high_impact_count: impacts.iter().filter(|i| i.requires_rerun).count(),
        total_rerun_minutes,
        impacts,
    }
}

/// A report for an override whose positions are not numeric: nothing can
/// be estimated, so every affected analysis is flagged for review.
pub fn flag_only(metric: &str, analyses: &[Analysis]) -> ImpactReport {
    let change = AssumptionChange {
        metric: metric.to_string(),
        old_value: 0.0,
        new_value: 0.0,
    };
    let impacts: Vec<Impact> = affected(&change, analyses)
        .into_iter()
        .map(|a| Impact {
            analysis_id: a.analysis_id.clone(),
            kind: a.kind,
            output_metric: a.output_metric.clone(),
            old_value: a.current_result,
            estimated_new_value: None,
            estimate_method: None,
            delta: 0.0,
            requires_rerun: false,
            estimate_confidence: None,
            rerun_minutes: a.rerun_minutes,
            action:
                "flag for review: the positions are not numeric, so the change cannot be estimated"
                    .into(),
        })
        .collect();
    ImpactReport {
        changed_assumption: change,
        affected_count: impacts.len(),
        impacts,
        total_rerun_minutes: 0.0,
        high_impact_count: 0,
    }
}

/// Plans the re-runs: serial for at most two, parallel when no required
/// re-run depends (directly or through others) on another required one,
/// serial otherwise.
pub fn plan_reruns(report: &ImpactReport, analyses: &[Analysis]) -> RerunPlan {
    let mut required: Vec<Impact> = report
        .impacts
        .iter()
        .filter(|i| i.requires_rerun)
        .cloned()
        .collect();
    let optional: Vec<Impact> = report
        .impacts
        .iter()
        .filter(|i| !i.requires_rerun)
        .cloned()
        .collect();
    required.sort_by(|a, b| b.delta.total_cmp(&a.delta));
    let strategy = if required.len() <= 2 || !independent(&required, analyses) {
        Strategy::Serial
    } else {
        Strategy::Parallel
    };
    let estimated_minutes = match strategy {
        Strategy::Serial => required.iter().map(|i| i.rerun_minutes).sum(),
        Strategy::Parallel => required.iter().map(|i| i.rerun_minutes).fold(0.0, f64::max),
    };
    RerunPlan {
        blocking: !required.is_empty(),
        required_reruns: required,
        optional_updates: optional,
        execution_strategy: strategy,
        estimated_minutes,
    }
}

fn independent(required: &[Impact], analyses: &[Analysis]) -> bool {
    let ids: BTreeSet<&str> = required.iter().map(|i| i.analysis_id.as_str()).collect();
    let by_id: BTreeMap<&str, &Analysis> = analyses
        .iter()
        .map(|a| (a.analysis_id.as_str(), a))
        .collect();
    for id in &ids {
        // Walk everything `id` depends on; meeting another required re-run
        // means the two cannot run side by side.
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&str> = by_id
            .get(id)
            .map(|a| a.depends_on.iter().map(String::as_str).collect())
            .unwrap_or_default();
        while let Some(d) = stack.pop() {
            if !seen.insert(d) {
                continue;
            }
            if ids.contains(d) {
                return false;
            }
            if let Some(a) = by_id.get(d) {
                stack.extend(a.depends_on.iter().map(String::as_str));
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analysis(
        id: &str,
        kind: AnalysisKind,
        metric: &str,
        current: Option<f64>,
        minutes: f64,
        deps: &[&str],
    ) -> Analysis {
        Analysis {
            analysis_id: id.into(),
            kind,
            output_metric: metric.into(),
            current_result: current,
            rerun_minutes: minutes,
            inputs: if deps.is_empty() {
                vec!["operating_margin".into()]
            } else {
                vec![]
            },
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    /// The seed's usage example: 25 % provisional, human says 28 %, DCF
    /// target $85.
    pub(crate) fn seed_analyses() -> Vec<Analysis> {
        vec![
            analysis(
                "dcf_valuation",
                AnalysisKind::Valuation,
                "target_price",
                Some(85.0),
                5.0,
                &[],
            ),
            analysis(
                "sensitivity_analysis",
                AnalysisKind::Sensitivity,
                "target_price",
                Some(85.0),
                10.0,
                &["dcf_valuation"],
            ),
            analysis(
                "risk_assessment",
                AnalysisKind::RiskAssessment,
                "confidence_score",
                Some(0.60),
                3.0,
                &[],
            ),
            analysis(
                "peer_comparison",
                AnalysisKind::Other,
                "context",
                None,
                2.0,
                &[],
            ),
        ]
    }

    #[test]
    fn seed_usage_example() {
        let change = AssumptionChange {
            metric: "operating_margin".into(),
            old_value: 0.25,
            new_value: 0.28,
        };
        let analyses = seed_analyses();
        let report = calculate(&change, &analyses, &ImpactParams::default());
        assert_eq!(report.affected_count, 4);
        let dcf = report
            .impacts
            .iter()
            .find(|i| i.analysis_id == "dcf_valuation")
            .unwrap();
        assert!((dcf.delta - 0.12).abs() < 1e-9, "DCF: +12 % target price");
        let price = dcf.estimated_new_value.unwrap();
        assert!((price - 95.2).abs() < 1e-9, "$85 → about $95, got {price}");
        assert!(
            dcf.requires_rerun,
            "target price delta > 10 % → re-run required"
        );
        let risk = report
            .impacts
            .iter()
            .find(|i| i.analysis_id == "risk_assessment")
            .unwrap();
        assert!((risk.delta - 0.048).abs() < 1e-9, "risk: about +0.05");
        assert!(!risk.requires_rerun, "risk delta < threshold → update only");
        assert!(risk.action.starts_with("update only"));
        let peer = report
            .impacts
            .iter()
            .find(|i| i.analysis_id == "peer_comparison")
            .unwrap();
        assert!(!peer.requires_rerun);
        assert_eq!(report.high_impact_count, 2);
        assert_eq!(
            report.total_rerun_minutes, 15.0,
            "DCF 5 min + sensitivity 10 min"
        );
        let plan = plan_reruns(&report, &analyses);
        assert_eq!(plan.execution_strategy, Strategy::Serial);
        assert_eq!(plan.required_reruns[0].analysis_id, "dcf_valuation");
        assert_eq!(plan.estimated_minutes, 15.0);
        assert!(plan.blocking);
    }

    #[test]
    fn estimates_say_how_they_were_made_and_are_rounded_to_cents() {
        // A large change, as in the AMZN override: the linear estimate is
        // labelled as such, in cents, never 160.28338396762769.
        let change = AssumptionChange {
            metric: "operating_margin".into(),
            old_value: 0.0531,
            new_value: 0.1874,
        };
        let report = calculate(&change, &seed_analyses(), &ImpactParams::default());
        let dcf = &report.impacts[0];
        assert_eq!(dcf.analysis_id, "dcf_valuation");
        let v = dcf.estimated_new_value.unwrap();
        assert_eq!(v, round2(85.0 * (1.0 + change.relative())));
        let decimals = v.to_string().split('.').nth(1).map_or(0, str::len);
        assert!(decimals <= 2, "{v}");
        assert_eq!(dcf.estimate_method.as_deref(), Some(LINEAR_SENSITIVITY));
        let peer = report
            .impacts
            .iter()
            .find(|i| i.analysis_id == "peer_comparison")
            .unwrap();
        assert_eq!(peer.estimate_method, None, "nothing estimated");
        let flagged = flag_only("operating_margin", &seed_analyses());
        assert!(flagged.impacts.iter().all(|i| i.estimate_method.is_none()));
        let json = serde_json::to_value(dcf).unwrap();
        assert_eq!(json["estimate_method"], "linear sensitivity");
    }

    #[test]
    fn thresholds() {
        assert!(requires_rerun("target_price", 0.11) && !requires_rerun("target_price", 0.10));
        assert!(
            requires_rerun("confidence_score", 0.16) && !requires_rerun("confidence_score", 0.15)
        );
        assert!(requires_rerun("rating", 1.0) && !requires_rerun("rating", 0.0));
        assert!(requires_rerun("risk_score", 0.11) && !requires_rerun("risk_score", 0.05));
    }

    #[test]
    fn three_independent_reruns_go_parallel_dependent_ones_serial() {
        let change = AssumptionChange {
            metric: "operating_margin".into(),
            old_value: 0.20,
            new_value: 0.30,
        };
        let three = vec![
            analysis(
                "a",
                AnalysisKind::Valuation,
                "target_price",
                Some(10.0),
                5.0,
                &[],
            ),
            analysis(
                "b",
                AnalysisKind::Valuation,
                "target_price",
                Some(10.0),
                7.0,
                &[],
            ),
            analysis(
                "c",
                AnalysisKind::Valuation,
                "target_price",
                Some(10.0),
                3.0,
                &[],
            ),
        ];
        let plan = plan_reruns(
            &calculate(&change, &three, &ImpactParams::default()),
            &three,
        );
        assert_eq!(plan.execution_strategy, Strategy::Parallel);
        assert_eq!(plan.estimated_minutes, 7.0);
        let mut chained = three.clone();
        chained[2].inputs.clear();
        chained[2].depends_on = vec!["a".into()];
        let plan = plan_reruns(
            &calculate(&change, &chained, &ImpactParams::default()),
            &chained,
        );
        assert_eq!(plan.execution_strategy, Strategy::Serial);
        assert_eq!(plan.estimated_minutes, 15.0);
    }

    #[test]
    fn graph_follows_outputs_and_survives_cycles() {
        let mut g = DependencyGraph::default();
        g.add_dependency("fin", "dcf", "operating_margin");
        g.add_dependency("dcf", "sens", "dcf");
        g.add_dependency("sens", "dcf", "sens");
        g.add_dependency("fin", "other", "revenue_growth");
        assert_eq!(
            g.find_affected_nodes("operating_margin"),
            vec!["dcf", "sens"]
        );
        assert!(g.find_affected_nodes("nothing").is_empty());
    }

    #[test]
    fn unaffected_analyses_are_left_out() {
        let change = AssumptionChange {
            metric: "operating_margin".into(),
            old_value: 0.25,
            new_value: 0.28,
        };
        let mut a = seed_analyses();
        a[3].inputs = vec!["revenue_growth".into()];
        assert_eq!(
            calculate(&change, &a, &ImpactParams::default()).affected_count,
            3
        );
    }
}
