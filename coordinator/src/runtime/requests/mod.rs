//! Requests become work (seed 001's `request`: a targeted query, scope,
//! priority and deadline). A `request` envelope on
//! `caucus.msg.<agent_type>` is read by the coordinator's message consumer
//! (`runtime/inbound/messages.rs`), which hands it to [`RequestIntake`];
//! the scheduler calls [`RequestAnswers`] after each pump and tick to send
//! the result back.
//!
//! **Intake.** The request's item is `content.item`, else the item of
//! `content.workflow_id`'s workflow (neither: dead-lettered
//! `invalid_request`). It becomes a one-stage workflow created through the
//! same machinery as `submit` ([`crate::runtime::api::submit_with`]): an
//! inline pipeline named `request` whose one stage, named after the agent
//! type and run by it, carries the request as `params.request`
//! ([`RequestParams`]: query, scope, parameters, deadline, rationale,
//! request id, requester, priority, linked workflow). The idempotency key
//! is `request:<envelope id>`, so a redelivered request creates nothing
//! new; `accept` returns once the record is stored and handed to the
//! scheduler. With a deadline, each attempt's time limit is the time from
//! when the stream stored the request to the deadline (the same on every
//! redelivery, as the key's fingerprint requires). A deadline already
//! passed when the request is read is answered at once with a failure
//! confirmation and no workflow.
//!
//! **Unknown agent types are accepted.** Whether an agent type exists is
//! not cheap to know from here (workers come and go; capacity is read from
//! Redis by the scheduler), and a worker may start later: a request for an
//! agent type with no capacity waits in its ready queue like any task, and
//! its deadline (or the requester's response time-out) reports it.
//!
//! **Priority.** Ready tasks of one agent type are ordered by their
//! longest remaining path (`TaskRecord::priority`, in time units), then by
//! age. A request's task has a path of one unit, so it would queue behind
//! pipeline tasks; `high`, `critical` and `system_critical` requests get
//! [`params::BOOST_HIGH`] / `_CRITICAL` / `_SYSTEM_CRITICAL` added to
//! their task's priority (more than any real pipeline's path), so they go
//! first among their agent type's ready tasks, in urgency order. Capacity
//! is not bypassed: the task still waits for a free slot. `normal` and
//! `low` requests keep the usual ordering.
//!
//! **Linking, not joining.** A request about an item whose workflow is
//! running is *linked* to it: the workflow named by `content.workflow_id`
//! (when unfinished) is recorded as `parent_workflow_id` in the task's
//! params; otherwise the item's most recent unfinished workflow found in
//! memory when the answer is sent. The link is named in the answer's note
//! and in the answered flag. The request is deliberately not added as a
//! stage of the running workflow: that would change the workflow's plan
//! (stages and their ids), its critical path and every task's priority,
//! and the upstream sets its gates and level reviews judge, under a
//! pipeline the submitter did not choose.
//!
//! **Answers.** When a request workflow finishes, [`RequestAnswers`]
//! publishes (`answer.rs`): for a completed one, a `finding` on
//! `caucus.findings.<item>` from the agent type to the requester
//! (`correlation_id` = request id, the request's priority, value = the
//! task's output, or a pointer to the task when its JSON is over
//! [`answers::MAX_VALUE_BYTES`]); then, either way, a `confirmation` on
//! `caucus.msg.<requester>` (`agrees`/`used` true and "answered by workflow
//! <id>; finding <id>", or false with the failure reason). Both carry
//! `Nats-Msg-Id`s derived from the request id (`answer:<id>`,
//! `answer-confirm:<id>`), and the envelope ids are derived too, so a
//! retried answer is one answer. Once JetStream stored both, the workflow
//! gets the flag `request_answered` (detail id `answer:<request id>`) and
//! is persisted; a failed publish is retried on the next flush. A failed
//! request sends no finding: there is no result to share, and a finding
//! would be handed to the requester's tasks as one (nor an
//! `agent_failure_event`: the agent did not fail the system, the request
//! did not succeed, and the confirmation says so to the one who asked).
//! The output is read from the record in memory: a spilled output
//! (`coordinator.inline_output_bytes`) stays there too (the store parks it
//! only while encoding, and reading a record fills it back in).
//!
//! **Ending.** On a tick, an unfinished request workflow whose deadline
//! passed is ended as failed ("deadline <ts> missed"); so is one whose
//! task failed beyond its retries (which would otherwise wait paused for a
//! person: the requester needs an answer, not a checkpoint). The
//! transition is `WorkflowRecord::end_failed` (workflow/end.rs). An
//! attempt still running on a worker runs on; its late events are ignored.
//! Finished request workflows are answered from memory: one that finished
//! and was stored, but whose answer was not sent before its coordinator
//! stopped, is not read back by the next one (finished records are not
//! loaded); its requester's response time-out reports it.

mod answer;
mod answers;
mod intake;
pub mod params;

pub use answer::{
    finding_id, is_answer_finding, is_answered, AnsweredDetail, OmittedOutput, ANSWERED_FLAG,
};
pub use answers::{
    RequestAnswers, DEADLINE_MISSED, MAX_ANSWERS_PER_FLUSH, MAX_VALUE_BYTES, REQUEST_FAILED,
};
pub use intake::{idempotency_key, RequestIntake};
pub use params::{request_of, RequestParams, REQUEST_PIPELINE};

/// Why a request did not become work.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The request can never be served as sent (dead-lettered with `code`).
    #[error("{reason}")]
    Invalid {
        /// The DLQ error code, e.g. `invalid_request`, `unaddressable`.
        code: &'static str,
        /// What is wrong, for the sender.
        reason: String,
    },
    /// It may succeed later (no leader, a store write failed): redelivered.
    #[error("{0}")]
    Transient(String),
}
