//! The facilitator's downstream impact report of an override, as HTML: the
//! changed assumption, each downstream analysis with its result now and the
//! estimate after the override, and the re-run plan. It is the report the
//! override will record, computed by a dry run before anything changes.

use maud::{html, Markup};

use caucus_shared::api::facilitator::{AnalysisKind, Impact, OverrideImpact, Strategy};

/// `section#impact-report`: the report, or why there is none.
pub(super) fn report(impact: Option<&OverrideImpact>) -> Markup {
    let Some(OverrideImpact { report, plan }) = impact else {
        return html! {
            section id="impact-report" {
                p { "The facilitator reports no downstream impact: the positions name no assumption it can follow to the analyses." }
            }
        };
    };
    let change = &report.changed_assumption;
    // `flag_only` reports non-numeric positions as 0 → 0: no change to show.
    let numeric = change.old_value != 0.0 || change.new_value != 0.0;
    html! {
        section id="impact-report" {
            p id="changed-assumption" {
                "Changed assumption: " strong { (change.metric) }
                @if numeric {
                    " " (num(change.old_value)) " → " (num(change.new_value))
                    " (" (signed_percent(change.relative())) ")"
                } @else {
                    " (the positions are not numeric: nothing can be estimated)"
                }
            }
            @if report.impacts.is_empty() {
                p { "No analysis uses it: the override changes no analysis already made." }
            } @else {
                table id="impacts" {
                    thead { tr {
                        th { "Analysis" } th { "Kind" } th { "Output" } th { "Now" }
                        th { "Estimated after the override" } th { "Change" }
                        th { "Re-run" } th { "Minutes" } th { "What happens" }
                    } }
                    tbody { @for i in &report.impacts { (row(i)) } }
                }
            }
            p id="impact-summary" {
                (report.affected_count) " " (plural(report.affected_count, "analysis", "analyses")) " affected, "
                (report.high_impact_count) " " (plural(report.high_impact_count, "re-run", "re-runs")) " required"
                @if plan.blocking {
                    " (" (strategy(plan.execution_strategy)) ", about " (num(plan.estimated_minutes)) " min); the gate waits for them before it can be approved."
                } @else {
                    "; nothing has to run again before the gate can be approved."
                }
            }
            @if !plan.optional_updates.is_empty() {
                p { "Figures updated without a re-run: "
                    (plan.optional_updates.iter().map(|i| i.analysis_id.as_str()).collect::<Vec<_>>().join(", ")) }
            }
        }
    }
}

fn row(i: &Impact) -> Markup {
    html! {
        tr data-analysis-id=(i.analysis_id) {
            td { (i.analysis_id) }
            td { (kind(i.kind)) }
            td { (i.output_metric) }
            td class="old" { @if let Some(v) = i.old_value { (num(v)) } @else { "-" } }
            td class="new" {
                @match i.estimated_new_value {
                    Some(v) => {
                        (num(v))
                        @if let Some(m) = &i.estimate_method { " (" (m)
                            @if let Some(c) = i.estimate_confidence { ", confidence " (format!("{c:.2}")) }
                        ")" }
                    }
                    None => { "not estimated" }
                }
            }
            td class="delta" { (delta(i)) }
            td class="rerun" { @if i.requires_rerun { strong { "required" } } @else { "no" } }
            td { (num(i.rerun_minutes)) }
            td { (i.action) }
        }
    }
}

/// A figure as people read it: no trailing zeros, at most 4 decimals.
fn num(v: f64) -> String {
    let s = format!("{:.4}", v);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// `+12.0%`.
fn signed_percent(f: f64) -> String {
    format!("{:+.1}%", f * 100.0)
}

/// The size of the change: a fraction of the price for valuations, points
/// for scores (the facilitator's `delta`).
fn delta(i: &Impact) -> String {
    match i.kind {
        AnalysisKind::Valuation | AnalysisKind::Sensitivity => {
            format!("{:.1}%", i.delta * 100.0)
        }
        AnalysisKind::RiskAssessment => format!("{} points", num(i.delta)),
        AnalysisKind::Other => "-".into(),
    }
}

fn kind(k: AnalysisKind) -> &'static str {
    match k {
        AnalysisKind::Valuation => "valuation",
        AnalysisKind::Sensitivity => "sensitivity",
        AnalysisKind::RiskAssessment => "risk assessment",
        AnalysisKind::Other => "other",
    }
}

fn strategy(s: Strategy) -> &'static str {
    match s {
        Strategy::Serial => "one after another",
        Strategy::Parallel => "side by side",
    }
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 {
        one
    } else {
        many
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_drop_trailing_zeros_and_keep_four_decimals() {
        assert_eq!(num(0.25), "0.25");
        assert_eq!(num(0.3), "0.3");
        assert_eq!(num(95.2), "95.2");
        assert_eq!(num(85.0), "85");
        assert_eq!(num(0.123456), "0.1235");
        assert_eq!(num(-0.0), "0");
        assert_eq!(signed_percent(0.2), "+20.0%");
        assert_eq!(signed_percent(-0.12), "-12.0%");
    }
}
