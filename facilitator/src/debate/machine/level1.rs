//! Level 1: the agents argue directly (acknowledgement, evidence, verdict).

use caucus_shared::messages::{DebateEvidence, DebateVerdict, ResolutionMethod};
use chrono::{DateTime, Utc};

use super::super::record::{Debate, DebateState, EvidenceEntry};
use super::super::resolution::AGENT_DIRECT_CONFIDENCE;
use super::super::{DebateError, Effect, Timeouts};
use super::step::after;
use crate::side::Side;

impl Debate {
    /// The challenged agent acknowledges (idempotent once acknowledged).
    pub fn ack(
        &mut self,
        from: &str,
        snapshot: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<Effect>, DebateError> {
        self.check_snapshot(from, snapshot)?;
        if from != self.challenge.challenged {
            return Err(self.not_allowed(format!(
                "only the challenged agent `{}` acknowledges, not `{from}`",
                self.challenge.challenged
            )));
        }
        match self.state {
            DebateState::AwaitingAck => {
                let due = self.evidence_due;
                self.set(
                    now,
                    1,
                    DebateState::AwaitingEvidence,
                    Some(due),
                    "acknowledged",
                );
                Ok(Vec::new())
            }
            DebateState::AwaitingEvidence | DebateState::AwaitingVerdict => Ok(Vec::new()),
            _ => Err(self.wrong_state("an acknowledgement is only taken at level 1")),
        }
    }

    /// Evidence from either agent. From the challenged agent at level 1 it
    /// moves the debate on to the challenger's verdict (and implies the
    /// acknowledgement); otherwise it is recorded for the resolution.
    pub fn add_evidence(
        &mut self,
        from: &str,
        ev: &DebateEvidence,
        now: DateTime<Utc>,
        t: &Timeouts,
    ) -> Result<Vec<Effect>, DebateError> {
        self.check_snapshot(from, ev.snapshot_id.as_deref())?;
        let side = self
            .side_of(from)
            .ok_or_else(|| self.not_allowed(format!("`{from}` takes no part in this debate")))?;
        if !self.state.is_open() {
            return Err(self.wrong_state("evidence is only taken while the debate is open"));
        }
        if let Some(p) = &ev.position {
            match side {
                Side::Challenger => self.challenger_position = Some(p.clone()),
                Side::Challenged => self.challenged_position = Some(p.clone()),
            }
        }
        self.evidence.push(EvidenceEntry {
            from: from.to_string(),
            side,
            evidence: ev.evidence.clone(),
            position: ev.position.clone(),
            revised: ev.revised,
            limitations: ev.limitations.clone(),
            at: now,
        });
        if side == Side::Challenged
            && matches!(
                self.state,
                DebateState::AwaitingAck | DebateState::AwaitingEvidence
            )
        {
            let due = self.evidence_due.max(after(now, t.verdict_grace));
            self.set(
                now,
                1,
                DebateState::AwaitingVerdict,
                Some(due),
                "evidence_given",
            );
        }
        Ok(Vec::new())
    }

    /// The challenger's verdict. Accepting (at any point of level 1)
    /// resolves the debate to the challenged agent's position; rejecting
    /// the evidence escalates to level 2.
    pub fn verdict(
        &mut self,
        from: &str,
        v: &DebateVerdict,
        now: DateTime<Utc>,
        t: &Timeouts,
    ) -> Result<Vec<Effect>, DebateError> {
        self.check_snapshot(from, v.snapshot_id.as_deref())?;
        if from != self.challenge.challenger {
            return Err(self.not_allowed(format!(
                "only the challenger `{}` gives the verdict, not `{from}`",
                self.challenge.challenger
            )));
        }
        if self.level != 1 || !self.state.is_open() {
            return Err(self.wrong_state("a verdict is only taken at level 1"));
        }
        if v.accepted {
            let position = self
                .challenged_position
                .clone()
                .unwrap_or_else(|| self.finding_as_position());
            let confidence = position.confidence.unwrap_or(AGENT_DIRECT_CONFIDENCE);
            let rationale = format!(
                "the challenger `{}` accepted the evidence of `{}`{}",
                self.challenge.challenger,
                self.challenge.challenged,
                v.reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            );
            let rec = self.binding_record(
                now,
                1,
                ResolutionMethod::AgentDirect,
                "agent-resolved",
                Some(position),
                Some(Side::Challenged),
                confidence,
                rationale,
                None,
            );
            return Ok(vec![self.finish(now, rec, "evidence_accepted")]);
        }
        if self.state != DebateState::AwaitingVerdict {
            return Err(self.wrong_state("there is no evidence to reject yet"));
        }
        Ok(vec![self.enter_mediation(now, t, "evidence_rejected")])
    }
}
