//! Expert queues in Redis: one bounded counter per expert
//! (`<prefix>:{queue:expert:<name>}:members`, members = debate ids), at
//! most `expert_max_concurrent` live members each.

use std::collections::BTreeMap;
use std::time::Duration;

use caucus_shared::redis::{BoundedCounter, RedisPool};
use tokio_util::sync::CancellationToken;

use crate::debate::routing::{self, ExpertSlot};

/// Queue name of an expert.
pub fn queue_name(expert: &str) -> String {
    format!("expert:{expert}")
}

/// The expert queues.
#[derive(Clone, Debug)]
pub struct ExpertQueues {
    counter: BoundedCounter,
    experts: Vec<String>,
    max: u32,
    ttl: Duration,
}

impl ExpertQueues {
    /// Queues of `experts` under `prefix`.
    pub fn new(
        redis: RedisPool,
        prefix: &str,
        experts: Vec<String>,
        max: u32,
        ttl: Duration,
    ) -> Result<Self, caucus_shared::Error> {
        for e in &experts {
            caucus_shared::redis::validate_name("expert", &queue_name(e))?;
        }
        Ok(ExpertQueues {
            counter: BoundedCounter::new(redis, prefix)?,
            experts,
            max,
            ttl,
        })
    }

    /// Maximum per expert.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// Live debates per expert.
    pub async fn load(&self) -> Result<BTreeMap<String, Vec<String>>, caucus_shared::Error> {
        let mut out = BTreeMap::new();
        for e in &self.experts {
            out.insert(e.clone(), self.counter.members(&queue_name(e)).await?);
        }
        Ok(out)
    }

    /// Claims a slot for `debate_id` on the least-loaded expert with room;
    /// [`ExpertSlot::Full`] when every queue is full. A debate already in
    /// a queue keeps its slot.
    pub async fn claim(&self, debate_id: &str) -> Result<ExpertSlot, caucus_shared::Error> {
        let load = self.load().await?;
        if let Some((e, _)) = load.iter().find(|(_, m)| m.iter().any(|x| x == debate_id)) {
            return Ok(ExpertSlot::Claimed(e.clone()));
        }
        let counts: Vec<(String, u32)> = load
            .iter()
            .map(|(e, m)| (e.clone(), u32::try_from(m.len()).unwrap_or(u32::MAX)))
            .collect();
        for expert in routing::candidates(&counts, self.max) {
            // Another facilitator may have filled it since we looked: the
            // script checks again atomically.
            let out = self
                .counter
                .try_add(&queue_name(&expert), debate_id, self.max, self.ttl)
                .await?;
            if out.added {
                return Ok(ExpertSlot::Claimed(expert));
            }
        }
        Ok(ExpertSlot::Full)
    }

    /// Frees `debate_id`'s slot on `expert`'s queue.
    pub async fn release(
        &self,
        expert: &str,
        debate_id: &str,
    ) -> Result<bool, caucus_shared::Error> {
        self.counter.remove(&queue_name(expert), debate_id).await
    }
}

/// Keeps `caucus_expert_queue{expert}` current: reads every queue from
/// Redis now and every `every` until `shutdown` (claims and releases by
/// any instance show within one period).
pub async fn report_load(queues: ExpertQueues, every: Duration, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match queues.load().await {
            Ok(load) => {
                for (expert, members) in load {
                    crate::metrics::expert_queue(&expert, members.len());
                }
            }
            Err(e) => tracing::debug!(error = %e, "expert queues unreadable; gauge kept"),
        }
    }
}
