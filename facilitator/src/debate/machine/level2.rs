//! Level 2: the facilitator mediates by credibility, or routes to an expert.

use caucus_shared::messages::ResolutionMethod;
use chrono::{DateTime, Utc};

use super::super::record::{Debate, DebateState};
use super::super::routing::{self, ExpertSlot, Route};
use super::super::{DebateError, Effect, Timeouts};
use super::step::after;
use crate::credibility::L2Assessment;

impl Debate {
    pub(super) fn enter_mediation(
        &mut self,
        now: DateTime<Utc>,
        t: &Timeouts,
        reason: &str,
    ) -> Effect {
        self.escalate(
            now,
            2,
            DebateState::Mediating,
            Some(after(now, t.mediation)),
            reason,
        )
    }

    /// True when level 2 needs an expert slot for this assessment (claim
    /// one before calling [`Debate::mediate`]).
    pub fn needs_expert(&self, a: &L2Assessment) -> bool {
        routing::needs_expert(self.challenge.priority, a.clear)
    }

    /// Level 2: resolves by credibility, routes to the claimed expert, or
    /// handles queue overflow by priority.
    pub fn mediate(
        &mut self,
        now: DateTime<Utc>,
        t: &Timeouts,
        assessment: L2Assessment,
        slot: &ExpertSlot,
    ) -> Result<Vec<Effect>, DebateError> {
        if self.state != DebateState::Mediating {
            return Err(self.wrong_state("mediation happens at level 2"));
        }
        let route = routing::route(self.challenge.priority, assessment.clear, slot);
        self.assessment = Some(assessment.clone());
        match route {
            Route::Credibility { overflow } => {
                let side = assessment.favoured.ok_or_else(|| {
                    self.wrong_state("a clear credibility gap must favour one side")
                })?;
                let position = self
                    .position(side)
                    .cloned()
                    .unwrap_or_else(|| self.side_as_position(side));
                let confidence = assessment.favoured_score().map_or(0.0, |s| s.score);
                let rationale = format!(
                    "{}{}",
                    assessment.reason,
                    if overflow {
                        "; every expert queue was full, so the critical-path debate was auto-resolved by credibility"
                    } else {
                        ""
                    }
                );
                let rec = self.binding_record(
                    now,
                    2,
                    ResolutionMethod::Credibility,
                    "facilitator-resolved",
                    Some(position),
                    Some(side),
                    confidence,
                    rationale,
                    Some(assessment),
                );
                Ok(vec![self.finish(now, rec, "credibility_resolved")])
            }
            Route::Human(expert) => {
                self.expert = Some(expert);
                let deadline = after(now, t.human);
                Ok(vec![self.escalate(
                    now,
                    3,
                    DebateState::AwaitingHuman,
                    Some(deadline),
                    &format!("human_arbitration: {}", assessment.reason),
                )])
            }
            Route::ConservativeDefault => Ok(self.fallback(now, t, "expert_queue_full")),
            Route::DeferToGate => Ok(self.provisional(
                now,
                t,
                "expert_queue_full",
                ResolutionMethod::DeferredToGate,
                "deferred to gate - conservative default",
            )),
        }
    }
}
