//! Resolving the `pipeline` of a request (a built-in name or an inline
//! spec) and turning a validated spec into the runtime's stage list.

use serde_json::Value;

use caucus_shared::nats::api::ApiError;

use crate::pipeline::{builtin, builtin_names, validate, PipelineSpec, StageKind};
use crate::workflow::{StageDef, StageRetry, GATE_AGENT};

/// A built-in name or an inline JSON spec, validated.
pub fn resolve(v: &Value) -> Result<PipelineSpec, ApiError> {
    let spec = match v {
        Value::String(name) => builtin(name).ok_or_else(|| {
            ApiError::new(
                "unknown_pipeline",
                format!(
                    "unknown pipeline `{name}` (built-in: {})",
                    builtin_names().join(", ")
                ),
            )
        })?,
        Value::Object(_) => PipelineSpec::from_json(v.clone())
            .map_err(|e| ApiError::new("invalid_pipeline", e.to_string()))?,
        Value::Null => return Err(ApiError::bad_request("`pipeline` is required")),
        _ => {
            return Err(ApiError::bad_request(
                "`pipeline` must be a built-in name or an inline spec object",
            ))
        }
    };
    validate(&spec, None).map_err(|e| ApiError::new("invalid_pipeline", e.to_string()))?;
    Ok(spec)
}

/// The runtime stages of a validated spec.
pub fn stages_of(spec: &PipelineSpec) -> Result<Vec<StageDef>, ApiError> {
    spec.stages
        .iter()
        .map(|s| {
            let agent = match s.kind {
                StageKind::Gate => {
                    super::gates::check_params(&s.name, &Value::Object(s.params.clone()))
                        .map_err(|e| ApiError::new("invalid_pipeline", e.to_string()))?;
                    GATE_AGENT.to_string()
                }
                StageKind::Task => s.agent.clone().ok_or_else(|| {
                    ApiError::new(
                        "invalid_pipeline",
                        format!("stage `{}` has no agent", s.name),
                    )
                })?,
            };
            Ok(StageDef {
                name: s.name.clone(),
                agent_type: agent,
                depends_on: s.depends_on.clone(),
                expected: s.expected_duration,
                timeout: s.timeout,
                retry: StageRetry {
                    max_attempts: s.retry.max_attempts.max(1),
                    backoff_initial_ms: s.retry.backoff_initial_ms,
                    backoff_max_ms: s.retry.backoff_max_ms,
                },
                fan_out: s.fan_out.unwrap_or(1).max(1),
                params: if s.params.is_empty() {
                    Value::Null
                } else {
                    Value::Object(s.params.clone())
                },
                kind: s.kind,
            })
        })
        .collect()
}
