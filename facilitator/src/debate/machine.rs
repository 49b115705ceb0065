//! The transitions of [`Debate`]. Each checks who may send what in which
//! state, updates the record and returns the effects to carry out.

use caucus_shared::messages::{
    Challenge, DebateEscalation, DebateEvidence, DebateVerdict, MessageContent, Position,
    ResolutionMethod,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::conservative;
use super::record::{
    ChallengeExtensions, Debate, DebateState, EvidenceEntry, HistoryEntry, Snapshot,
    DEBATE_SCHEMA_VERSION,
};
pub use super::resolution::OverrideImpact;
use super::resolution::{
    OverrideStatus, OverrideWindow, ProvisionalDetails, ResolutionRecord, AGENT_DIRECT_CONFIDENCE,
    HUMAN_CONFIDENCE, PROVISIONAL_CONFIDENCE,
};
use super::routing::{self, ExpertSlot, Route};
use super::{validate_debate_id, DebateError, Effect, RedebateRequest, Timeouts};
use crate::credibility::L2Assessment;
use crate::side::Side;

fn after(now: DateTime<Utc>, d: std::time::Duration) -> DateTime<Utc> {
    now + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX / 2)
}

/// A person's level-3 decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HumanDecision {
    /// Who decided.
    pub expert: String,
    /// The side whose position wins (or give `position`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<Side>,
    /// A position of the expert's own (wins over `side`'s position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    /// Why.
    #[serde(default)]
    pub rationale: String,
    /// The expert cannot take the debate: apply the conservative default.
    #[serde(default)]
    pub unavailable: bool,
}

/// A gate's level-5 action on a provisional decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum GateAction {
    /// Accept the conservative default as final.
    Confirm {
        /// Who reviewed.
        reviewer: String,
    },
    /// Apply another position; the rationale is required.
    Override {
        /// Who reviewed.
        reviewer: String,
        /// A side whose position applies (or give `position`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
        /// The position that applies.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        position: Option<Position>,
        /// Why.
        rationale: String,
    },
    /// Close this debate and open a new one with more context.
    Redebate {
        /// Who reviewed.
        reviewer: String,
        /// Context the new debate should consider.
        context: String,
    },
}

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
            .map_err(DebateError::InvalidChallenge)?;
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
            history: vec![HistoryEntry {
                at: now,
                level: 1,
                state: DebateState::AwaitingAck,
                event: "opened".into(),
            }],
        })
    }

    fn set(
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

    fn wrong_state(&self, reason: impl Into<String>) -> DebateError {
        DebateError::WrongState {
            debate_id: self.debate_id.clone(),
            state: self.state.as_str(),
            level: self.level,
            reason: reason.into(),
        }
    }

    fn not_allowed(&self, reason: impl Into<String>) -> DebateError {
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

    fn escalate(
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

    fn enter_mediation(&mut self, now: DateTime<Utc>, t: &Timeouts, reason: &str) -> Effect {
        self.escalate(
            now,
            2,
            DebateState::Mediating,
            Some(after(now, t.mediation)),
            reason,
        )
    }

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

    fn release_expert(&mut self) -> Vec<Effect> {
        match self.expert.clone() {
            Some(expert) if self.state == DebateState::AwaitingHuman => {
                vec![Effect::ReleaseExpert { expert }]
            }
            _ => Vec::new(),
        }
    }

    /// Level 4 from level 3 (time-out, unavailable expert) or from a full
    /// queue on a critical-path debate.
    fn fallback(&mut self, now: DateTime<Utc>, t: &Timeouts, trigger: &str) -> Vec<Effect> {
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

    fn provisional(
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

    #[allow(clippy::too_many_arguments)]
    fn binding_record(
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

    fn finish(&mut self, now: DateTime<Utc>, rec: ResolutionRecord, event: &str) -> Effect {
        let level = rec.level;
        self.expert = None;
        self.resolution = Some(rec.clone());
        self.set(now, level, DebateState::Resolved, None, event);
        Effect::Resolved(Box::new(rec))
    }

    /// The position a decision applies: an explicit one wins; else the side's.
    fn chosen(
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

    fn finding_as_position(&self) -> Position {
        Position {
            statement: self.challenge.disputed_finding.clone(),
            metric: None,
            value: None,
            confidence: None,
            evidence: Vec::new(),
        }
    }

    fn side_as_position(&self, side: Side) -> Position {
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
