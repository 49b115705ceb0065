//! `gates`, `gate_decide` and `rerun`: listing gates, deciding at one, and
//! running tasks again.

use caucus_shared::api::coordinator::gates::{
    GateAction, GateDecideReply, GateDecideRequest, GatesReply, GatesRequest, RerunReply,
    RerunRequest,
};
use caucus_shared::nats::api::{ApiError, OffsetPage};

use super::super::commands::SchedulerHandle;
use super::super::gates::GateOp;
use super::super::gates_package::action_of;
use super::page::{GATES_PAGE, GATES_PAGE_MAX};
use super::{call_as, GateApi};
use crate::workflow;

impl GateApi {
    /// `gates`: open gates, oldest first.
    pub async fn list(
        &self,
        handle: SchedulerHandle,
        r: GatesRequest,
    ) -> Result<GatesReply, ApiError> {
        let page = OffsetPage::of(r.limit, r.cursor.as_deref(), GATES_PAGE, GATES_PAGE_MAX)?;
        let op = GateOp::List {
            workflow_id: r.workflow_id,
            item: r.item,
            page,
        };
        call_as(&handle, op).await
    }

    /// `gate_decide`: approve (refused while provisional decisions await
    /// review), reject or send back.
    pub async fn decide(
        &self,
        handle: SchedulerHandle,
        r: GateDecideRequest,
    ) -> Result<GateDecideReply, ApiError> {
        if r.reviewer.trim().is_empty() {
            return Err(ApiError::bad_request("`reviewer` must name who decides"));
        }
        if r.action == GateAction::Approve {
            match self.provisional(&r.workflow_id).await? {
                None => {
                    return Err(ApiError::new(
                        "facilitator_unavailable",
                        "cannot check this workflow's provisional decisions: no facilitator is running; start one and retry",
                    ))
                }
                Some(p) if p.count > 0 => {
                    let ids: Vec<&str> = p.decisions.iter().map(|d| d.debate_id.as_str()).collect();
                    return Err(ApiError::new(
                        "provisional_unreviewed",
                        format!(
                            "{}: {} — confirm, override or re-debate each (coordinator.gate_review) before approving",
                            p.message,
                            ids.join(", ")
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        let op = GateOp::Decide {
            workflow_id: r.workflow_id,
            gate: r.gate,
            req: workflow::GateRequest {
                action: action_of(r.action),
                decided_by: r.reviewer,
                rationale: r.rationale,
                send_back_to: r.send_back_to,
            },
        };
        call_as(&handle, op).await
    }

    /// `rerun`: run tasks of a workflow again (each group after the last).
    pub async fn rerun(
        &self,
        handle: SchedulerHandle,
        r: RerunRequest,
    ) -> Result<RerunReply, ApiError> {
        if r.reason.trim().is_empty() {
            return Err(ApiError::bad_request("`reason` is required"));
        }
        let mut groups = r.groups;
        if !r.tasks.is_empty() {
            groups.insert(0, r.tasks);
        }
        let op = GateOp::Rerun {
            workflow_id: r.workflow_id,
            req: workflow::RerunRequest {
                reason: r.reason,
                requested_by: r.requested_by.unwrap_or_else(|| "api".into()),
                groups,
                assumptions: r.assumptions,
                estimates: Vec::new(),
            },
        };
        call_as(&handle, op).await
    }
}
