//! Pause, resume and batch operations inside the scheduler task (the only
//! writer of workflow records), for the API and the control stream alike.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::json;

use caucus_shared::messages::BatchTrigger;
use caucus_shared::nats::ApiError;
use caucus_shared::task::TaskEvent;

use super::batch::{
    BatchLoadError, BatchManager, BatchPauseArgs, BatchResumeArgs, PartPause, PartResume,
};
use super::pause::PauseManager;
use super::publish::alert;
use super::views::{pause_view, state_view};
use crate::engine::Engine;
use crate::workflow::{EventOutcome, PauseOutcome, PauseSpec, ResumeError, WorkflowRecord};

use caucus_shared::api::coordinator::control::{
    BatchStatusReply, PauseOutcome as OutcomeView, PauseReply, ResumeReply,
};

// The request bodies and error codes are the API's (shared::api).
pub use caucus_shared::api::coordinator::control::{
    BatchStatusRequest as BatchStatusArgs, PauseRequest as PauseArgs, ResumeRequest as ResumeArgs,
    CODE_ILLEGAL_TRANSITION, CODE_INVALID_PLAN,
};

/// One control operation.
#[derive(Debug, Clone)]
pub enum ControlOp {
    /// Pause one workflow.
    Pause(PauseArgs),
    /// Resume one workflow (or dry-run its plan).
    Resume(ResumeArgs),
    /// Pause many.
    BatchPause(BatchPauseArgs),
    /// Resume many.
    BatchResume(BatchResumeArgs),
    /// A batch's counts.
    BatchStatus(BatchStatusArgs),
    /// A correlator's trigger.
    BatchTrigger(BatchTrigger),
    /// This partition's share of a batch pause or trigger (several
    /// partitions; the router resolved the workflows).
    PartPause(PartPause),
    /// This partition's share of a resume of items (several partitions).
    PartResume(PartResume),
}

/// The scheduler's answer to a [`ControlOp`].
#[derive(Debug, Clone)]
pub enum ControlReply {
    /// To a pause.
    Pause(PauseReply),
    /// To a resume.
    Resume(ResumeReply),
    /// To a batch operation (or a correlator's trigger): the batch.
    Batch(BatchStatusReply),
}

impl ControlReply {
    /// The reply to a pause, if it is one.
    pub fn into_pause(self) -> Option<PauseReply> {
        match self {
            ControlReply::Pause(p) => Some(p),
            _ => None,
        }
    }

    /// The reply to a resume, if it is one.
    pub fn into_resume(self) -> Option<ResumeReply> {
        match self {
            ControlReply::Resume(r) => Some(r),
            _ => None,
        }
    }

    /// The reply to a batch operation, if it is one.
    pub fn into_batch(self) -> Option<BatchStatusReply> {
        match self {
            ControlReply::Batch(b) => Some(b),
            _ => None,
        }
    }
}

/// Pause and batch state of the leader.
pub struct Control {
    /// Checkpoints, notifications, reminders, failure events.
    pub pauses: PauseManager,
    /// Batches.
    pub batches: BatchManager,
}

/// "The latest workflow of an item" among those `engine` holds: the last
/// created, and of those created at once the highest id (a pause or
/// resume by item acts on it; with several partitions each names its own
/// and the newest of those is picked the same way).
pub fn latest_of_item<'a>(engine: &'a Engine, item: &str) -> Option<&'a WorkflowRecord> {
    engine
        .workflows()
        .filter(|r| r.item == item)
        .max_by(|a, b| (a.created_at, &a.workflow_id).cmp(&(b.created_at, &b.workflow_id)))
}

fn target<'a>(
    engine: &'a Engine,
    workflow_id: &Option<String>,
    item: &Option<String>,
) -> Result<&'a WorkflowRecord, ApiError> {
    match (workflow_id, item) {
        (Some(id), _) => engine.get(id).ok_or_else(|| {
            ApiError::not_found(format!("no workflow `{id}` held by the coordinator"))
        }),
        (None, Some(item)) => latest_of_item(engine, item)
            .ok_or_else(|| ApiError::not_found(format!("no workflow for item `{item}`"))),
        (None, None) => Err(ApiError::bad_request("name a `workflow_id` or an `item`")),
    }
}

fn illegal(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(CODE_ILLEGAL_TRANSITION, e.to_string())
}

impl Control {
    /// Loads batches and the paused set (leadership start).
    pub async fn load(&mut self, engine: &Engine) -> Result<(), BatchLoadError> {
        self.pauses.load(engine);
        let n = self.batches.load().await?;
        tracing::info!(batches = n, "loaded batches");
        Ok(())
    }

    /// After a task event was applied (`headers`: the event message's).
    pub fn on_outcome(
        &mut self,
        ev: &TaskEvent,
        outcome: &EventOutcome,
        engine: &Engine,
        headers: Option<&async_nats::HeaderMap>,
    ) {
        self.pauses.on_outcome(ev, outcome, engine, headers);
    }

    /// Runs one operation; changed workflows are added to `dirty`.
    pub fn handle(
        &mut self,
        op: ControlOp,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        capacity: &HashMap<String, usize>,
        now: DateTime<Utc>,
    ) -> Result<ControlReply, ApiError> {
        match op {
            ControlOp::Pause(a) => self.pause(a, engine, dirty, now).map(ControlReply::Pause),
            ControlOp::Resume(a) => self.resume(a, engine, dirty, now).map(ControlReply::Resume),
            ControlOp::BatchPause(a) => self
                .batches
                .pause(a, engine, dirty, now)
                .map(ControlReply::Batch),
            ControlOp::BatchTrigger(t) => self
                .batches
                .trigger(t, engine, dirty, now)
                .map(ControlReply::Batch),
            ControlOp::BatchResume(a) => {
                let id = self.batches.resume(a, engine, now)?;
                // A part of a batch spanning partitions resumes at the
                // next tick, once it took running slots from Redis.
                if !self.batches.is_spread() {
                    self.drive(engine, capacity, dirty, now);
                }
                self.batches.status(&id).map(ControlReply::Batch)
            }
            ControlOp::PartPause(p) => self
                .batches
                .pause_part(p, engine, dirty, now)
                .map(ControlReply::Batch),
            ControlOp::PartResume(p) => self
                .batches
                .resume_part(p, engine, now)
                .map(ControlReply::Batch),
            ControlOp::BatchStatus(a) => self.batches.status(&a.batch_id).map(ControlReply::Batch),
        }
    }

    fn pause(
        &mut self,
        a: PauseArgs,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) -> Result<PauseReply, ApiError> {
        let id = target(engine, &a.workflow_id, &a.item)?.workflow_id.clone();
        let spec = PauseSpec {
            reason: a.reason.unwrap_or_else(|| "paused by request".into()),
            trigger_source: a.trigger_source.unwrap_or_else(|| "api".into()),
            cancel_in_flight: a.cancel_in_flight,
            ..PauseSpec::default()
        };
        let outcome = engine
            .pause(&id, spec, now)
            .expect("target is held")
            .map_err(illegal)?;
        dirty.insert(id.clone());
        let rec = engine.get(&id).expect("held");
        Ok(PauseReply {
            item: rec.item.clone(),
            state: state_view(rec.state),
            outcome: match outcome {
                PauseOutcome::Pausing => OutcomeView::Pausing,
                PauseOutcome::Paused => OutcomeView::Paused,
                PauseOutcome::AlreadyPaused => OutcomeView::AlreadyPaused,
            },
            in_flight: rec.in_flight(),
            pause: rec.pause.as_ref().map(pause_view),
            workflow_id: id,
        })
    }

    fn resume(
        &mut self,
        a: ResumeArgs,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) -> Result<ResumeReply, ApiError> {
        let rec = target(engine, &a.workflow_id, &a.item)?;
        rec.check_resume().map_err(illegal)?;
        let id = rec.workflow_id.clone();
        let item = rec.item.clone();
        let pause = rec.pause.clone();
        let plan = match a.plan {
            Some(p) => p,
            None => rec.resume_plan(a.in_flight, now),
        };
        let checkpoint_id = pause.as_ref().and_then(|p| p.checkpoint_id.clone());
        if a.dry_run {
            return Ok(ResumeReply {
                workflow_id: id,
                item,
                dry_run: true,
                state: state_view(rec.state),
                checkpoint_id,
                plan,
                renewed: None,
            });
        }
        let renewed = engine
            .resume(&id, &plan, now)
            .expect("target is held")
            .map_err(|e| match e {
                ResumeError::Illegal(e) => illegal(e),
                ResumeError::InvalidPlan(m) => ApiError::new(CODE_INVALID_PLAN, m),
            })?;
        dirty.insert(id.clone());
        self.pauses.forget(&id);
        if a.notify {
            let card = alert(
                "workflow_resumed",
                "info",
                json!({"workflow_id": id, "item": item, "plan": plan}),
            );
            let seq = pause.as_ref().map(|p| p.seq).unwrap_or(0);
            self.pauses
                .queue_alert("info", card, format!("alert:resumed:{id}.{seq}"));
        }
        let rec = engine.get(&id).expect("held");
        Ok(ResumeReply {
            workflow_id: id,
            item,
            dry_run: false,
            state: state_view(rec.state),
            checkpoint_id,
            plan,
            renewed: Some(renewed),
        })
    }

    fn drive(
        &mut self,
        engine: &mut Engine,
        capacity: &HashMap<String, usize>,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) {
        for id in self.batches.drive(engine, capacity, dirty, now) {
            self.pauses.forget(&id);
        }
    }

    /// Publishes, stores checkpoints and batches (every pump).
    pub async fn flush(
        &mut self,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) {
        self.pauses.flush(engine, dirty, now).await;
        self.batches.persist().await;
    }

    /// Reminders and batch progress (every tick).
    pub async fn tick(
        &mut self,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        capacity: &HashMap<String, usize>,
        now: DateTime<Utc>,
    ) {
        if self.batches.is_spread() {
            for id in self
                .batches
                .drive_spread(engine, capacity, dirty, now)
                .await
            {
                self.pauses.forget(&id);
            }
        } else {
            self.drive(engine, capacity, dirty, now);
        }
        self.pauses.remind(engine, dirty, now).await;
    }
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, Utc};

    use super::*;
    use crate::workflow::{instantiate, StageDef, StageRetry};

    fn held(engine: &mut Engine, id: &str, item: &str, at: DateTime<Utc>) {
        let stage = StageDef {
            name: "x".into(),
            agent_type: "a".into(),
            depends_on: Vec::new(),
            expected: 1.0,
            timeout: None,
            retry: StageRetry::default(),
            fan_out: 1,
            params: serde_json::Value::Null,
            kind: Default::default(),
        };
        engine.insert(instantiate(
            id.into(),
            item.into(),
            "p".into(),
            vec![stage],
            10,
            at,
        ));
    }

    #[test]
    fn the_latest_of_an_item_is_the_last_created_then_the_highest_id() {
        let t = Utc::now();
        let mut engine = Engine::new();
        assert!(latest_of_item(&engine, "AAPL").is_none());
        held(&mut engine, "w-b", "AAPL", t);
        held(&mut engine, "w-old", "AAPL", t - Duration::seconds(5));
        held(&mut engine, "w-other", "MSFT", t + Duration::seconds(5));
        let id = |e: &Engine| latest_of_item(e, "AAPL").map(|r| r.workflow_id.clone());
        assert_eq!(
            id(&engine).as_deref(),
            Some("w-b"),
            "other items never count"
        );
        held(&mut engine, "w-a", "AAPL", t);
        assert_eq!(id(&engine).as_deref(), Some("w-b"), "same time: highest id");
        held(&mut engine, "w-c", "AAPL", t);
        assert_eq!(id(&engine).as_deref(), Some("w-c"));
        let by_item = target(&engine, &None, &Some("AAPL".into())).map(|r| &r.workflow_id);
        assert_eq!(by_item.ok().map(String::as_str), Some("w-c"));
    }
}
