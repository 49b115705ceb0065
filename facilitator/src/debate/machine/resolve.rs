//! Resolution records and the positions they apply.

use caucus_shared::messages::{Position, ResolutionMethod};
use chrono::{DateTime, Utc};

use super::super::record::{Debate, DebateState};
use super::super::resolution::{OverrideStatus, OverrideWindow, ResolutionRecord};
use super::super::{DebateError, Effect};
use crate::credibility::L2Assessment;
use crate::side::Side;

impl Debate {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn binding_record(
        &self,
        now: DateTime<Utc>,
        level: u8,
        method: ResolutionMethod,
        label: &str,
        position: Option<Position>,
        side: Option<Side>,
        confidence: f64,
        rationale: String,
        credibility: Option<L2Assessment>,
    ) -> ResolutionRecord {
        let impact = match &position {
            Some(p) => format!(
                "`{}` is settled as: {}",
                self.challenge.disputed_finding, p.statement
            ),
            None => format!("`{}` is not settled", self.challenge.disputed_finding),
        };
        ResolutionRecord {
            debate_id: self.debate_id.clone(),
            level,
            method,
            label: label.to_string(),
            binding: true,
            provisional: false,
            winner: side.map(|s| self.agent(s).to_string()),
            winning_side: side,
            final_position: position,
            evidence_considered: self.evidence_considered(),
            rationale,
            confidence: confidence.clamp(0.0, 1.0),
            impact,
            override_window: OverrideWindow {
                status: OverrideStatus::NotApplicable,
                closes_at: None,
            },
            provisional_details: None,
            credibility,
            decided_by: None,
            impact_report: None,
            snapshot_id: self.snapshot.snapshot_id.clone(),
            resolved_at: now,
        }
    }

    pub(super) fn finish(
        &mut self,
        now: DateTime<Utc>,
        rec: ResolutionRecord,
        event: &str,
    ) -> Effect {
        let level = rec.level;
        self.expert = None;
        self.resolution = Some(rec.clone());
        self.set(now, level, DebateState::Resolved, None, event);
        Effect::Resolved(Box::new(rec))
    }

    /// The position a decision applies: an explicit one wins; else the side's.
    pub(super) fn chosen(
        &self,
        side: Option<Side>,
        position: Option<&Position>,
    ) -> Result<(Position, Option<Side>), DebateError> {
        match (position, side) {
            (Some(p), s) => {
                let s = s.or_else(|| {
                    [Side::Challenger, Side::Challenged]
                        .into_iter()
                        .find(|x| self.position(*x) == Some(p))
                });
                Ok((p.clone(), s))
            }
            (None, Some(s)) => Ok((
                self.position(s)
                    .cloned()
                    .unwrap_or_else(|| self.side_as_position(s)),
                Some(s),
            )),
            (None, None) => Err(self.not_allowed("a decision names a `side` or a `position`")),
        }
    }

    pub(super) fn finding_as_position(&self) -> Position {
        Position {
            statement: self.challenge.disputed_finding.clone(),
            metric: None,
            value: None,
            confidence: None,
            evidence: Vec::new(),
        }
    }

    pub(super) fn side_as_position(&self, side: Side) -> Position {
        match side {
            Side::Challenged => self.finding_as_position(),
            Side::Challenger => Position {
                statement: format!(
                    "`{}` does not hold: {}",
                    self.challenge.disputed_finding, self.challenge.challenge_basis
                ),
                metric: None,
                value: None,
                confidence: None,
                evidence: self.challenge.counter_evidence.clone(),
            },
        }
    }
}
