//! The six patterns, written against [`AgentCaller`] so the same code runs
//! over NATS workers and over an in-memory caller in unit tests.
//!
//! Every call of a round runs concurrently; a failed (or panicking) call
//! becomes a failed [`AgentResult`] and never cancels the others. Each
//! round runs inside a `pattern_round` span (each call in a `pattern_call`
//! span), and its record goes to the sink as soon as the round ends.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::future::join_all;
use futures::FutureExt;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc::UnboundedSender;
use tracing::Instrument;

use caucus_shared::clock::SharedClock;

use super::consensus::{self, ConsensusScore, CONSENSUS_INSTRUCTION};
use super::result::{truncate_chars, AgentResult, PatternTask, RoundRecord};
use super::spec::{Pattern, PatternSpec};

/// Runs one agent call. Implementations turn every failure (error, time-out,
/// crash) into a failed [`AgentResult`].
pub trait AgentCaller: Send + Sync {
    /// Asks one agent of type `agent_type` to do `task`.
    fn call(&self, agent_type: &str, task: PatternTask)
        -> impl Future<Output = AgentResult> + Send;
}

pub use caucus_shared::api::coordinator::patterns::StopReason;

/// A finished run.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Every round in order.
    pub rounds: Vec<RoundRecord>,
    /// Consensus: whether the last round reached the threshold.
    pub consensus_reached: Option<bool>,
    /// Set when the run ended early.
    pub stopped: Option<StopReason>,
}

impl Outcome {
    /// All results in the seed's order (round by round, agent order within).
    pub fn results(&self) -> Vec<&AgentResult> {
        self.rounds.iter().flat_map(|r| r.results.iter()).collect()
    }
}

/// Runs `spec` over `caller`. Each finished round is also sent to `sink`
/// (for recording while the run goes on).
pub async fn run<C: AgentCaller>(
    caller: &C,
    spec: &PatternSpec,
    clock: SharedClock,
    sink: Option<UnboundedSender<RoundRecord>>,
) -> Outcome {
    let mut r = Runner {
        caller,
        spec,
        labels: spec.labels(),
        clock,
        sink,
        rounds: Vec::new(),
    };
    let (consensus_reached, stopped) = match spec.pattern.clone() {
        Pattern::Parallel => {
            r.parallel().await;
            (None, None)
        }
        Pattern::Pipeline {
            pass_context,
            stop_on_failure,
        } => (None, r.pipeline(pass_context, stop_on_failure).await),
        Pattern::Debate { rounds } => {
            r.debate(rounds).await;
            (None, None)
        }
        Pattern::Hierarchical { leader } => {
            r.hierarchical(leader).await;
            (None, None)
        }
        Pattern::Consensus {
            max_rounds,
            agreement_threshold,
        } => {
            let (reached, stopped) = r.consensus(max_rounds, agreement_threshold).await;
            (Some(reached), stopped)
        }
        Pattern::PeerReview => {
            r.peer_review().await;
            (None, None)
        }
    };
    Outcome {
        rounds: r.rounds,
        consensus_reached,
        stopped,
    }
}

/// A call to make, or a result decided without calling (nothing to review).
enum Planned {
    Call(PatternTask),
    Skip(AgentResult),
}

struct Runner<'a, C> {
    caller: &'a C,
    spec: &'a PatternSpec,
    labels: Vec<String>,
    clock: SharedClock,
    sink: Option<UnboundedSender<RoundRecord>>,
    rounds: Vec<RoundRecord>,
}

impl<C: AgentCaller> Runner<'_, C> {
    fn name(&self) -> &'static str {
        self.spec.pattern.kind().as_str()
    }

    fn task(
        &self,
        round: u32,
        phase: &str,
        index: usize,
        description: String,
        context: Map<String, Value>,
    ) -> PatternTask {
        PatternTask {
            pattern: self.name().to_string(),
            round,
            phase: phase.to_string(),
            index,
            label: self.labels[index].clone(),
            description,
            context,
        }
    }

    fn skip(&self, round: u32, phase: &str, index: usize, why: String) -> Planned {
        let t = self.task(round, phase, index, String::new(), Map::new());
        Planned::Skip(AgentResult::failed(
            &self.spec.agents[index],
            &t,
            "skipped",
            why,
        ))
    }

    fn ctx(&self, text: &str) -> Value {
        Value::String(truncate_chars(text, self.spec.context_truncation).0)
    }

    fn out(&self, text: &str) -> Value {
        Value::String(truncate_chars(text, self.spec.output_truncation).0)
    }

    /// Runs a round's calls concurrently; results in the order planned,
    /// full length (the record is cut later).
    async fn exec(&self, round: u32, phase: &str, planned: Vec<Planned>) -> Vec<AgentResult> {
        let span = tracing::info_span!(
            "pattern_round",
            pattern = self.name(),
            round,
            phase,
            calls = planned.len()
        );
        let calls = planned.into_iter().map(|p| async move {
            match p {
                Planned::Skip(r) => r,
                Planned::Call(task) => self.call(task).await,
            }
        });
        join_all(calls).instrument(span).await
    }

    async fn call(&self, task: PatternTask) -> AgentResult {
        let agent = self.spec.agents[task.index].clone();
        let span = tracing::info_span!(
            "pattern_call",
            agent = %agent,
            label = %task.label,
            round = task.round,
            phase = %task.phase
        );
        let t0 = self.clock.now_ms();
        let fut = AssertUnwindSafe(self.caller.call(&agent, task.clone())).catch_unwind();
        let mut r = match fut.instrument(span).await {
            Ok(r) => r,
            Err(_) => AgentResult::failed(&agent, &task, "panic", "the agent call panicked"),
        };
        // The runner owns identity and timing; a caller cannot misfile a result.
        r.agent = agent;
        r.label = task.label;
        r.index = task.index;
        r.round = task.round;
        r.phase = task.phase;
        r.duration_ms = (self.clock.now_ms() - t0).max(0) as u64;
        if !r.success {
            r.output = None;
        }
        r
    }

    /// Stores a round (outputs cut to the output limit) and sends it on.
    fn record(
        &mut self,
        round: u32,
        phase: &str,
        started_at: chrono::DateTime<chrono::Utc>,
        results: &[AgentResult],
        consensus: Option<ConsensusScore>,
    ) {
        let limit = self.spec.output_truncation;
        let results = results
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if let Some(o) = &r.output {
                    let (cut, truncated) = truncate_chars(o, limit);
                    r.output = Some(cut);
                    r.truncated = truncated;
                }
                r
            })
            .collect();
        let rec = RoundRecord {
            round,
            phase: phase.to_string(),
            results,
            consensus,
            started_at,
            finished_at: self.clock.now(),
        };
        if let Some(s) = &self.sink {
            let _ = s.send(rec.clone());
        }
        self.rounds.push(rec);
    }

    async fn round(&mut self, round: u32, phase: &str, planned: Vec<Planned>) -> Vec<AgentResult> {
        let started = self.clock.now();
        let results = self.exec(round, phase, planned).await;
        self.record(round, phase, started, &results, None);
        results
    }

    fn all(&self) -> std::ops::Range<usize> {
        0..self.spec.agents.len()
    }

    async fn parallel(&mut self) {
        let planned = self
            .all()
            .map(|i| Planned::Call(self.task(1, "work", i, self.spec.task.clone(), Map::new())))
            .collect();
        self.round(1, "work", planned).await;
    }

    async fn pipeline(&mut self, pass_context: bool, stop_on_failure: bool) -> Option<StopReason> {
        let n = self.spec.agents.len();
        let mut acc = Map::new();
        for i in 0..n {
            let step = i as u32 + 1;
            let mut ctx = if pass_context {
                acc.clone()
            } else {
                Map::new()
            };
            ctx.insert("pipeline_step".into(), json!(step));
            ctx.insert("pipeline_length".into(), json!(n));
            let t = self.task(step, "work", i, self.spec.task.clone(), ctx);
            let r = self.round(step, "work", vec![Planned::Call(t)]).await;
            match r[0].text() {
                Some(text) if pass_context => {
                    let key = format!("{}_output", self.labels[i]);
                    acc.insert(key, self.out(text));
                }
                Some(_) => {}
                None if stop_on_failure => return Some(StopReason::StopOnFailure),
                None => {}
            }
        }
        None
    }

    fn previous(
        &self,
        latest: &Map<String, Value>,
        round: u32,
        key: &str,
        total: u32,
    ) -> Map<String, Value> {
        let mut ctx = Map::new();
        ctx.insert(format!("{key}_round"), json!(round));
        ctx.insert(
            if key == "debate" {
                "total_rounds"
            } else {
                "max_rounds"
            }
            .into(),
            json!(total),
        );
        if round > 1 {
            ctx.insert("previous_responses".into(), Value::Object(latest.clone()));
        }
        ctx
    }

    /// Keeps each agent's latest successful response (cut to the context
    /// limit) for the next round.
    fn remember(&self, latest: &mut Map<String, Value>, results: &[AgentResult]) {
        for r in results {
            if let Some(t) = r.text() {
                latest.insert(self.labels[r.index].clone(), self.ctx(t));
            }
        }
    }

    async fn debate(&mut self, rounds: u32) {
        let mut latest = Map::new();
        for round in 1..=rounds {
            let planned = self
                .all()
                .map(|i| {
                    let d = format!("Round {round}/{rounds}: {}", self.spec.task);
                    let ctx = self.previous(&latest, round, "debate", rounds);
                    Planned::Call(self.task(round, "debate", i, d, ctx))
                })
                .collect();
            let results = self.round(round, "debate", planned).await;
            self.remember(&mut latest, &results);
        }
    }

    async fn consensus(&mut self, max_rounds: u32, threshold: f64) -> (bool, Option<StopReason>) {
        let mut latest = Map::new();
        let mut reached = false;
        for round in 1..=max_rounds {
            let planned = self
                .all()
                .map(|i| {
                    let d = format!("{}\n\n{CONSENSUS_INSTRUCTION}", self.spec.task);
                    let ctx = self.previous(&latest, round, "consensus", max_rounds);
                    Planned::Call(self.task(round, "consensus", i, d, ctx))
                })
                .collect();
            let started = self.clock.now();
            let mut results = self.exec(round, "consensus", planned).await;
            for r in &mut results {
                r.stance = r.text().and_then(consensus::stance);
            }
            let texts: Vec<Option<&str>> = results.iter().map(AgentResult::text).collect();
            let score = consensus::score(&texts, threshold);
            reached = score.reached;
            tracing::info!(
                round,
                explicit = score.explicit,
                similarity = score.similarity,
                combined = score.combined,
                reached,
                "consensus check"
            );
            self.record(round, "consensus", started, &results, Some(score));
            self.remember(&mut latest, &results);
            if reached {
                let early = round < max_rounds;
                return (true, early.then_some(StopReason::ConsensusReached));
            }
        }
        (reached, None)
    }

    async fn hierarchical(&mut self, leader: usize) {
        let workers: Vec<usize> = self.all().filter(|i| *i != leader).collect();
        let names: Vec<&str> = workers.iter().map(|i| self.labels[*i].as_str()).collect();
        let plan_prompt = format!(
            "As team leader, analyze this task and create a plan for your {} worker(s) ({}). Task: {}",
            workers.len(),
            names.join(", "),
            self.spec.task
        );
        let mut ctx = Map::new();
        ctx.insert("role".into(), json!("leader"));
        ctx.insert("phase".into(), json!("planning"));
        ctx.insert("worker_count".into(), json!(workers.len()));
        ctx.insert("workers".into(), json!(names));
        let t = self.task(1, "plan", leader, plan_prompt, ctx);
        let plan = self.round(1, "plan", vec![Planned::Call(t)]).await;
        let plan_text = plan[0].text().map(|t| self.out(t));

        let planned = workers
            .iter()
            .map(|&i| {
                let mut ctx = Map::new();
                ctx.insert("role".into(), json!("worker"));
                ctx.insert("phase".into(), json!("execution"));
                ctx.insert("leader".into(), json!(self.labels[leader]));
                match &plan_text {
                    Some(p) => ctx.insert("plan".into(), p.clone()),
                    None => ctx.insert(
                        "plan_error".into(),
                        json!("the leader's plan failed; work from the task alone"),
                    ),
                };
                Planned::Call(self.task(2, "work", i, self.spec.task.clone(), ctx))
            })
            .collect();
        let work = self.round(2, "work", planned).await;

        let mut outputs = Map::new();
        let mut failed = Vec::new();
        for r in &work {
            match r.text() {
                Some(t) => {
                    outputs.insert(self.labels[r.index].clone(), self.out(t));
                }
                None => failed.push(self.labels[r.index].clone()),
            }
        }
        let mut ctx = Map::new();
        ctx.insert("role".into(), json!("leader"));
        ctx.insert("phase".into(), json!("synthesis"));
        if let Some(p) = plan_text {
            ctx.insert("plan".into(), p);
        }
        ctx.insert("worker_outputs".into(), Value::Object(outputs));
        ctx.insert("failed_workers".into(), json!(failed));
        let d = format!(
            "Synthesize worker outputs into a final cohesive result. Task: {}",
            self.spec.task
        );
        let t = self.task(3, "synthesize", leader, d, ctx);
        self.round(3, "synthesize", vec![Planned::Call(t)]).await;
    }

    async fn peer_review(&mut self) {
        let n = self.spec.agents.len();
        let planned = self
            .all()
            .map(|i| {
                let mut ctx = Map::new();
                ctx.insert("phase".into(), json!("initial_work"));
                Planned::Call(self.task(1, "work", i, self.spec.task.clone(), ctx))
            })
            .collect();
        let work = self.round(1, "work", planned).await;

        let planned = self
            .all()
            .map(|i| {
                let j = (i + 1) % n;
                let Some(text) = work[j].text() else {
                    return self.skip(
                        2,
                        "review",
                        i,
                        format!("nothing to review: {}'s work failed", self.labels[j]),
                    );
                };
                let mut ctx = Map::new();
                ctx.insert("phase".into(), json!("peer_review"));
                ctx.insert("reviewing".into(), json!(self.labels[j]));
                ctx.insert("work".into(), self.ctx(text));
                let d = format!(
                    "Review the work of {} on this task and give specific feedback. Task: {}",
                    self.labels[j], self.spec.task
                );
                Planned::Call(self.task(2, "review", i, d, ctx))
            })
            .collect();
        let reviews = self.round(2, "review", planned).await;

        let planned = self
            .all()
            .map(|i| {
                let Some(own) = work[i].text() else {
                    return self.skip(
                        3,
                        "revise",
                        i,
                        "nothing to revise: the initial work failed".into(),
                    );
                };
                let k = (i + n - 1) % n;
                let mut ctx = Map::new();
                ctx.insert("phase".into(), json!("revision"));
                ctx.insert("feedback_from".into(), json!(self.labels[k]));
                ctx.insert("original_work".into(), self.out(own));
                match reviews[k].text() {
                    Some(f) => ctx.insert("feedback".into(), self.ctx(f)),
                    None => ctx.insert(
                        "feedback_error".into(),
                        json!(format!("{}'s review failed", self.labels[k])),
                    ),
                };
                let d = format!(
                    "Revise your work on this task using the feedback. Task: {}",
                    self.spec.task
                );
                Planned::Call(self.task(3, "revise", i, d, ctx))
            })
            .collect();
        self.round(3, "revise", planned).await;
    }
}
