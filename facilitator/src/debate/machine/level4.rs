//! Level 4: a provisional conservative default until a gate reviews it.

use caucus_shared::messages::{DebateEscalation, ResolutionMethod};
use chrono::{DateTime, Utc};

use super::super::conservative;
use super::super::record::{Debate, DebateState};
use super::super::resolution::{
    OverrideStatus, OverrideWindow, ProvisionalDetails, ResolutionRecord, PROVISIONAL_CONFIDENCE,
};
use super::super::{Effect, Timeouts};
use super::step::after;

impl Debate {
    /// Level 4 from level 3 (time-out, unavailable expert) or from a full
    /// queue on a critical-path debate.
    pub(super) fn fallback(
        &mut self,
        now: DateTime<Utc>,
        t: &Timeouts,
        trigger: &str,
    ) -> Vec<Effect> {
        let mut out = self.release_expert();
        out.extend(self.provisional(
            now,
            t,
            trigger,
            ResolutionMethod::ConservativeDefault,
            "provisional - conservative default",
        ));
        out
    }

    pub(super) fn provisional(
        &mut self,
        now: DateTime<Utc>,
        t: &Timeouts,
        trigger: &str,
        method: ResolutionMethod,
        label: &str,
    ) -> Vec<Effect> {
        let choice = conservative::choose(
            &self.challenge.disputed_finding,
            self.challenger_position.as_ref(),
            self.challenged_position.as_ref(),
        );
        let review_deadline = self
            .extensions
            .next_gate
            .filter(|g| *g > now)
            .unwrap_or_else(|| after(now, t.fallback_window));
        let deps = self.extensions.downstream_dependencies.clone();
        let impact = format!(
            "downstream analyses continue with the conservative assumption `{}`; {} flagged for revision if a gate overrides it",
            choice.position.statement,
            if deps.is_empty() {
                "dependents".to_string()
            } else {
                deps.join(", ")
            }
        );
        let rec = ResolutionRecord {
            debate_id: self.debate_id.clone(),
            level: 4,
            method,
            label: label.to_string(),
            binding: false,
            provisional: true,
            winner: choice.side.map(|s| self.agent(s).to_string()),
            winning_side: choice.side,
            final_position: Some(choice.position.clone()),
            evidence_considered: self.evidence_considered(),
            rationale: format!("{trigger}: {}", choice.rationale),
            confidence: choice
                .position
                .confidence
                .map_or(PROVISIONAL_CONFIDENCE, |c| c.min(PROVISIONAL_CONFIDENCE)),
            impact,
            override_window: OverrideWindow {
                status: OverrideStatus::Open,
                closes_at: Some(review_deadline),
            },
            provisional_details: Some(ProvisionalDetails {
                conservative_rationale: choice.rationale,
                rule: choice.rule,
                alternatives: choice.alternatives,
                review_deadline,
                downstream_dependencies: deps,
                trigger: trigger.to_string(),
            }),
            credibility: self.assessment.clone(),
            decided_by: None,
            impact_report: None,
            snapshot_id: self.snapshot.snapshot_id.clone(),
            resolved_at: now,
        };
        let from_level = self.level;
        self.expert = None;
        self.resolution = Some(rec.clone());
        self.set(now, 4, DebateState::Provisional, None, trigger);
        vec![
            Effect::Escalated(DebateEscalation {
                debate_id: self.debate_id.clone(),
                from_level,
                to_level: 4,
                reason: trigger.to_string(),
                expert: None,
                deadline: Some(review_deadline),
                snapshot_id: Some(self.snapshot.snapshot_id.clone()),
            }),
            Effect::Resolved(Box::new(rec)),
        ]
    }
}
