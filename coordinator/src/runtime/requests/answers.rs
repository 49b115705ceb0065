//! [`RequestAnswers`]: sends each finished request workflow's answer, and
//! ends request workflows that can no longer answer in time.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use futures::future::join_all;

use caucus_shared::subjects::Subjects;

use super::answer::{
    answer, confirmation_msg_id, finding_msg_id, has_answered_flag, is_answered, Answer,
};
use super::params::{looks_like_request, request_of, RequestParams};
use crate::engine::Engine;
use crate::runtime::publish::{publish, PublishError};
use crate::runtime::CoordinatorDeps;
use crate::workflow::WorkflowRecord;

/// Answers published per flush, at most (the rest wait for the next one:
/// the scheduler loop waits for these publishes).
pub const MAX_ANSWERS_PER_FLUSH: usize = 256;
/// Largest task output carried in an answer finding (JSON bytes), whatever
/// `max_body_bytes` allows: a bigger one is named, not carried.
pub const MAX_VALUE_BYTES: usize = 256 * 1024;
/// `error_type` of a request task ended because its deadline passed.
pub const DEADLINE_MISSED: &str = "deadline_missed";
/// `error_type` of a request task ended because it failed beyond its
/// retries (its workflow would otherwise wait paused for a person).
pub const REQUEST_FAILED: &str = "request_failed";

/// Sends each request's result (or its failure) back to the requester.
pub struct RequestAnswers {
    js: async_nats::jetstream::Context,
    subjects: Subjects,
    max_value_bytes: usize,
    /// Finished request workflows whose answer is not stored yet (a
    /// publish failed, or more finished than one flush answers).
    pending: HashSet<String>,
}

/// Why a request workflow is ended on a tick.
#[derive(Debug, Clone, PartialEq)]
struct Ending {
    workflow_id: String,
    error_type: &'static str,
    reason: String,
}

/// The request workflow `rec` must be ended now: its deadline passed, or
/// its task failed beyond its retries (a tier 2/3 pause).
fn ending_of(rec: &WorkflowRecord, req: &RequestParams, now: DateTime<Utc>) -> Option<Ending> {
    if rec.state.is_terminal() {
        return None;
    }
    if let Some(d) = req.deadline.filter(|d| *d <= now) {
        return Some(Ending {
            workflow_id: rec.workflow_id.clone(),
            error_type: DEADLINE_MISSED,
            reason: format!("deadline {} missed", d.to_rfc3339()),
        });
    }
    let p = rec.pause.as_ref().filter(|p| p.tier.is_some())?;
    Some(Ending {
        workflow_id: rec.workflow_id.clone(),
        error_type: REQUEST_FAILED,
        reason: rec.failure.clone().unwrap_or_else(|| p.reason.clone()),
    })
}

/// For each item of `due` without a parent named in its request: the
/// item's most recent unfinished workflow that is not a request (one pass
/// over the engine).
fn links(engine: &Engine, due: &[(String, RequestParams)]) -> HashMap<String, String> {
    let mut items: HashMap<&str, Option<&WorkflowRecord>> = HashMap::new();
    for (id, req) in due {
        if req.parent_workflow_id.is_none() {
            if let Some(rec) = engine.get(id) {
                items.insert(rec.item.as_str(), None);
            }
        }
    }
    if items.is_empty() {
        return HashMap::new();
    }
    for rec in engine.workflows() {
        if rec.state.is_terminal() || looks_like_request(rec) {
            continue;
        }
        if let Some(best) = items.get_mut(rec.item.as_str()) {
            if best.is_none_or(|b| b.created_at < rec.created_at) {
                *best = Some(rec);
            }
        }
    }
    items
        .into_iter()
        .filter_map(|(item, rec)| rec.map(|r| (item.to_string(), r.workflow_id.clone())))
        .collect()
}

impl RequestAnswers {
    /// Over the coordinator's deps.
    pub fn new(deps: &CoordinatorDeps) -> Self {
        RequestAnswers {
            js: deps.js.clone(),
            subjects: deps.subjects.clone(),
            max_value_bytes: MAX_VALUE_BYTES.min(deps.config.max_body_bytes / 2),
            pending: HashSet::new(),
        }
    }

    /// After a pump: answers the request workflows among `dirty` (and
    /// those left over from an earlier flush) that finished, marking them
    /// answered (and so dirty) in `engine` once JetStream stored both
    /// messages. A publish that fails is retried on the next flush.
    pub async fn flush(
        &mut self,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) {
        let mut due: Vec<(String, RequestParams)> = Vec::new();
        let candidates: HashSet<&String> = dirty.iter().chain(self.pending.iter()).collect();
        for id in candidates {
            let Some(rec) = engine.get(id) else { continue };
            if !looks_like_request(rec) || !rec.state.is_terminal() || has_answered_flag(rec) {
                continue;
            }
            let Some(req) = request_of(rec) else { continue };
            if !is_answered(rec, &req.request_id) {
                due.push((id.clone(), req));
            }
        }
        self.pending.clear();
        if due.is_empty() {
            return;
        }
        due.sort_by_key(|d| std::cmp::Reverse(d.1.priority.rank()));
        for (id, _) in due.drain(MAX_ANSWERS_PER_FLUSH.min(due.len())..) {
            self.pending.insert(id);
        }
        let links = links(engine, &due);
        let answers: Vec<(String, Answer, RequestParams)> = due
            .into_iter()
            .filter_map(|(id, req)| {
                let rec = engine.get(&id)?;
                let link = req
                    .parent_workflow_id
                    .clone()
                    .or_else(|| links.get(&rec.item).cloned());
                let a = answer(rec, &req, link.as_deref(), self.max_value_bytes, now)?;
                Some((id, a, req))
            })
            .collect();
        let results = join_all(answers.iter().map(|(_, a, req)| self.send(a, req))).await;
        for ((id, a, req), r) in answers.into_iter().zip(results) {
            match r {
                Ok(()) => {
                    if let Some(rec) = engine.get_mut(&id) {
                        rec.add_flag(a.flag);
                        dirty.insert(id.clone());
                    }
                    tracing::info!(workflow_id = %id, request_id = %req.request_id, requester = %req.from_agent, "request answered");
                }
                Err(e) => {
                    tracing::warn!(workflow_id = %id, request_id = %req.request_id, error = %e, "cannot send a request's answer; will retry");
                    self.pending.insert(id);
                }
            }
        }
    }

    /// Publishes the finding (if any), then the confirmation, each acked.
    async fn send(&self, a: &Answer, req: &RequestParams) -> Result<(), PublishError> {
        if let Some(f) = &a.finding {
            publish(
                &self.js,
                self.subjects.findings(&a.item),
                f,
                &finding_msg_id(&req.request_id),
            )
            .await?;
        }
        publish(
            &self.js,
            self.subjects.msg(&req.from_agent),
            &a.confirmation,
            &confirmation_msg_id(&req.request_id),
        )
        .await
    }

    /// On a tick: request workflows past their deadline, or whose task
    /// failed beyond its retries, are ended as failed and answered with
    /// the failure; finished ones not answered yet (e.g. read back from
    /// the store) are answered too.
    pub async fn on_tick(
        &mut self,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) {
        self.pending.extend(sweep(engine, dirty, now));
        if !self.pending.is_empty() {
            self.flush(engine, dirty, now).await;
        }
    }
}

/// Ends the request workflows of `engine` that must end now (marking them
/// dirty) and returns them with the finished ones not answered yet.
fn sweep(engine: &mut Engine, dirty: &mut HashSet<String>, now: DateTime<Utc>) -> Vec<String> {
    let mut unanswered = Vec::new();
    let mut endings = Vec::new();
    for rec in engine.workflows() {
        // Finished and answered: skipped before its params are read.
        if !looks_like_request(rec) || (rec.state.is_terminal() && has_answered_flag(rec)) {
            continue;
        }
        let Some(req) = request_of(rec) else { continue };
        if rec.state.is_terminal() {
            if !is_answered(rec, &req.request_id) {
                unanswered.push(rec.workflow_id.clone());
            }
            continue;
        }
        endings.extend(ending_of(rec, &req, now));
    }
    for e in endings {
        // Out of the engine and back: its in-flight count and ready queue
        // entries follow the record.
        let Some(mut rec) = engine.remove(&e.workflow_id) else {
            continue;
        };
        let ended = rec.end_failed(e.error_type, &e.reason, now);
        engine.insert(rec);
        if ended {
            tracing::info!(workflow_id = %e.workflow_id, reason = %e.reason, "request workflow ended");
            dirty.insert(e.workflow_id.clone());
            unanswered.push(e.workflow_id);
        }
    }
    unanswered
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::pipelines::stages_of;
    use crate::runtime::requests::params::pipeline_for;
    use crate::workflow::{instantiate, PauseSpec, Tier, WorkflowState};
    use caucus_shared::envelope::Priority;
    use caucus_shared::messages::Request;
    use serde_json::json;

    fn req(deadline: Option<&str>) -> RequestParams {
        let mut content = json!({"query": "fair value?", "item": "AAPL"});
        if let Some(d) = deadline {
            content["deadline"] = json!(d);
        }
        let content: Request = serde_json::from_value(content).unwrap();
        RequestParams::new("r-1", "financial_analyst", Priority::Normal, &content, None)
    }

    fn record(id: &str, r: &RequestParams) -> WorkflowRecord {
        let now: DateTime<Utc> = "2026-11-25T20:00:00Z".parse().unwrap();
        let spec = pipeline_for("valuation", r, now, 1_000);
        instantiate(
            id.into(),
            "AAPL".into(),
            spec.name.clone(),
            stages_of(&spec).unwrap(),
            1_000,
            now,
        )
    }

    #[test]
    fn a_passed_deadline_ends_the_workflow() {
        let r = req(Some("2026-11-25T21:00:00Z"));
        let rec = record("w", &r);
        let before: DateTime<Utc> = "2026-11-25T20:59:59Z".parse().unwrap();
        let after: DateTime<Utc> = "2026-11-25T21:00:00Z".parse().unwrap();
        assert_eq!(ending_of(&rec, &r, before), None);
        let e = ending_of(&rec, &r, after).unwrap();
        assert_eq!(e.error_type, DEADLINE_MISSED);
        assert_eq!(e.reason, "deadline 2026-11-25T21:00:00+00:00 missed");
        let mut done = rec.clone();
        done.state = WorkflowState::Completed;
        assert_eq!(ending_of(&done, &r, after), None, "finished in time");
        assert_eq!(ending_of(&rec, &req(None), after), None, "no deadline");
    }

    #[test]
    fn a_failed_task_ends_the_workflow_but_a_person_s_pause_does_not() {
        let r = req(None);
        let now = Utc::now();
        let mut rec = record("w", &r);
        rec.request_pause(PauseSpec::default(), now).unwrap();
        assert_eq!(ending_of(&rec, &r, now), None, "paused by a person");
        let mut rec = record("w", &r);
        rec.failure = Some("task valuation failed after 3 attempt(s): x: y".into());
        rec.request_pause(
            PauseSpec {
                reason: "tier 2".into(),
                tier: Some(Tier::Pause),
                ..PauseSpec::default()
            },
            now,
        )
        .unwrap();
        let e = ending_of(&rec, &r, now).unwrap();
        assert_eq!(e.error_type, REQUEST_FAILED);
        assert!(e.reason.contains("after 3 attempt(s)"));
    }

    #[test]
    fn requests_link_to_the_item_s_latest_unfinished_workflow() {
        let r = req(None);
        let mut engine = Engine::new();
        engine.insert(record("req", &r));
        let stages =
            stages_of(&crate::runtime::pipelines::resolve(&json!("stock-analysis")).unwrap())
                .unwrap();
        let t0: DateTime<Utc> = "2026-11-25T19:00:00Z".parse().unwrap();
        for (id, item, at, done) in [
            ("old", "AAPL", t0, false),
            ("new", "AAPL", t0 + chrono::Duration::minutes(5), false),
            ("finished", "AAPL", t0 + chrono::Duration::minutes(9), true),
            ("other", "MSFT", t0 + chrono::Duration::minutes(9), false),
        ] {
            let mut w = instantiate(
                id.into(),
                item.into(),
                "stock-analysis".into(),
                stages.clone(),
                1_000,
                at,
            );
            if done {
                w.state = WorkflowState::Completed;
            }
            engine.insert(w);
        }
        let due = vec![("req".to_string(), r.clone())];
        let l = links(&engine, &due);
        assert_eq!(l.get("AAPL").map(String::as_str), Some("new"));
        let mut named = r;
        named.parent_workflow_id = Some("old".into());
        assert!(
            links(&engine, &[("req".to_string(), named)]).is_empty(),
            "named in the request"
        );
    }

    #[test]
    fn the_sweep_ends_late_requests_and_frees_their_capacity() {
        let r = req(Some("2026-11-25T21:00:00Z"));
        let mut engine = Engine::new();
        engine.insert(record("late", &r));
        let mut answered = record("answered", &req(None));
        answered.state = WorkflowState::Completed;
        engine.insert(answered);
        let mut unanswered = record("unanswered", &req(None));
        unanswered.state = WorkflowState::Failed;
        engine.insert(unanswered);
        {
            let a = engine.get_mut("answered").unwrap();
            let flag = crate::workflow::WorkflowFlag {
                kind: super::super::ANSWERED_FLAG.into(),
                at: Utc::now(),
                detail: json!({"id": "answer:r-1", "request_id": "r-1", "requester": "x", "outcome": "completed"}),
            };
            a.add_flag(flag);
        }
        let t: DateTime<Utc> = "2026-11-25T20:30:00Z".parse().unwrap();
        let (sent, _) = engine.next_dispatches(t, |_| 5);
        assert_eq!(sent.len(), 1);
        assert_eq!(engine.load(t)["valuation"].in_flight, 1);
        let mut dirty = HashSet::new();
        let mut ids = sweep(&mut engine, &mut dirty, t);
        assert_eq!(ids, vec!["unanswered".to_string()], "not late yet");
        assert!(dirty.is_empty());
        let after: DateTime<Utc> = "2026-11-25T21:00:01Z".parse().unwrap();
        ids = sweep(&mut engine, &mut dirty, after);
        ids.sort();
        assert_eq!(ids, vec!["late".to_string(), "unanswered".to_string()]);
        assert!(dirty.contains("late"));
        let late = engine.get("late").unwrap();
        assert_eq!(late.state, WorkflowState::Failed);
        assert_eq!(
            late.failure.as_deref(),
            Some("deadline 2026-11-25T21:00:00+00:00 missed")
        );
        assert_eq!(
            engine.load(after)["valuation"].in_flight,
            0,
            "capacity freed"
        );
    }
}
