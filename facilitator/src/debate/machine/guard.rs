//! Who may send what: snapshot checks and the errors transitions refuse with.

use super::super::record::Debate;
use super::super::DebateError;

impl Debate {
    pub(super) fn wrong_state(&self, reason: impl Into<String>) -> DebateError {
        DebateError::WrongState {
            debate_id: self.debate_id.clone(),
            state: self.state.as_str(),
            level: self.level,
            reason: reason.into(),
        }
    }

    pub(super) fn not_allowed(&self, reason: impl Into<String>) -> DebateError {
        DebateError::NotAllowed {
            debate_id: self.debate_id.clone(),
            reason: reason.into(),
        }
    }

    /// Checks that a message from `from` cites this debate's snapshot.
    pub fn check_snapshot(&self, from: &str, cited: Option<&str>) -> Result<(), DebateError> {
        let expected = &self.snapshot.snapshot_id;
        match cited {
            None => Err(DebateError::SnapshotMissing {
                debate_id: self.debate_id.clone(),
                from: from.to_string(),
                expected: expected.clone(),
            }),
            Some(c) if c != expected => Err(DebateError::SnapshotMismatch {
                debate_id: self.debate_id.clone(),
                from: from.to_string(),
                cited: c.to_string(),
                expected: expected.clone(),
            }),
            Some(_) => Ok(()),
        }
    }
}
