//! The processes of one run and the faults done to them. Everything here
//! is synchronous and runs on one controller thread, which owns the
//! processes and writes what it did, and when, to the [`Journal`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use caucus_harness::{Nats, Redis, Service, ServiceBuilder, READY_MARKER};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::plan::{FaultKind, PlannedFault, Timing};

/// How long a (re)started service may take to log `service ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Unasked deaths of one member after which it is no longer restarted.
const MAX_RESPAWNS: u32 = 5;
/// How often the controller looks for processes that exited by themselves.
const CHECK_EVERY: Duration = Duration::from_millis(25);

/// Worker instance id → the (task, attempt) it has started and not yet
/// reported finished.
pub type Busy = Arc<Mutex<HashMap<String, HashSet<(String, u32)>>>>;

/// What the run starts.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where logs and server directories go.
    pub run_dir: PathBuf,
    /// The shrunk durations.
    pub timing: Timing,
    /// Each task sleeps this long (`--handler sleep:MS`).
    pub task_ms: u64,
    /// Agent types, each with `workers_per_agent` processes of `slots`.
    pub agents: Vec<String>,
    /// Worker processes per agent type.
    pub workers_per_agent: usize,
    /// Slots per worker process.
    pub slots: u32,
    /// `worker.capacity_cap.<agent>`.
    pub caps: BTreeMap<String, u32>,
    /// `coordinator.partitions`.
    pub partitions: u32,
}

impl Settings {
    /// Cluster capacity per agent type: the slots, capped.
    pub fn capacity(&self) -> BTreeMap<String, usize> {
        self.agents
            .iter()
            .map(|a| {
                let slots = self.workers_per_agent * self.slots as usize;
                let cap = self.caps.get(a).map_or(slots, |c| *c as usize);
                (a.clone(), slots.min(cap))
            })
            .collect()
    }
}

/// Which binary a member runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// `caucus-coordinator`.
    Coordinator,
    /// `caucus-worker`.
    Worker,
    /// `caucus-facilitator`.
    Facilitator,
    /// `caucus-correlator`.
    Correlator,
}

impl Role {
    fn service(self) -> &'static str {
        match self {
            Role::Coordinator => "coordinator",
            Role::Worker => "worker",
            Role::Facilitator => "facilitator",
            Role::Correlator => "correlator",
        }
    }
}

/// One start of one member.
#[derive(Debug, Clone, Serialize)]
pub struct Incarnation {
    /// Member name, e.g. `worker-valuation-2`.
    pub name: String,
    /// 0 for the first start, +1 per restart.
    pub n: u32,
    /// Its instance id (worker id), from its `service ready` line.
    pub instance_id: Option<String>,
    /// OS process id.
    pub pid: Option<u32>,
    /// When it was spawned.
    pub started: DateTime<Utc>,
    /// When it ended (killed by the tool or died).
    pub ended: Option<DateTime<Utc>>,
    /// `killed` or `died: <exit status>`.
    pub end: Option<String>,
    /// Its log file.
    pub log: PathBuf,
}

/// A fault as injected.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRecord {
    /// Its kind.
    pub kind: FaultKind,
    /// Which process (member name, `nats-server` or `redis-server`).
    pub target: String,
    /// When it began.
    pub start: DateTime<Utc>,
    /// When it was over: restarted and ready, resumed, flushed.
    pub end: DateTime<Utc>,
    /// Planned downtime / pause.
    #[serde(with = "crate::plan::ms")]
    pub hold: Duration,
    /// Anything that went differently.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A process that exited without the tool killing it.
#[derive(Debug, Clone, Serialize)]
pub struct Death {
    /// Member name, `nats-server` or `redis-server`.
    pub name: String,
    /// Which start of it.
    pub incarnation: u32,
    /// Its instance id.
    pub instance_id: Option<String>,
    /// When the tool noticed.
    pub at: DateTime<Utc>,
    /// Exit status.
    pub status: String,
    /// The last lines of its log.
    pub log_tail: Vec<String>,
}

/// Everything the controller did, with times.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Journal {
    /// Injected faults, in order.
    pub faults: Vec<FaultRecord>,
    /// Every start of every member.
    pub incarnations: Vec<Incarnation>,
    /// (member, instance id, SIGSTOP, SIGCONT).
    pub pauses: Vec<(String, String, DateTime<Utc>, DateTime<Utc>)>,
    /// Redis data losses (from, to).
    pub redis_losses: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// Processes that died unasked.
    pub deaths: Vec<Death>,
    /// Restarts that did not log `service ready` in time.
    pub not_ready: Vec<String>,
}

struct Member {
    name: String,
    role: Role,
    builder: ServiceBuilder,
    service: Service,
    incarnation: u32,
    /// Index into `Journal::incarnations` of the current start.
    record: usize,
    deaths: u32,
}

/// The servers and services of one run.
pub struct Cluster {
    /// NATS (JetStream), on a free port.
    pub nats: Nats,
    /// Worker instance ids running a task now (from the live event tap):
    /// worker faults hit a busy worker when there is one.
    pub busy: Option<Busy>,
    /// Redis, on a free port.
    pub redis: Redis,
    members: Vec<Member>,
    journal: Arc<Mutex<Journal>>,
    log_dir: PathBuf,
    nats_starts: u32,
    redis_starts: u32,
}

fn dur(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// The last `n` lines of `path`.
pub fn tail(path: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// The instance id in a log's `service ready` line: `<service>-` and 12
/// hex digits.
fn instance_id(log: &str, service: &str) -> Option<String> {
    let line = log.lines().rev().find(|l| l.contains(READY_MARKER))?;
    let prefix = format!("{service}-");
    let mut rest = line;
    while let Some(i) = rest.find(&prefix) {
        let cand = &rest[i..];
        let hex = &cand[prefix.len()..];
        if hex.len() >= 12 && hex[..12].chars().all(|c| c.is_ascii_hexdigit()) {
            let end = prefix.len() + 12;
            let next = cand[end..].chars().next();
            if next.is_none_or(|c| !c.is_ascii_alphanumeric()) {
                return Some(cand[..end].to_string());
            }
        }
        rest = &cand[prefix.len()..];
    }
    None
}

/// When a coordinator log last said it leads, unless it stepped down
/// after that (the timestamp is the first word of a line).
fn leading_since(log: &str) -> Option<String> {
    let mut since = None;
    for line in log.lines() {
        if line.contains(": leading ") || line.ends_with(": leading") {
            since = line.split_whitespace().next().map(str::to_string);
        } else if line.contains("stepped down") || line.contains("another instance is active") {
            since = None;
        }
    }
    since
}

impl Cluster {
    /// Starts NATS, Redis and every service, and waits until each is ready.
    pub fn start(s: &Settings, journal: Arc<Mutex<Journal>>) -> Result<Cluster> {
        let log_dir = s.run_dir.join("logs");
        std::fs::create_dir_all(&log_dir)?;
        let nats = Nats::start_in(&s.run_dir);
        let redis = Redis::start_in(&s.run_dir);
        let t = &s.timing;
        let env: Vec<(String, String)> = vec![
            ("CAUCUS_NATS_URL".into(), nats.url()),
            ("CAUCUS_REDIS_URL".into(), redis.url()),
            ("CAUCUS_COORDINATOR_TICK".into(), dur(t.tick)),
            (
                "CAUCUS_COORDINATOR_PARTITIONS".into(),
                s.partitions.to_string(),
            ),
            (
                "CAUCUS_COORDINATOR_LEADER_LEASE".into(),
                dur(t.leader_lease),
            ),
            (
                "CAUCUS_FACILITATOR_LEADER_LEASE".into(),
                dur(t.leader_lease),
            ),
            ("CAUCUS_CORRELATOR_LEADER_LEASE".into(), dur(t.leader_lease)),
            ("CAUCUS_WORKER_HEARTBEAT_INTERVAL".into(), dur(t.heartbeat)),
            ("CAUCUS_WORKER_LEASE_TTL".into(), dur(t.lease_ttl)),
            ("CAUCUS_WORKER_FETCH_WAIT".into(), dur(t.fetch_wait)),
            ("CAUCUS_WORKER_ACK_WAIT".into(), dur(t.ack_wait)),
            ("CAUCUS_SHUTDOWN_GRACE".into(), "5s".into()),
            ("CAUCUS_TELEMETRY_LOG_LEVEL".into(), "info".into()),
            // A service restarted by the monitor while NATS or Redis is
            // down must wait for it rather than exit.
            ("CAUCUS_NATS_CONNECT_ATTEMPTS".into(), "60".into()),
            ("CAUCUS_REDIS_CONNECT_ATTEMPTS".into(), "60".into()),
        ];
        let builder = |bin: &str| {
            let mut b = ServiceBuilder::new(bin);
            for (k, v) in &env {
                b = b.env(k, v);
            }
            b
        };
        let mut specs: Vec<(String, Role, ServiceBuilder)> = vec![
            (
                "facilitator".into(),
                Role::Facilitator,
                builder("caucus-facilitator"),
            ),
            (
                "correlator".into(),
                Role::Correlator,
                builder("caucus-correlator"),
            ),
        ];
        for i in 1..=2 {
            specs.push((
                format!("coordinator-{i}"),
                Role::Coordinator,
                builder("caucus-coordinator"),
            ));
        }
        for agent in &s.agents {
            // Only its own agent type's cap: the cap lives in Redis, set by
            // the workers of that type. (Config loading keeps only the first
            // of several CAUCUS_WORKER_CAPACITY_CAP__* variables.)
            let cap = s.caps.get(agent).map(|c| {
                (
                    format!("CAUCUS_WORKER_CAPACITY_CAP__{}", agent.to_ascii_uppercase()),
                    c.to_string(),
                )
            });
            for i in 1..=s.workers_per_agent {
                let mut b = builder("caucus-worker");
                if let Some((k, v)) = &cap {
                    b = b.env(k, v);
                }
                specs.push((
                    format!("worker-{agent}-{i}"),
                    Role::Worker,
                    b.args([
                        "--agent".to_string(),
                        agent.clone(),
                        "--slots".to_string(),
                        s.slots.to_string(),
                        "--handler".to_string(),
                        format!("sleep:{}", s.task_ms),
                    ]),
                ));
            }
        }
        let mut cluster = Cluster {
            busy: None,
            nats,
            redis,
            members: Vec::new(),
            journal,
            log_dir,
            nats_starts: 0,
            redis_starts: 0,
        };
        // Spawn everything, then wait for each: start-ups overlap.
        for (name, role, builder) in specs {
            let (service, record) = cluster.spawn(&name, 0, &builder);
            cluster.members.push(Member {
                name,
                role,
                builder,
                service,
                incarnation: 0,
                record,
                deaths: 0,
            });
        }
        for i in 0..cluster.members.len() {
            if !cluster.await_ready(i) {
                let m = &cluster.members[i];
                bail!(
                    "{} did not start; last lines of {}:\n{}",
                    m.name,
                    m.service.log_path().display(),
                    tail(m.service.log_path(), 30).join("\n")
                );
            }
        }
        Ok(cluster)
    }

    /// Member names by role.
    pub fn names(&self, role: Role) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| m.role == role)
            .map(|m| m.name.clone())
            .collect()
    }

    fn journal(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal.lock().expect("journal")
    }

    fn spawn(&self, name: &str, n: u32, builder: &ServiceBuilder) -> (Service, usize) {
        let log = self.log_dir.join(format!("{name}.{n}.log"));
        let service = builder.clone().log_file(&log).spawn();
        let mut j = self.journal();
        j.incarnations.push(Incarnation {
            name: name.to_string(),
            n,
            instance_id: None,
            pid: service.pid(),
            started: Utc::now(),
            ended: None,
            end: None,
            log,
        });
        (service, j.incarnations.len() - 1)
    }

    /// Waits for member `i`'s readiness line and records its instance id.
    fn await_ready(&mut self, i: usize) -> bool {
        let m = &mut self.members[i];
        let ready = m.service.ready_within(READY_TIMEOUT);
        let id = instance_id(&m.service.output(), m.role.service());
        let (name, n, record) = (m.name.clone(), m.incarnation, m.record);
        let mut j = self.journal();
        j.incarnations[record].instance_id = id;
        if !ready {
            j.not_ready.push(format!(
                "{name} (start {n}) not ready within {READY_TIMEOUT:?}"
            ));
        }
        ready
    }

    /// Starts member `i` again as a new incarnation and waits until ready.
    fn respawn(&mut self, i: usize) {
        let (name, n, builder) = {
            let m = &self.members[i];
            (m.name.clone(), m.incarnation + 1, m.builder.clone())
        };
        let (service, record) = self.spawn(&name, n, &builder);
        let m = &mut self.members[i];
        m.service = service;
        m.incarnation = n;
        m.record = record;
        self.await_ready(i);
    }

    /// Looks for processes that exited by themselves: records each and
    /// starts it again (a member at most [`MAX_RESPAWNS`] times).
    pub fn check(&mut self) {
        if let Some(st) = self.nats.exited() {
            self.nats_starts += 1;
            let log = self
                .nats
                .dir()
                .join(format!("nats-{}.log", self.nats_starts - 1));
            self.died(
                "nats-server".into(),
                self.nats_starts - 1,
                None,
                st.to_string(),
                &log,
            );
            let _ = catch(|| self.nats.restart());
        }
        if let Some(st) = self.redis.exited() {
            self.redis_starts += 1;
            let log = self
                .redis
                .dir()
                .join(format!("redis-{}.log", self.redis_starts - 1));
            self.died(
                "redis-server".into(),
                self.redis_starts - 1,
                None,
                st.to_string(),
                &log,
            );
            let _ = catch(|| self.redis.restart());
        }
        for i in 0..self.members.len() {
            let Some(st) = self.members[i].service.exited() else {
                continue;
            };
            let m = &self.members[i];
            if m.deaths >= MAX_RESPAWNS {
                continue;
            }
            let (name, n, record) = (m.name.clone(), m.incarnation, m.record);
            let log = m.service.log_path().to_path_buf();
            let id = {
                let mut j = self.journal();
                let inc = &mut j.incarnations[record];
                inc.ended = Some(Utc::now());
                inc.end = Some(format!("died: {st}"));
                inc.instance_id.clone()
            };
            self.died(name, n, id, st.to_string(), &log);
            self.members[i].deaths += 1;
            if self.members[i].deaths < MAX_RESPAWNS {
                self.respawn(i);
            }
        }
    }

    fn died(&self, name: String, incarnation: u32, id: Option<String>, status: String, log: &Path) {
        self.journal().deaths.push(Death {
            name,
            incarnation,
            instance_id: id,
            at: Utc::now(),
            status,
            log_tail: tail(log, 20),
        });
    }

    /// Keeps checking the processes for `d` (the length of a pause or a
    /// downtime; not a wait for a condition).
    pub fn idle(&mut self, d: Duration) {
        let until = Instant::now() + d;
        loop {
            self.check();
            let now = Instant::now();
            if now >= until {
                return;
            }
            std::thread::sleep(CHECK_EVERY.min(until - now));
        }
    }

    /// The coordinator that leads, per the coordinators' logs; else the
    /// `pick`-th one.
    fn coordinator(&self, pick: u64) -> usize {
        let coords: Vec<usize> = (0..self.members.len())
            .filter(|&i| self.members[i].role == Role::Coordinator)
            .collect();
        coords
            .iter()
            .filter_map(|&i| leading_since(&self.members[i].service.output()).map(|t| (t, i)))
            .max()
            .map(|(_, i)| i)
            .unwrap_or(coords[(pick % coords.len() as u64) as usize])
    }

    fn one_of(&self, role: Role, pick: u64) -> usize {
        let of: Vec<usize> = (0..self.members.len())
            .filter(|&i| self.members[i].role == role)
            .collect();
        of[(pick % of.len() as u64) as usize]
    }

    /// The `pick`-th worker among those running a task, else among all.
    fn worker(&self, pick: u64) -> usize {
        let busy: Vec<usize> = match &self.busy {
            Some(b) => {
                let b = b.lock().expect("busy");
                let j = self.journal();
                (0..self.members.len())
                    .filter(|&i| self.members[i].role == Role::Worker)
                    .filter(|&i| {
                        j.incarnations[self.members[i].record]
                            .instance_id
                            .as_ref()
                            .is_some_and(|id| b.get(id).is_some_and(|t| !t.is_empty()))
                    })
                    .collect()
            }
            None => Vec::new(),
        };
        if busy.is_empty() {
            self.one_of(Role::Worker, pick)
        } else {
            busy[(pick % busy.len() as u64) as usize]
        }
    }

    fn kill_member(&mut self, i: usize, hold: Duration) -> DateTime<Utc> {
        self.members[i].service.kill();
        let at = Utc::now();
        let record = self.members[i].record;
        {
            let mut j = self.journal();
            j.incarnations[record].ended = Some(at);
            j.incarnations[record].end = Some("killed".into());
        }
        self.idle(hold);
        self.respawn(i);
        at
    }

    fn pause_member(&mut self, i: usize, hold: Duration) -> DateTime<Utc> {
        self.members[i].service.pause();
        let from = Utc::now();
        self.idle(hold);
        self.members[i].service.resume();
        let to = Utc::now();
        let m = &self.members[i];
        let id = self.journal().incarnations[m.record]
            .instance_id
            .clone()
            .unwrap_or_default();
        let name = m.name.clone();
        self.journal().pauses.push((name, id, from, to));
        from
    }

    /// Injects one fault, start to end (restarts included).
    pub fn inject(&mut self, f: &PlannedFault) -> FaultRecord {
        let mut note = None;
        let (target, start) = match f.kind {
            FaultKind::KillCoordinator => {
                let i = self.coordinator(f.pick);
                (self.members[i].name.clone(), self.kill_member(i, f.hold))
            }
            FaultKind::KillWorker => {
                let i = self.worker(f.pick);
                (self.members[i].name.clone(), self.kill_member(i, f.hold))
            }
            FaultKind::KillFacilitator => {
                let i = self.one_of(Role::Facilitator, f.pick);
                (self.members[i].name.clone(), self.kill_member(i, f.hold))
            }
            FaultKind::KillCorrelator => {
                let i = self.one_of(Role::Correlator, f.pick);
                (self.members[i].name.clone(), self.kill_member(i, f.hold))
            }
            FaultKind::PauseCoordinator => {
                let i = self.coordinator(f.pick);
                (self.members[i].name.clone(), self.pause_member(i, f.hold))
            }
            FaultKind::PauseWorker => {
                let i = self.worker(f.pick);
                (self.members[i].name.clone(), self.pause_member(i, f.hold))
            }
            FaultKind::KillNats => {
                self.nats.kill();
                let start = Utc::now();
                self.idle(f.hold);
                self.nats_starts += 1;
                if let Err(e) = catch(|| self.nats.restart()) {
                    note = Some(format!("restart failed: {e}"));
                }
                ("nats-server".to_string(), start)
            }
            FaultKind::FlushRedis => {
                let start = Utc::now();
                match catch(|| self.redis.command("FLUSHALL")) {
                    Ok(reply) if reply.starts_with("+OK") => {}
                    Ok(reply) => note = Some(format!("FLUSHALL answered {}", reply.trim())),
                    Err(e) => note = Some(format!("FLUSHALL failed: {e}")),
                }
                let end = Utc::now();
                self.journal().redis_losses.push((start, end));
                ("redis-server".to_string(), start)
            }
            FaultKind::KillRedis => {
                self.redis.kill();
                let start = Utc::now();
                self.idle(f.hold);
                self.redis_starts += 1;
                if let Err(e) = catch(|| self.redis.restart()) {
                    note = Some(format!("restart failed: {e}"));
                }
                let end = Utc::now();
                self.journal().redis_losses.push((start, end));
                ("redis-server".to_string(), start)
            }
        };
        let record = FaultRecord {
            kind: f.kind,
            target,
            start,
            end: Utc::now(),
            hold: f.hold,
            note,
        };
        self.journal().faults.push(record.clone());
        record
    }

    /// Keeps the server and service directories after the run.
    pub fn keep_files(&mut self) {
        self.nats.keep_files();
        self.redis.keep_files();
    }
}

/// Runs `f`, turning a panic (the harness panics when a server does not
/// come back) into an error.
fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_id_comes_from_the_ready_line() {
        let log = "2026-11-25T12:00:00Z  INFO caucus_shared::service: connecting to NATS service=\"worker\" instance_id=\"worker-aaaaaaaaaaaa\"\n\
                   2026-11-25T12:00:01Z  INFO caucus_shared::service: service ready service=worker instance_id=worker-0123456789ab nats=nats://127.0.0.1:1\n";
        assert_eq!(
            instance_id(log, "worker").as_deref(),
            Some("worker-0123456789ab")
        );
        assert_eq!(instance_id("nothing ready", "worker"), None);
    }

    #[test]
    fn the_leader_is_the_last_to_say_leading() {
        let a = "2026-11-25T12:00:01Z  INFO caucus_coordinator::runtime: leading instance_id=coordinator-1 epoch=1\n";
        assert_eq!(leading_since(a).as_deref(), Some("2026-11-25T12:00:01Z"));
        let api = format!("{a}2026-11-25T12:00:02Z  INFO api{{operation=status}}: caucus_shared::nats::api: API error code=standby this coordinator is standing by (not the leader)\n");
        assert!(leading_since(&api).is_some());
        let b = format!("{a}2026-11-25T12:00:05Z  WARN caucus_coordinator::runtime: stepped down; standing by\n");
        assert_eq!(leading_since(&b), None);
    }
}
