//! A gate's decision package as HTML: what blocks approval, the findings
//! with confidence and evidence, open debates, the provisional decisions
//! that require review (both positions and credibility), precedents,
//! re-runs, the tasks, and the decision form.

use maud::{html, Markup};

use caucus_shared::api::coordinator::gates::{DecisionPackage, GateAction, PackageFinding};
use caucus_shared::api::facilitator::{DebateSummary, Precedent};

use crate::layout::{csrf_field, time};
use crate::viewer::Viewer;

use super::positions::value;
use super::provisional;

/// The whole package, with `flash` (the result of the last action) first.
pub(super) fn render(pkg: &DecisionPackage, viewer: &Viewer, flash: Option<&str>) -> Markup {
    html! {
        @if let Some(msg) = flash { p class="flash" { (msg) } }
        p {
            "Workflow " a href={"/workflows/" (pkg.workflow_id)} { (pkg.workflow_id) }
            " · pipeline " (pkg.pipeline)
            @if let Some(at) = &pkg.gate.opened_at { " · opened " (time(at)) }
            " · waiting " (super::waiting(pkg.gate.waiting_ms))
            @if pkg.gate.escalated { " " span class="flag" { "escalated" } }
        }
        section id="blocking" {
            h2 { "What blocks approval" }
            @if pkg.blocking.is_empty() {
                p class="can-approve" { "Nothing: the gate can be approved." }
            } @else {
                ul { @for b in &pkg.blocking { li { (b) } } }
            }
        }
        (decide_form(pkg, viewer))
        (provisional::section(pkg, viewer))
        section id="findings" {
            h2 { "Findings (" (pkg.findings.len()) ")" }
            (findings(&pkg.findings))
        }
        @if !pkg.late_findings.is_empty() {
            section id="late-findings" {
                h2 { "Late findings" }
                ul {
                    @for l in &pkg.late_findings {
                        li {
                            (l.from_agent) " → " (l.to_agent) ": " (l.finding)
                            " (arrived " (time(&l.stored_at)) " after "
                            (l.stages.join(", ")) "; sending back to them applies it)"
                        }
                    }
                }
            }
        }
        section id="open-debates" {
            h2 { "Open debates (" (pkg.open_debates.len()) ")" }
            @if let Some(why) = &pkg.facilitator { p class="error" { (why) } }
            (debates(&pkg.open_debates))
        }
        section id="precedents" {
            h2 { "Precedents" }
            (precedents(&pkg.precedents))
        }
        @if !pkg.reruns.is_empty() {
            section id="reruns" {
                h2 { "Re-runs" }
                ul {
                    @for r in &pkg.reruns {
                        li {
                            (r.rerun_id) ": " (r.reason) " by " (r.requested_by) " at " (time(&r.requested_at))
                            " — " (r.groups.iter().map(|g| g.join(" + ")).collect::<Vec<_>>().join(" then "))
                            @if r.completed_at.is_some() { " (done)" } @else { " (running)" }
                        }
                    }
                }
            }
        }
        section id="tasks" {
            h2 { "Tasks" }
            table {
                thead { tr { th { "Task" } th { "Stage" } th { "Agent type" } th { "State" } th { "Finished" } } }
                tbody {
                    @for t in &pkg.tasks {
                        tr {
                            td { (t.task) @if t.rerun { " " span class="flag" { "re-run" } } }
                            td { (t.stage) }
                            td { (t.agent_type) }
                            td class="state" { (t.state.as_str()) }
                            td { @if let Some(at) = &t.finished_at { (time(at)) } }
                        }
                    }
                }
            }
        }
    }
}

/// `form#decide`: the rationale, the stages to send back to, one button per
/// action the gate offers.
fn decide_form(pkg: &DecisionPackage, viewer: &Viewer) -> Markup {
    let offers = |a: GateAction| pkg.actions.contains(&a);
    html! {
        section id="decision" {
            h2 { "Decide" }
            form id="decide" method="post" action={"/gates/" (pkg.workflow_id) "/decide"} {
                (csrf_field(viewer))
                input type="hidden" name="gate" value=(pkg.gate.gate);
                p {
                    label for="rationale" { "Rationale (required to reject or send back)" } br;
                    textarea id="rationale" name="rationale" rows="4" cols="80" {}
                }
                p {
                    label for="to_stage" { "Send back to (stages; default: the gate's dependencies)" } br;
                    input id="to_stage" name="to_stage" type="text" size="60";
                }
                @if offers(GateAction::Approve) {
                    button type="submit" name="action" value="approve" disabled[!pkg.can_approve] { "Approve" }
                    " "
                }
                @if offers(GateAction::Reject) {
                    button type="submit" name="action" value="reject" { "Reject" } " "
                }
                @if offers(GateAction::SendBack) {
                    button type="submit" name="action" value="send_back" { "Send back" }
                }
            }
        }
    }
}

fn findings(all: &[PackageFinding]) -> Markup {
    html! {
        table class="findings" {
            thead { tr { th { "From" } th { "Finding" } th { "Metric" } th { "Confidence" } th { "Evidence" } th { "Impact" } th { "At" } } }
            tbody {
                @for f in all {
                    tr {
                        td { (f.from_agent) @if f.source.as_str() == "outside" { " " span class="flag" { "outside" } } }
                        td { (f.finding) @if f.late { " " span class="flag" { "late" } } }
                        td { @if let Some(m) = &f.metric { (m) } @if let Some(v) = &f.value { " = " (value(v)) } }
                        td class="confidence" { @if let Some(c) = f.confidence { (format!("{c:.2}")) } @else { "-" } }
                        td { @if !f.evidence.is_empty() { ul { @for e in &f.evidence { li { (e) } } } } }
                        td { @if let Some(i) = &f.impact { (i) } }
                        td { @if let Some(at) = &f.timestamp { (time(at)) } }
                    }
                }
            }
        }
    }
}

/// Open debates as a table (also used by the debates page's history).
pub(crate) fn debates(all: &[DebateSummary]) -> Markup {
    html! {
        @if all.is_empty() { p { "None." } } @else {
            table class="debates" {
                thead { tr { th { "Debate" } th { "Topic" } th { "Challenger" } th { "Challenged" } th { "Level" } th { "State" } th { "Deadline" } } }
                tbody {
                    @for d in all {
                        tr data-debate-id=(d.debate_id) {
                            td { a href={"/debates/" (d.debate_id)} { (d.debate_id) } }
                            td { (d.topic) }
                            td { (d.challenger) }
                            td { (d.challenged) }
                            td class="level" { (d.level) }
                            td { (d.state.as_str()) }
                            td { @if let Some(at) = &d.deadline { (time(at)) } }
                        }
                    }
                }
            }
        }
    }
}

fn precedents(all: &[Precedent]) -> Markup {
    html! {
        @if all.is_empty() { p { "None cited." } } @else {
            ul {
                @for p in all {
                    li {
                        a href={"/debates/" (p.debate_id)} { (p.debate_id) } ": " (p.topic)
                        " — " (p.outcome) " (level " (p.level) ", " (p.method)
                        ", similarity " (format!("{:.2}", p.similarity))
                        @if p.overridden { ", later overridden" } ")"
                    }
                }
            }
        }
    }
}
