//! The coordinator administers the topology the restricted services bind
//! to (`caucus_shared::nats::admin`): at start the facilitator's and the
//! correlator's buckets and consumers and the consumers of every agent type
//! a built-in pipeline uses; afterwards `workers-<t>` and `agents-<t>` for
//! each agent type that registers capacity in Redis, the first time it is
//! seen. Every instance does it, leader or standby: it is idempotent, and a
//! worker waiting for its consumer must not wait for an election.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use caucus_shared::nats::admin;
use caucus_shared::redis::CapacitySemaphore;

use super::CoordinatorDeps;

/// How often the registered agent types are read.
pub const WATCH_EVERY: Duration = Duration::from_millis(500);
/// Warnings repeated at most this often while the types cannot be read or
/// a consumer cannot be created.
const WARN_EVERY: Duration = Duration::from_secs(30);

/// The agent types of the built-in pipelines.
pub fn builtin_agent_types() -> BTreeSet<String> {
    crate::pipeline::builtin_names()
        .into_iter()
        .filter_map(crate::pipeline::builtin)
        .flat_map(|spec| spec.stages.into_iter().filter_map(|s| s.agent))
        .collect()
}

/// Creates or updates the restricted services' buckets and consumers and
/// the consumers of the built-in agent types; returns those types.
pub async fn administer(deps: &CoordinatorDeps) -> Result<HashSet<String>, caucus_shared::Error> {
    let done = admin::restricted(&deps.js, &deps.subjects, &deps.config).await?;
    let mut known = HashSet::new();
    let mut consumers = done.consumers;
    for t in builtin_agent_types() {
        consumers.extend(admin::agent_type(&deps.js, &deps.subjects, &deps.config, &t).await?);
        known.insert(t);
    }
    tracing::info!(buckets = ?done.buckets, consumers = ?consumers, "topology administered");
    Ok(known)
}

/// Creates the consumers of each newly registered agent type until
/// shutdown. `known` are the types already done.
pub async fn watch(deps: CoordinatorDeps, mut known: HashSet<String>) {
    let prefix = deps.subjects.prefix().to_string();
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_warn: Option<std::time::Instant> = None;
    let mut warn = |what: &str, error: &dyn std::fmt::Display| {
        if last_warn.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
            last_warn = Some(std::time::Instant::now());
            tracing::warn!(%error, "{what}; retrying");
        }
    };
    loop {
        tokio::select! {
            _ = deps.shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let types = match CapacitySemaphore::agent_types(&deps.redis, &prefix).await {
            Ok(t) => t,
            Err(e) => {
                warn("cannot read the registered agent types", &e);
                continue;
            }
        };
        let new: Vec<String> = types.into_iter().filter(|t| !known.contains(t)).collect();
        for t in new {
            match admin::agent_type(&deps.js, &deps.subjects, &deps.config, &t).await {
                Ok(names) => {
                    tracing::info!(agent_type = %t, consumers = ?names, "consumers created for a new agent type");
                    known.insert(t);
                }
                Err(e) => warn(
                    &format!("cannot create the consumers of agent type {t}"),
                    &e,
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_pipelines_name_their_agent_types() {
        let types = builtin_agent_types();
        assert!(types.contains("valuation"), "{types:?}");
        assert!(types.iter().all(|t| !t.is_empty()));
    }
}
