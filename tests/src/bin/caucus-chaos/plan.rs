//! The fault schedule: a pure function of the seed, the duration and the
//! shrunk timings, so one seed always injects the same faults in the same
//! order with the same pause and downtime lengths (the moments they hit the
//! running work still vary a little from run to run).

use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// SIGKILL the leading coordinator, restart it after the downtime.
    KillCoordinator,
    /// SIGKILL one worker, restart it after the downtime.
    KillWorker,
    /// SIGKILL the facilitator, restart it after the downtime.
    KillFacilitator,
    /// SIGKILL the correlator, restart it after the downtime.
    KillCorrelator,
    /// SIGSTOP the leading coordinator for longer than `leader_lease`.
    PauseCoordinator,
    /// SIGSTOP one worker for longer than `worker.ack_wait`.
    PauseWorker,
    /// SIGKILL nats-server, restart it on the same port and store dir.
    KillNats,
    /// `FLUSHALL` on Redis.
    FlushRedis,
    /// SIGKILL redis-server, restart it (empty) on the same port.
    KillRedis,
}

impl FaultKind {
    /// Every kind, each injected at least once per run.
    pub const ALL: [FaultKind; 9] = [
        FaultKind::KillCoordinator,
        FaultKind::KillWorker,
        FaultKind::KillFacilitator,
        FaultKind::KillCorrelator,
        FaultKind::PauseCoordinator,
        FaultKind::PauseWorker,
        FaultKind::KillNats,
        FaultKind::FlushRedis,
        FaultKind::KillRedis,
    ];

    /// Snake-case name (as in the JSON report).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillCoordinator => "kill_coordinator",
            FaultKind::KillWorker => "kill_worker",
            FaultKind::KillFacilitator => "kill_facilitator",
            FaultKind::KillCorrelator => "kill_correlator",
            FaultKind::PauseCoordinator => "pause_coordinator",
            FaultKind::PauseWorker => "pause_worker",
            FaultKind::KillNats => "kill_nats",
            FaultKind::FlushRedis => "flush_redis",
            FaultKind::KillRedis => "kill_redis",
        }
    }
}

/// The durations the plan is built around (the shrunk configuration).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Timing {
    /// `coordinator.leader_lease` (and the facilitator's and correlator's).
    #[serde(with = "ms")]
    pub leader_lease: Duration,
    /// `worker.ack_wait`.
    #[serde(with = "ms")]
    pub ack_wait: Duration,
    /// `worker.lease_ttl`.
    #[serde(with = "ms")]
    pub lease_ttl: Duration,
    /// `worker.fetch_wait`.
    #[serde(with = "ms")]
    pub fetch_wait: Duration,
    /// `worker.heartbeat_interval`.
    #[serde(with = "ms")]
    pub heartbeat: Duration,
    /// `coordinator.tick`.
    #[serde(with = "ms")]
    pub tick: Duration,
}

/// Serialises a duration as whole milliseconds.
pub mod ms {
    use std::time::Duration;

    /// `serde(with)` entry point.
    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
}

/// One planned fault.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedFault {
    /// What to do.
    pub kind: FaultKind,
    /// Quiet time before it starts.
    #[serde(with = "ms")]
    pub gap: Duration,
    /// Downtime before the restart (kills) or length of the pause.
    #[serde(with = "ms")]
    pub hold: Duration,
    /// Chooses the victim among the candidates (workers; coordinators when
    /// the leader cannot be told from the logs).
    pub pick: u64,
}

fn between(rng: &mut StdRng, lo: Duration, hi: Duration) -> Duration {
    let (lo, hi) = (lo.as_millis() as u64, hi.as_millis() as u64);
    Duration::from_millis(rng.random_range(lo..=hi.max(lo)))
}

fn scale(d: Duration, f: f64) -> Duration {
    Duration::from_secs_f64(d.as_secs_f64() * f)
}

fn one(kind: FaultKind, rng: &mut StdRng, t: &Timing) -> PlannedFault {
    let hold = match kind {
        FaultKind::KillCoordinator
        | FaultKind::KillWorker
        | FaultKind::KillFacilitator
        | FaultKind::KillCorrelator => between(rng, Duration::ZERO, Duration::from_millis(1000)),
        // Past the lease / the ack wait, so a standby takes over / JetStream
        // redelivers while the process is frozen.
        FaultKind::PauseCoordinator => {
            between(rng, scale(t.leader_lease, 1.5), scale(t.leader_lease, 2.5))
        }
        FaultKind::PauseWorker => between(rng, scale(t.ack_wait, 1.5), scale(t.ack_wait, 2.5)),
        FaultKind::KillNats => {
            between(rng, Duration::from_millis(300), Duration::from_millis(2000))
        }
        FaultKind::FlushRedis => Duration::ZERO,
        FaultKind::KillRedis => {
            between(rng, Duration::from_millis(200), Duration::from_millis(1000))
        }
    };
    PlannedFault {
        kind,
        gap: between(rng, Duration::from_millis(300), Duration::from_millis(1200)),
        hold,
        pick: rng.random(),
    }
}

/// A rough length of one fault, only to fill the duration with the plan
/// (restarts wait for readiness, which takes about this long).
fn estimate(f: &PlannedFault) -> Duration {
    let restart = match f.kind {
        FaultKind::PauseCoordinator | FaultKind::PauseWorker | FaultKind::FlushRedis => {
            Duration::ZERO
        }
        FaultKind::KillNats => Duration::from_millis(1000),
        _ => Duration::from_millis(500),
    };
    f.gap + f.hold + restart
}

/// Every kind once in a seeded order, then seeded random faults while the
/// estimated length is below `duration` (the controller stops once the
/// first [`FaultKind::ALL`]`.len()` are done and the duration is over, so
/// plan for more than the duration).
pub fn plan(seed: u64, duration: Duration, timing: &Timing) -> Vec<PlannedFault> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut kinds = FaultKind::ALL.to_vec();
    kinds.shuffle(&mut rng);
    let mut out: Vec<PlannedFault> = kinds
        .into_iter()
        .map(|k| one(k, &mut rng, timing))
        .collect();
    let mut total: Duration = out.iter().map(estimate).sum();
    while total < duration {
        let kind = FaultKind::ALL[rng.random_range(0..FaultKind::ALL.len())];
        let f = one(kind, &mut rng, timing);
        total += estimate(&f);
        out.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> Timing {
        Timing {
            leader_lease: Duration::from_secs(2),
            ack_wait: Duration::from_secs(2),
            lease_ttl: Duration::from_secs(1),
            fetch_wait: Duration::from_millis(200),
            heartbeat: Duration::from_millis(200),
            tick: Duration::from_millis(50),
        }
    }

    #[test]
    fn one_seed_one_plan_with_every_kind() {
        let a = plan(7, Duration::from_secs(20), &timing());
        let b = plan(7, Duration::from_secs(20), &timing());
        assert_eq!(a, b);
        for k in FaultKind::ALL {
            assert!(a.iter().any(|f| f.kind == k), "{k:?} missing");
        }
        assert_ne!(a, plan(8, Duration::from_secs(20), &timing()));
    }

    #[test]
    fn pauses_outlast_the_lease_and_the_ack_wait() {
        for seed in 0..50 {
            for f in plan(seed, Duration::from_secs(60), &timing()) {
                match f.kind {
                    FaultKind::PauseCoordinator | FaultKind::PauseWorker => {
                        assert!(f.hold >= Duration::from_secs(3), "{f:?}")
                    }
                    _ => assert!(f.hold <= Duration::from_secs(2), "{f:?}"),
                }
            }
        }
    }

    #[test]
    fn a_longer_duration_adds_faults() {
        let short = plan(3, Duration::from_secs(1), &timing());
        let long = plan(3, Duration::from_secs(120), &timing());
        assert_eq!(short.len(), FaultKind::ALL.len());
        assert!(long.len() > short.len());
        let est: Duration = long.iter().map(estimate).sum();
        assert!(est >= Duration::from_secs(120));
    }
}
