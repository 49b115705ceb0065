//! Level 5: a gate reviews a provisional decision (confirm, override, re-debate).

use caucus_shared::messages::ResolutionMethod;
use chrono::{DateTime, Utc};

use super::super::record::{Debate, DebateState};
use super::super::resolution::{
    OverrideImpact, OverrideStatus, OverrideWindow, HUMAN_CONFIDENCE, PROVISIONAL_CONFIDENCE,
};
use super::super::{DebateError, Effect, RedebateRequest};
use super::decisions::GateAction;

impl Debate {
    /// Level 5: the gate confirms, overrides (with the override's impact)
    /// or asks for a re-debate of a provisional decision.
    pub fn gate_review(
        &mut self,
        now: DateTime<Utc>,
        action: &GateAction,
        impact: Option<&OverrideImpact>,
    ) -> Result<Vec<Effect>, DebateError> {
        if self.state != DebateState::Provisional {
            return Err(self.wrong_state("only provisional decisions are reviewed at a gate"));
        }
        let Some(mut prior) = self.resolution.clone() else {
            return Err(self.wrong_state("provisional without a provisional resolution"));
        };
        prior.override_window = OverrideWindow {
            status: OverrideStatus::Closed,
            closes_at: Some(now),
        };
        let mut rec = match action {
            GateAction::Confirm { reviewer } => {
                let mut r = self.binding_record(
                    now,
                    5,
                    ResolutionMethod::GateConfirm,
                    "gate-confirmed",
                    prior.final_position.clone(),
                    prior.winning_side,
                    HUMAN_CONFIDENCE,
                    format!(
                        "`{reviewer}` confirmed the conservative default: {}",
                        prior
                            .provisional_details
                            .as_ref()
                            .map_or("", |p| p.conservative_rationale.as_str())
                    ),
                    self.assessment.clone(),
                );
                r.decided_by = Some(reviewer.clone());
                r
            }
            GateAction::Override {
                reviewer,
                side,
                position,
                rationale,
            } => {
                if rationale.trim().is_empty() {
                    return Err(self.not_allowed("an override needs a rationale"));
                }
                let (p, s) = self.chosen(*side, position.as_ref())?;
                let confidence = p.confidence.unwrap_or(HUMAN_CONFIDENCE);
                let mut r = self.binding_record(
                    now,
                    5,
                    ResolutionMethod::GateOverride,
                    "gate-overridden",
                    Some(p),
                    s,
                    confidence,
                    rationale.clone(),
                    self.assessment.clone(),
                );
                r.decided_by = Some(reviewer.clone());
                if let Some(i) = impact {
                    r.impact = format!(
                        "{}; downstream: {} analyses affected, {} re-runs required ({:?}, about {} min)",
                        r.impact,
                        i.report.affected_count,
                        i.report.high_impact_count,
                        i.plan.execution_strategy,
                        i.plan.estimated_minutes
                    );
                    r.impact_report = Some(i.clone());
                }
                r
            }
            GateAction::Redebate { reviewer, context } => {
                let mut r = self.binding_record(
                    now,
                    5,
                    ResolutionMethod::GateRedebate,
                    "re-debate requested",
                    None,
                    None,
                    PROVISIONAL_CONFIDENCE,
                    format!("`{reviewer}` asked for a re-debate: {context}"),
                    self.assessment.clone(),
                );
                r.impact =
                    "the provisional position stays in use until the re-debate resolves".into();
                r.decided_by = Some(reviewer.clone());
                r
            }
        };
        rec.snapshot_id = self.snapshot.snapshot_id.clone();
        self.superseded.push(prior);
        let mut out = vec![self.finish(now, rec, "gate_reviewed")];
        if let GateAction::Redebate { context, .. } = action {
            out.push(Effect::Redebate(Box::new(self.redebate_request(context))));
        }
        Ok(out)
    }

    fn redebate_request(&self, context: &str) -> RedebateRequest {
        let root = match self.generation {
            0 => self.debate_id.as_str(),
            g => self
                .debate_id
                .strip_suffix(&format!("-r{g}"))
                .unwrap_or(&self.debate_id),
        };
        let generation = self.generation + 1;
        let mut challenge = self.challenge.clone();
        challenge.debate_id = Some(format!("{root}-r{generation}"));
        challenge.snapshot_id = None;
        challenge.challenger_position = self.challenger_position.clone();
        challenge.challenged_position = self.challenged_position.clone();
        challenge
            .counter_evidence
            .push(format!("re-debate context: {context}"));
        challenge.provisional_resolution = self
            .resolution
            .as_ref()
            .or(self.superseded.last())
            .and_then(|r| r.final_position.as_ref())
            .and_then(|p| serde_json::to_value(p).ok());
        RedebateRequest {
            challenge,
            extensions: self.extensions.clone(),
            redebate_of: self.debate_id.clone(),
            generation,
        }
    }
}
