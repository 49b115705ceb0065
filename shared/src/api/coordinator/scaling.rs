//! `scaling`: one agent type's backlog as the coordinator holds it, for
//! autoscalers. The coordinator serves it as `GET /scaling/<agent_type>` on
//! its HTTP listener (KEDA's `metrics-api` scaler reads `queue_depth`); a
//! standby answers that route by calling this operation, which the leader
//! answers from its scheduler.

use serde::{Deserialize, Serialize};

use crate::api::{Operation, OperationDoc, CODE_STANDBY, CODE_TIMEOUT};

/// `coordinator.scaling`: the leader answers.
pub struct Scaling;

impl Operation for Scaling {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "scaling";
    const SUMMARY: &'static str =
        "one agent type's backlog for autoscalers: queue depth, oldest wait, in flight, capacity";
    const ERRORS: &'static [&'static str] = &[CODE_STANDBY, CODE_UNAVAILABLE, CODE_TIMEOUT];
    type Request = ScalingRequest;
    type Reply = ScalingView;
}

/// Error code of a coordinator that cannot lead or is shutting down.
const CODE_UNAVAILABLE: &str = "unavailable";

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[OperationDoc::of::<Scaling>()];

/// The version of [`ScalingView`]'s layout; a change of a field's meaning
/// raises it (autoscaler configurations name the fields they read).
pub const SCALING_SCHEMA_VERSION: u32 = 1;

/// The `scaling` request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingRequest {
    /// The agent type asked about.
    pub agent_type: String,
}

/// One agent type's backlog: the `scaling` reply and the body of
/// `GET /scaling/<agent_type>`. An agent type the leader knows nothing of
/// reports zeros.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScalingView {
    /// [`SCALING_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The agent type.
    pub agent_type: String,
    /// Tasks the coordinator holds for this type and has not dispatched:
    /// ready (waiting for capacity) plus retries backing off. The figure an
    /// autoscaler scales on: the coordinator never dispatches beyond live
    /// capacity, so this backlog never shows as JetStream consumer lag.
    pub queue_depth: u64,
    /// How long the oldest ready task has waited, in seconds (0 when none
    /// waits).
    pub oldest_wait_seconds: f64,
    /// Tasks dispatched and not yet finished.
    pub in_flight: u64,
    /// Slots of the type's live workers (capped), as registered in Redis.
    pub capacity: u32,
}

impl ScalingView {
    /// A view of `agent_type` with nothing queued, in flight or registered.
    pub fn idle(agent_type: impl Into<String>) -> ScalingView {
        ScalingView {
            schema_version: SCALING_SCHEMA_VERSION,
            agent_type: agent_type.into(),
            ..ScalingView::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_serialises_with_the_documented_field_names() {
        let v = ScalingView {
            queue_depth: 25,
            oldest_wait_seconds: 12.5,
            in_flight: 2,
            capacity: 2,
            ..ScalingView::idle("valuation")
        };
        assert_eq!(
            serde_json::to_value(&v).unwrap(),
            serde_json::json!({"schema_version": 1, "agent_type": "valuation",
                "queue_depth": 25, "oldest_wait_seconds": 12.5, "in_flight": 2, "capacity": 2})
        );
    }

    #[test]
    fn the_request_refuses_unknown_fields() {
        let r: Result<ScalingRequest, _> =
            serde_json::from_value(serde_json::json!({"agent_type": "x", "agent": "y"}));
        assert!(r.is_err());
    }
}
