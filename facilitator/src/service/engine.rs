//! The facilitator's work: open debates (after the sync lock), apply debate
//! messages and time-outs through the pure state machine, mediate at level
//! 2, and carry out the effects once the new state is stored.

use async_nats::HeaderMap;
use caucus_shared::clock::SharedClock;
use caucus_shared::envelope::{Envelope, MessageType};
use caucus_shared::messages::{
    Challenge, DebateAck, DebateEvidence, DebateVerdict, MessageContent,
};
use caucus_shared::subjects::Subjects;

use tracing::{Instrument, Span};

use super::error::ServiceError;
use super::experts::ExpertQueues;
use super::spans;
use super::store::{DebateStore, StoreError, TrackStore};
use super::sync::Snapshotter;
use crate::credibility::{assess_pair, score, CredibilityParams, L2Assessment};
use crate::debate::conservative::numeric;
use crate::debate::{
    validate_debate_id, ChallengeExtensions, Debate, DebateError, DebateState, Effect, ExpertSlot,
    GateAction, HumanDecision, OverrideImpact, RedebateRequest, Timeouts,
};
use crate::impact::{self, Analysis, AnalysisKind, AssumptionChange, ImpactParams};
use crate::metrics;
use caucus_shared::api::facilitator::{DecideRequest, ExpertLoadReply, GateReviewRequest};

/// Revision conflicts retried before giving up (another instance keeps
/// writing the same debate).
const CONFLICT_ROUNDS: usize = 8;

/// Everything the facilitator needs; shared by the consumers, the timer
/// and the API.
#[derive(Debug)]
pub struct Facilitator {
    /// Debates.
    pub debates: DebateStore,
    /// Track records.
    pub tracks: TrackStore,
    /// Expert queues.
    pub experts: ExpertQueues,
    /// Sync lock + snapshots.
    pub sync: Snapshotter,
    /// JetStream (publishing events).
    pub js: async_nats::jetstream::Context,
    /// Subject builders.
    pub subjects: Subjects,
    /// Time.
    pub clock: SharedClock,
    /// Escalation time-outs.
    pub timeouts: Timeouts,
    /// Credibility model.
    pub params: CredibilityParams,
    /// Impact model.
    pub impact: ImpactParams,
    /// Regime used when a debate names none (config, then broadcasts).
    pub regime: super::regime::CurrentRegime,
    /// Resolved debates for precedent matching (fed by the bucket watch).
    pub precedents: crate::debate::precedents::PrecedentIndex,
    /// Sender name of the facilitator's messages.
    pub name: String,
    /// Open debates as the bucket shows them (`caucus_debates_open`; fed by
    /// the timer's watch).
    pub open_debates: crate::metrics::OpenDebates,
}

impl Facilitator {
    /// Opens the debate a challenge asks for: sync lock, flush, snapshot,
    /// store, then hand the stamped challenge to both agents. A challenge
    /// for a debate that exists already returns that debate (idempotent).
    pub async fn open(
        &self,
        challenge: Challenge,
        extensions: ChallengeExtensions,
        redebate: Option<(String, u32)>,
    ) -> Result<Debate, ServiceError> {
        challenge
            .validate()
            .map_err(|e| ServiceError::Debate(DebateError::InvalidChallenge(e.to_string())))?;
        let id = challenge
            .debate_id
            .clone()
            .unwrap_or_else(|| challenge.challenge_id.clone());
        validate_debate_id(&id)?;
        if let Some((d, _)) = self.debates.get(&id).await? {
            return Ok(d);
        }
        let span = spans::debate_span(&id, &challenge);
        if let Some((of, _)) = &redebate {
            span.record("caucus.redebate_of", of.as_str());
        }
        self.open_new(id, challenge, extensions, redebate)
            .instrument(span)
            .await
    }

    /// [`Facilitator::open`] once it knows the debate is new, inside its
    /// `debate` span.
    async fn open_new(
        &self,
        id: String,
        challenge: Challenge,
        extensions: ChallengeExtensions,
        redebate: Option<(String, u32)>,
    ) -> Result<Debate, ServiceError> {
        let participants = vec![challenge.challenger.clone(), challenge.challenged.clone()];
        let snapshot = self
            .sync
            .snapshot(&id, &participants, self.clock.now())
            .await?;
        if !snapshot.unresponsive.is_empty() {
            tracing::warn!(debate_id = %id, unresponsive = ?snapshot.unresponsive, "participants did not flush before the snapshot");
        }
        let mut d = Debate::open(
            challenge,
            extensions,
            snapshot,
            self.clock.now(),
            &self.timeouts,
        )?;
        if let Some((of, generation)) = redebate {
            d.redebate_of = Some(of);
            d.generation = generation;
        }
        // Precedents as of the snapshot, from the in-memory index.
        d.precedents = self.precedents.find(&d);
        // Later steps, whenever and wherever they run, join this span.
        spans::store_context(&mut d, &Span::current());
        match self.debates.create(&d).await {
            Ok(_) => {}
            Err(StoreError::Exists(_)) => {
                return self
                    .debates
                    .get(&id)
                    .await?
                    .map(|(d, _)| d)
                    .ok_or(ServiceError::NotFound(id));
            }
            Err(e) => return Err(e.into()),
        }
        tracing::info!(debate_id = %d.debate_id, snapshot_id = %d.snapshot.snapshot_id, priority = d.challenge.priority.as_str(), "debate opened");
        let env = Envelope::with_content(self.name.clone(), &d.challenge)?
            .with_requires_response(true)
            .with_correlation_id(d.debate_id.clone());
        for agent in [&d.challenge.challenged, &d.challenge.challenger] {
            self.publish(
                self.subjects.msg(agent),
                env.clone().to(agent.as_str()),
                format!("{}:challenge:{agent}", d.debate_id),
            )
            .await;
        }
        Ok(d)
    }

    /// Handles one debate envelope (from a consumer or `facilitator.message`).
    pub async fn handle(&self, env: &Envelope) -> Result<Debate, ServiceError> {
        let now = self.clock.now();
        let t = self.timeouts;
        let from = env.from_agent.clone();
        match env.message_type {
            MessageType::Challenge => {
                let c: Challenge = env.content_as()?;
                self.open(c, ChallengeExtensions::from_content(&env.content), None)
                    .await
            }
            MessageType::DebateAck => {
                let a: DebateAck = env.content_as()?;
                self.step(&a.debate_id, |d| d.ack(&from, a.snapshot_id.as_deref(), now))
                    .await
            }
            MessageType::DebateEvidence => {
                let e: DebateEvidence = env.content_as()?;
                self.step(&e.debate_id, |d| d.add_evidence(&from, &e, now, &t))
                    .await
            }
            MessageType::DebateVerdict => {
                let v: DebateVerdict = env.content_as()?;
                self.step(&v.debate_id, |d| d.verdict(&from, &v, now, &t))
                    .await
            }
            other => Err(ServiceError::BadRequest(format!(
                "the facilitator takes challenge, debate_ack, debate_evidence and debate_verdict messages, not `{other}`"
            ))),
        }
    }

    /// Applies `f`, then mediates if the debate entered level 2.
    pub async fn step<F>(&self, id: &str, f: F) -> Result<Debate, ServiceError>
    where
        F: Fn(&mut Debate) -> Result<Vec<Effect>, DebateError>,
    {
        let d = self.transition(id, f).await?;
        if d.state == DebateState::Mediating {
            return self.mediate(id).await;
        }
        Ok(d)
    }

    /// Load → apply → revision-checked write (retried on conflict) → effects.
    pub async fn transition<F>(&self, id: &str, f: F) -> Result<Debate, ServiceError>
    where
        F: Fn(&mut Debate) -> Result<Vec<Effect>, DebateError>,
    {
        // One `debate.step` span for the transition, however many conflict
        // rounds it takes (made on the first load: its parent is stored in
        // the debate).
        let mut span: Option<Span> = None;
        for _ in 0..CONFLICT_ROUNDS {
            let (mut d, rev) = self
                .debates
                .get(id)
                .await?
                .ok_or_else(|| ServiceError::NotFound(id.to_string()))?;
            let span = span.get_or_insert_with(|| spans::step_span(&d)).clone();
            let effects = match f(&mut d) {
                Ok(fx) => fx,
                Err(e) => {
                    span.record("otel.status_code", "error");
                    span.in_scope(
                        || tracing::debug!(debate_id = %id, error = %e, "debate step refused"),
                    );
                    return Err(e.into());
                }
            };
            match self.debates.update(&d, rev).instrument(span.clone()).await {
                Ok(_) => {
                    spans::record_step(&span, &d, &effects);
                    metrics::debate_effects(&effects);
                    self.apply(&d, effects).instrument(span).await;
                    return Ok(d);
                }
                Err(StoreError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(StoreError::Conflict(id.to_string()).into())
    }

    /// Level 2: scores both agents, claims an expert slot when needed and
    /// routes the debate.
    pub async fn mediate(&self, id: &str) -> Result<Debate, ServiceError> {
        let Some((d, _)) = self.debates.get(id).await? else {
            return Err(ServiceError::NotFound(id.to_string()));
        };
        if d.state != DebateState::Mediating {
            return Ok(d);
        }
        let now = self.clock.now();
        let assessment = match self.assess(&d).await {
            Ok(a) => a,
            Err(e) if d.mediation_overdue(now) => L2Assessment::unavailable(format!(
                "credibility unavailable before the mediation deadline: {e}"
            )),
            Err(e) => return Err(e),
        };
        let slot = if d.needs_expert(&assessment) {
            self.experts.claim(id).await?
        } else {
            ExpertSlot::Full
        };
        let t = self.timeouts;
        let result = self
            .transition(id, |d| d.mediate(now, &t, assessment.clone(), &slot))
            .await;
        if let ExpertSlot::Claimed(expert) = &slot {
            let kept = matches!(&result, Ok(d) if d.expert.as_deref() == Some(expert.as_str()));
            if !kept {
                let still_ours = match self.debates.get(id).await {
                    Ok(Some((cur, _))) => cur.expert.as_deref() == Some(expert.as_str()),
                    _ => false,
                };
                if !still_ours {
                    let _ = self.experts.release(expert, id).await;
                }
            }
        }
        match result {
            // Another instance mediated it first.
            Err(ServiceError::Debate(DebateError::WrongState { .. })) => self
                .debates
                .get(id)
                .await?
                .map(|(d, _)| d)
                .ok_or_else(|| ServiceError::NotFound(id.to_string())),
            other => other,
        }
    }

    /// Both agents' credibility in the debate's context.
    pub async fn assess(&self, d: &Debate) -> Result<L2Assessment, ServiceError> {
        let query = d.credibility_query(&self.regime.get().await);
        let now = self.clock.now();
        let a = &d.challenge.challenger;
        let b = &d.challenge.challenged;
        let ra = self.tracks.records(a).await?;
        let rb = self.tracks.records(b).await?;
        let sa = score(a, &ra, &query, now, &self.params)
            .map_err(|e| ServiceError::BadRequest(e.to_string()))?;
        let sb = score(b, &rb, &query, now, &self.params)
            .map_err(|e| ServiceError::BadRequest(e.to_string()))?;
        Ok(assess_pair(sa, sb, &self.params))
    }

    /// Fires whatever is due on `id` (the timer calls this).
    pub async fn fire(&self, id: &str) -> Result<Debate, ServiceError> {
        let now = self.clock.now();
        let t = self.timeouts;
        let Some((d, _)) = self.debates.get(id).await? else {
            return Err(ServiceError::NotFound(id.to_string()));
        };
        if d.state == DebateState::Mediating {
            return self.mediate(id).await;
        }
        if d.deadline.is_none_or(|dl| now < dl) {
            return Ok(d);
        }
        self.step(id, |d| Ok(d.tick(now, &t))).await
    }

    /// `facilitator.decide`.
    pub async fn decide(&self, req: &DecideRequest) -> Result<Debate, ServiceError> {
        let now = self.clock.now();
        let t = self.timeouts;
        let decision = HumanDecision {
            expert: req.expert.clone(),
            side: req.side,
            position: req.position.clone(),
            rationale: req.rationale.clone(),
            unavailable: req.unavailable,
        };
        self.transition(&req.debate_id, |d| d.decide(now, &t, &decision))
            .await
    }

    /// `facilitator.gate_review`: returns the debate and, for an override,
    /// the downstream impact.
    pub async fn gate_review(
        &self,
        req: &GateReviewRequest,
    ) -> Result<(Debate, Option<OverrideImpact>), ServiceError> {
        let now = self.clock.now();
        let (current, _) = self
            .debates
            .get(&req.debate_id)
            .await?
            .ok_or_else(|| ServiceError::NotFound(req.debate_id.clone()))?;
        let impact = match &req.action {
            GateAction::Override { side, position, .. } => {
                self.override_impact(&current, *side, position.as_ref(), &req.analyses)
            }
            _ => None,
        };
        if req.dry_run {
            return dry_run(current, now, &req.action, impact);
        }
        let d = self
            .transition(&req.debate_id, |d| {
                d.gate_review(now, &req.action, impact.as_ref())
            })
            .await?;
        Ok((d, impact))
    }

    /// The impact of overriding `d`'s provisional position: numeric
    /// positions on the same metric give estimates; otherwise every
    /// downstream dependency is flagged for review without an estimate.
    fn override_impact(
        &self,
        d: &Debate,
        side: Option<crate::side::Side>,
        position: Option<&caucus_shared::messages::Position>,
        analyses: &[Analysis],
    ) -> Option<OverrideImpact> {
        let old = d.resolution.as_ref()?.final_position.clone()?;
        let new = position
            .cloned()
            .or_else(|| side.and_then(|s| d.position(s).cloned()))?;
        let metric = new.metric.clone().or_else(|| old.metric.clone())?;
        let change = AssumptionChange {
            metric,
            old_value: numeric(old.value.as_ref()).unwrap_or(f64::NAN),
            new_value: numeric(new.value.as_ref()).unwrap_or(f64::NAN),
        };
        let deps = &d
            .resolution
            .as_ref()?
            .provisional_details
            .as_ref()?
            .downstream_dependencies;
        let flagged: Vec<Analysis>;
        let analyses = if analyses.is_empty() {
            flagged = deps
                .iter()
                .map(|id| Analysis {
                    analysis_id: id.clone(),
                    kind: AnalysisKind::Other,
                    output_metric: "unknown".into(),
                    current_result: None,
                    rerun_minutes: 0.0,
                    inputs: Vec::new(),
                    depends_on: Vec::new(),
                })
                .collect();
            &flagged[..]
        } else {
            analyses
        };
        let report = if change.old_value.is_finite() && change.new_value.is_finite() {
            impact::calculate(&change, analyses, &self.impact)
        } else {
            impact::flag_only(&change.metric, analyses)
        };
        let plan = impact::plan_reruns(&report, analyses);
        Some(OverrideImpact { report, plan })
    }

    /// Carries out effects after a successful write. Failures are logged:
    /// the stored state is the truth, and events are re-derivable from it.
    async fn apply(&self, d: &Debate, effects: Vec<Effect>) {
        let step = d.history.len();
        for e in effects {
            match e {
                Effect::Escalated(esc) => {
                    tracing::info!(debate_id = %d.debate_id, from = esc.from_level, to = esc.to_level, reason = %esc.reason, outcome = metrics::escalation_outcome(&esc.reason), expert = esc.expert.as_deref(), "debate escalated");
                    if let Ok(env) = Envelope::with_content(self.name.clone(), &esc) {
                        self.publish(
                            self.subjects.debates(&d.debate_id, "escalation"),
                            env,
                            format!(
                                "{}:escalation:{}-{}:{step}",
                                d.debate_id, esc.from_level, esc.to_level
                            ),
                        )
                        .await;
                    }
                }
                Effect::Resolved(rec) => {
                    tracing::info!(debate_id = %d.debate_id, level = rec.level, method = ?rec.method, label = %rec.label, outcome = metrics::resolution_outcome(rec.method), binding = rec.binding, provisional = rec.provisional, "debate resolved");
                    match Envelope::with_content(self.name.clone(), &rec.to_wire()) {
                        Ok(env) => {
                            let id = format!(
                                "{}:resolution:{}:{:?}",
                                d.debate_id, rec.level, rec.method
                            );
                            self.publish(
                                self.subjects.debates(&d.debate_id, "resolution"),
                                env.clone(),
                                id.clone(),
                            )
                            .await;
                            for agent in [&d.challenge.challenger, &d.challenge.challenged] {
                                self.publish(
                                    self.subjects.msg(agent),
                                    env.clone().to(agent.as_str()),
                                    format!("{id}:{agent}"),
                                )
                                .await;
                            }
                        }
                        Err(e) => {
                            tracing::error!(debate_id = %d.debate_id, error = %e, "resolution does not validate")
                        }
                    }
                    // Who was right feeds the track records (agreed or
                    // decided by a person; see debate::outcomes), after
                    // the resolution went out.
                    let regime = self.regime.get().await;
                    for t in crate::debate::outcomes::track_records(d, &rec, &regime) {
                        let agent = t.agent.clone();
                        if let Err(e) = self.tracks.append(&agent, &[t]).await {
                            tracing::warn!(debate_id = %d.debate_id, agent, error = %e, "debate outcome not added to the track record");
                        }
                    }
                }
                Effect::ReleaseExpert { expert } => {
                    if let Err(e) = self.experts.release(&expert, &d.debate_id).await {
                        tracing::warn!(debate_id = %d.debate_id, expert, error = %e, "cannot free the expert slot; it lapses after its TTL");
                    }
                }
                Effect::Redebate(req) => {
                    let RedebateRequest {
                        challenge,
                        extensions,
                        redebate_of,
                        generation,
                    } = *req;
                    let id = challenge.debate_id.clone().unwrap_or_default();
                    if let Err(e) =
                        Box::pin(self.open(challenge, extensions, Some((redebate_of, generation))))
                            .await
                    {
                        tracing::error!(debate_id = %id, error = %e, "cannot open the re-debate");
                    }
                }
            }
        }
    }

    async fn publish(&self, subject: String, env: Envelope, msg_id: String) {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", msg_id.as_str());
        // Inside the debate's span: agents answering join its trace.
        caucus_shared::nats::trace::inject(&mut headers);
        let res = match self
            .js
            .publish_with_headers(subject.clone(), headers, env.to_bytes())
            .await
        {
            Ok(ack) => ack.await.map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = res {
            tracing::warn!(subject, error = %e, "publish failed");
        }
    }

    /// Provisional decisions, oldest first, optionally for one workflow/item.
    pub async fn provisional(
        &self,
        workflow_id: Option<&str>,
        item: Option<&str>,
    ) -> Result<Vec<Debate>, ServiceError> {
        let mut out: Vec<Debate> = self
            .debates
            .list()
            .await?
            .into_iter()
            .filter(|d| d.state == DebateState::Provisional)
            .filter(|d| workflow_id.is_none_or(|w| d.challenge.workflow_id.as_deref() == Some(w)))
            .filter(|d| item.is_none_or(|i| d.challenge.item.as_deref() == Some(i)))
            .collect();
        out.sort_by_key(|d| d.opened_at);
        Ok(out)
    }

    /// Expert → `"n/max"`.
    pub async fn expert_load(&self) -> Result<ExpertLoadReply, ServiceError> {
        let max = self.experts.max();
        Ok(self
            .experts
            .load()
            .await?
            .into_iter()
            .map(|(e, m)| (e, format!("{}/{max}", m.len())))
            .collect())
    }
}

/// A dry run of a gate review: the override is checked by the same state
/// machine on a copy of the debate (so a dry run fails exactly where the
/// commit would), and the stored debate is returned unchanged with the
/// impact the commit would record. Nothing is written or published.
fn dry_run(
    current: Debate,
    now: chrono::DateTime<chrono::Utc>,
    action: &GateAction,
    impact: Option<OverrideImpact>,
) -> Result<(Debate, Option<OverrideImpact>), ServiceError> {
    if !matches!(action, GateAction::Override { .. }) {
        return Err(ServiceError::BadRequest(
            "dry_run is only for an override (it reports the downstream impact before committing)"
                .into(),
        ));
    }
    current.clone().gate_review(now, action, impact.as_ref())?;
    Ok((current, impact))
}
