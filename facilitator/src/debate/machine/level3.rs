//! Level 3: a person decides.

use caucus_shared::messages::ResolutionMethod;
use chrono::{DateTime, Utc};

use super::super::record::{Debate, DebateState};
use super::super::resolution::HUMAN_CONFIDENCE;
use super::super::{DebateError, Effect, Timeouts};
use super::decisions::HumanDecision;

impl Debate {
    /// Level 3: a person decides (binding), or says they are unavailable
    /// (level 4).
    pub fn decide(
        &mut self,
        now: DateTime<Utc>,
        t: &Timeouts,
        d: &HumanDecision,
    ) -> Result<Vec<Effect>, DebateError> {
        if self.state != DebateState::AwaitingHuman {
            return Err(self.wrong_state("a human decision is only taken at level 3"));
        }
        if d.unavailable {
            return Ok(self.fallback(now, t, "expert_unavailable"));
        }
        let (position, side) = self.chosen(d.side, d.position.as_ref())?;
        let confidence = position.confidence.unwrap_or(HUMAN_CONFIDENCE);
        let rationale = if d.rationale.trim().is_empty() {
            format!("decided by `{}`", d.expert)
        } else {
            d.rationale.clone()
        };
        let mut rec = self.binding_record(
            now,
            3,
            ResolutionMethod::Human,
            "human-resolved",
            Some(position),
            side,
            confidence,
            rationale,
            self.assessment.clone(),
        );
        rec.decided_by = Some(d.expert.clone());
        let mut out = self.release_expert();
        out.push(self.finish(now, rec, "human_decided"));
        Ok(out)
    }

    pub(super) fn release_expert(&mut self) -> Vec<Effect> {
        match self.expert.clone() {
            Some(expert) if self.state == DebateState::AwaitingHuman => {
                vec![Effect::ReleaseExpert { expert }]
            }
            _ => Vec::new(),
        }
    }
}
