//! Moving a debate to a new level and state: deadlines, history, escalations.

use caucus_shared::messages::DebateEscalation;
use chrono::{DateTime, Utc};

use super::super::record::{Debate, DebateState, HistoryEntry};
use super::super::Effect;

pub(super) fn after(now: DateTime<Utc>, d: std::time::Duration) -> DateTime<Utc> {
    now + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX / 2)
}

impl Debate {
    pub(super) fn set(
        &mut self,
        now: DateTime<Utc>,
        level: u8,
        state: DebateState,
        deadline: Option<DateTime<Utc>>,
        event: &str,
    ) {
        self.level = level;
        self.state = state;
        self.deadline = deadline;
        self.history.push(HistoryEntry {
            at: now,
            level,
            state,
            event: event.to_string(),
        });
    }

    pub(super) fn escalate(
        &mut self,
        now: DateTime<Utc>,
        to_level: u8,
        state: DebateState,
        deadline: Option<DateTime<Utc>>,
        reason: &str,
    ) -> Effect {
        let from_level = self.level;
        self.set(now, to_level, state, deadline, reason);
        Effect::Escalated(DebateEscalation {
            debate_id: self.debate_id.clone(),
            from_level,
            to_level,
            reason: reason.to_string(),
            expert: self.expert.clone(),
            deadline,
            snapshot_id: Some(self.snapshot.snapshot_id.clone()),
        })
    }
}
