//! Time-outs: firing the current state's deadline.

use chrono::{DateTime, Utc};

use super::super::record::{Debate, DebateState};
use super::super::{Effect, Timeouts};

impl Debate {
    /// Fires the current state's time-out if it is due. Level 2 is not
    /// handled here: the service mediates (see [`Debate::mediate`]).
    pub fn tick(&mut self, now: DateTime<Utc>, t: &Timeouts) -> Vec<Effect> {
        let Some(deadline) = self.deadline else {
            return Vec::new();
        };
        if now < deadline {
            return Vec::new();
        }
        match self.state {
            DebateState::AwaitingAck => vec![self.enter_mediation(now, t, "ack_timeout")],
            DebateState::AwaitingEvidence => vec![self.enter_mediation(now, t, "evidence_timeout")],
            DebateState::AwaitingVerdict => vec![self.enter_mediation(now, t, "verdict_timeout")],
            DebateState::AwaitingHuman => self.fallback(now, t, "human_timeout"),
            DebateState::Mediating | DebateState::Provisional | DebateState::Resolved => Vec::new(),
        }
    }

    /// True when the mediation deadline has passed.
    pub fn mediation_overdue(&self, now: DateTime<Utc>) -> bool {
        self.state == DebateState::Mediating && self.deadline.is_some_and(|d| now >= d)
    }
}
