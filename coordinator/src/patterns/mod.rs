//! Coordination patterns: parallel, pipeline, debate, hierarchical,
//! consensus and peer review, run over real workers of any handler.
//!
//! - [`spec`]: the request, its parameters and the seed's defaults.
//! - [`runner`]: the six patterns over an [`AgentCaller`].
//! - [`consensus`]: stance parsing (negation-aware), Jaccard, the score.
//! - [`nats_caller`]: the caller that dispatches to workers over NATS.
//! - [`record`]: the run record in KV bucket `pattern_runs`.
//! - [`api`]: `coordinator.run_pattern` and `coordinator.pattern_status`.

pub mod api;
pub mod consensus;
pub mod nats_caller;
pub mod record;
pub mod result;
pub mod runner;
pub mod spec;

#[cfg(test)]
mod runner_tests;

use caucus_shared::api::coordinator::patterns::{PatternStatus, RunPattern};

pub use api::PatternService;
pub use result::{AgentResult, PatternTask, RoundRecord};
pub use runner::{run, AgentCaller, Outcome, StopReason};
pub use spec::{Pattern, PatternKind, PatternSpec, RunRequest};

/// Adds `run_pattern` and `pattern_status` to the coordinator's API.
pub fn register(svc: &mut caucus_shared::service::Service) {
    let ps = PatternService::new(svc.context());
    {
        let ps = ps.clone();
        svc.op::<RunPattern, _, _>(move |req| {
            let ps = ps.clone();
            async move { ps.run_pattern(req).await }
        });
    }
    svc.op::<PatternStatus, _, _>(move |req| {
        let ps = ps.clone();
        async move { ps.pattern_status(req).await }
    });
}
