//! Opening a debate from a challenge (level 1, awaiting acknowledgement).

use caucus_shared::messages::{Challenge, MessageContent};
use chrono::{DateTime, Utc};

use super::super::record::{
    ChallengeExtensions, Debate, DebateState, HistoryEntry, Snapshot, DEBATE_SCHEMA_VERSION,
};
use super::super::{validate_debate_id, DebateError, Timeouts};
use super::step::after;

impl Debate {
    /// Opens a debate from a challenge, at level 1 awaiting the challenged
    /// agent's acknowledgement. The debate id is the challenge's
    /// `debate_id`, else its `challenge_id`.
    pub fn open(
        mut challenge: Challenge,
        extensions: ChallengeExtensions,
        snapshot: Snapshot,
        now: DateTime<Utc>,
        t: &Timeouts,
    ) -> Result<Debate, DebateError> {
        challenge
            .validate()
            .map_err(|e| DebateError::InvalidChallenge(e.to_string()))?;
        let debate_id = challenge
            .debate_id
            .clone()
            .unwrap_or_else(|| challenge.challenge_id.clone());
        validate_debate_id(&debate_id)?;
        challenge.debate_id = Some(debate_id.clone());
        challenge.snapshot_id = Some(snapshot.snapshot_id.clone());
        // The challenge's own escalation timer may shorten the evidence
        // window, never lengthen it past the configured one.
        let window = match challenge.escalation_timer {
            0 => t.evidence,
            s => t.evidence.min(std::time::Duration::from_secs(s)),
        };
        let evidence_due = after(now, window);
        let deadline = after(now, t.ack).min(evidence_due);
        Ok(Debate {
            schema_version: DEBATE_SCHEMA_VERSION,
            debate_id,
            challenger_position: challenge.challenger_position.clone(),
            challenged_position: challenge.challenged_position.clone(),
            challenge,
            extensions,
            opened_at: now,
            snapshot,
            level: 1,
            state: DebateState::AwaitingAck,
            deadline: Some(deadline),
            evidence_due,
            evidence: Vec::new(),
            assessment: None,
            expert: None,
            resolution: None,
            superseded: Vec::new(),
            redebate_of: None,
            generation: 0,
            precedents: Vec::new(),
            trace_parent: None,
            trace_state: None,
            history: vec![HistoryEntry {
                at: now,
                level: 1,
                state: DebateState::AwaitingAck,
                event: "opened".into(),
            }],
        })
    }
}
