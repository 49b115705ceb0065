//! What a request workflow carries: the request as its one stage's
//! `params.request`, and the inline pipeline spec that puts it there. Pure,
//! so a redelivered request builds the very same spec (the submission's
//! fingerprint must match for its idempotency key to replay it).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use caucus_shared::config::LevelReviewMode;
use caucus_shared::envelope::Priority;
use caucus_shared::messages::Request;
use caucus_shared::pipeline::{
    LevelReviewSpec, PipelineSpec, RetryPolicy, StageKind, StageSpec, SPEC_SCHEMA_VERSION,
};

use crate::workflow::WorkflowRecord;

/// Name of every request workflow's pipeline.
pub const REQUEST_PIPELINE: &str = "request";
/// Key of the request in its stage's params.
pub const PARAMS_KEY: &str = "request";
/// Queue priority added to the task of a `high` request (time units of
/// remaining path: more than any realistic pipeline's longest path, so it
/// goes ahead of ordinary tasks of its agent type).
pub const BOOST_HIGH: f64 = 1_000.0;
/// Added for `critical` (ahead of `high` requests).
pub const BOOST_CRITICAL: f64 = 10_000.0;
/// Added for `system_critical` (ahead of everything).
pub const BOOST_SYSTEM_CRITICAL: f64 = 100_000.0;

/// The request as its task receives it (`params.request`) and as the
/// coordinator reads it back to answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestParams {
    /// The request envelope's id (the answer's `correlation_id`).
    pub request_id: String,
    /// Who asked (the answer's addressee).
    pub from_agent: String,
    /// The request envelope's priority (the answer's too).
    pub priority: Priority,
    /// The targeted question.
    pub query: String,
    /// What is in and out of scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Parameters of the requested analysis (any JSON).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub parameters: Value,
    /// When the answer is needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
    /// Why it is asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// The item's workflow the request named (`content.workflow_id`), when
    /// it was unfinished: the request is answered as part of its context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_workflow_id: Option<String>,
}

impl RequestParams {
    /// From a request envelope's fields and typed content.
    pub fn new(
        request_id: &str,
        from_agent: &str,
        priority: Priority,
        req: &Request,
        parent_workflow_id: Option<String>,
    ) -> Self {
        RequestParams {
            request_id: request_id.to_string(),
            from_agent: from_agent.to_string(),
            priority,
            query: req.query.clone(),
            scope: req.scope.clone(),
            parameters: req.parameters.clone(),
            deadline: req.deadline,
            rationale: req.rationale.clone(),
            parent_workflow_id,
        }
    }

    /// The queue priority added to the request's task.
    pub fn boost(&self) -> f64 {
        match self.priority {
            Priority::SystemCritical => BOOST_SYSTEM_CRITICAL,
            Priority::Critical => BOOST_CRITICAL,
            Priority::High => BOOST_HIGH,
            Priority::Normal | Priority::Low => 0.0,
        }
    }
}

/// A request stage's `params`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct StageParams {
    request: RequestParams,
}

/// The one-stage inline pipeline that runs `params` on `agent_type`. With
/// a deadline, each attempt's time limit is the time left from
/// `stored_at` (when the stream stored the request: the same on every
/// redelivery) to the deadline, in units of `unit_ms`; level reviews are
/// off (there is one level).
pub fn pipeline_for(
    agent_type: &str,
    params: &RequestParams,
    stored_at: DateTime<Utc>,
    unit_ms: u64,
) -> PipelineSpec {
    let timeout = params.deadline.map(|d| {
        let ms = (d - stored_at).num_milliseconds().max(1) as f64;
        ms / unit_ms.max(1) as f64
    });
    let stage_params = serde_json::to_value(StageParams {
        request: params.clone(),
    })
    .expect("request params serialise");
    let Value::Object(stage_params) = stage_params else {
        unreachable!("a struct serialises as an object")
    };
    PipelineSpec {
        schema_version: SPEC_SCHEMA_VERSION,
        name: REQUEST_PIPELINE.to_string(),
        description: format!("request {} from {}", params.request_id, params.from_agent),
        timeout: None,
        // Declares the agent type (a spec must name the capacity of each
        // agent it uses); dispatch reads the live capacity from Redis.
        capacities: [(agent_type.to_string(), 1)].into_iter().collect(),
        stages: vec![StageSpec {
            name: agent_type.to_string(),
            agent: Some(agent_type.to_string()),
            depends_on: Vec::new(),
            expected_duration: 1.0,
            timeout,
            retry: RetryPolicy::default(),
            fan_out: None,
            kind: StageKind::Task,
            params: stage_params,
        }],
        level_review: Some(LevelReviewSpec {
            mode: Some(LevelReviewMode::Off),
            agent: None,
            expected_duration: None,
            timeout: None,
            retry: None,
        }),
    }
}

/// Whether `rec` may be a request workflow (cheap: name and shape only).
pub fn looks_like_request(rec: &WorkflowRecord) -> bool {
    rec.pipeline == REQUEST_PIPELINE && rec.stages.len() == 1
}

/// The request `rec` serves, when it is a request workflow (its pipeline
/// is [`REQUEST_PIPELINE`] and its one stage carries `params.request`).
pub fn request_of(rec: &WorkflowRecord) -> Option<RequestParams> {
    if !looks_like_request(rec) {
        return None;
    }
    let stage = rec.stages.first()?;
    serde_json::from_value::<StageParams>(stage.params.clone())
        .ok()
        .map(|p| p.request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::pipelines::{resolve, stages_of};
    use crate::workflow::instantiate;
    use serde_json::json;

    fn request() -> Request {
        serde_json::from_value(json!({
            "query": "What is AAPL's fair value?",
            "scope": "FY2026",
            "parameters": {"horizon_years": 5},
            "deadline": "2026-11-25T22:00:00Z",
            "rationale": "capex jump",
            "item": "AAPL"
        }))
        .unwrap()
    }

    fn params() -> RequestParams {
        RequestParams::new(
            "r-1",
            "financial_analyst",
            Priority::High,
            &request(),
            Some("wf-parent".into()),
        )
    }

    #[test]
    fn the_spec_is_a_valid_one_stage_pipeline_carrying_the_request() {
        let stored: DateTime<Utc> = "2026-11-25T21:00:00Z".parse().unwrap();
        let spec = pipeline_for("valuation", &params(), stored, 1_000);
        let value = serde_json::to_value(&spec).unwrap();
        let resolved = resolve(&value).expect("the inline spec validates");
        assert_eq!(resolved.name, REQUEST_PIPELINE);
        let stages = stages_of(&resolved).unwrap();
        assert_eq!(stages.len(), 1);
        assert_eq!(stages[0].name, "valuation");
        assert_eq!(stages[0].agent_type, "valuation");
        assert_eq!(stages[0].timeout, Some(3_600.0), "an hour to the deadline");
        let p = &stages[0].params["request"];
        assert_eq!(p["query"], "What is AAPL's fair value?");
        assert_eq!(p["from_agent"], "financial_analyst");
        assert_eq!(p["request_id"], "r-1");
        assert_eq!(p["priority"], "high");
        assert_eq!(p["parent_workflow_id"], "wf-parent");
        assert_eq!(p["parameters"]["horizon_years"], 5);
        // Built twice from the same request: the same spec (the
        // submission's fingerprint depends on it).
        assert_eq!(
            value,
            serde_json::to_value(pipeline_for("valuation", &params(), stored, 1_000)).unwrap()
        );
        let mut no_deadline = params();
        no_deadline.deadline = None;
        let spec = pipeline_for("valuation", &no_deadline, stored, 1_000);
        assert_eq!(spec.stages[0].timeout, None);
    }

    #[test]
    fn request_workflows_are_recognised_by_pipeline_and_params() {
        let stored: DateTime<Utc> = "2026-11-25T21:00:00Z".parse().unwrap();
        let spec = pipeline_for("valuation", &params(), stored, 1_000);
        let stages = stages_of(&spec).unwrap();
        let rec = instantiate(
            "w".into(),
            "AAPL".into(),
            spec.name.clone(),
            stages.clone(),
            1_000,
            stored,
        );
        assert_eq!(request_of(&rec), Some(params()));
        let mut other = rec.clone();
        other.pipeline = "stock-analysis".into();
        assert_eq!(request_of(&other), None, "another pipeline");
        let mut plain = stages;
        plain[0].params = json!({"depth": 2});
        let rec = instantiate(
            "w".into(),
            "AAPL".into(),
            REQUEST_PIPELINE.into(),
            plain,
            1_000,
            stored,
        );
        assert_eq!(request_of(&rec), None, "a user pipeline named `request`");
    }

    #[test]
    fn urgent_requests_are_boosted_in_order() {
        let mut p = params();
        let mut last = -1.0;
        for prio in [
            Priority::Low,
            Priority::High,
            Priority::Critical,
            Priority::SystemCritical,
        ] {
            p.priority = prio;
            assert!(p.boost() >= last);
            last = p.boost();
        }
        p.priority = Priority::Normal;
        assert_eq!(p.boost(), 0.0);
        p.priority = Priority::High;
        assert!(p.boost() > 0.0);
    }
}
