//! Capacity-aware list scheduling of the instantiated DAG, as an
//! event-driven simulation.
//!
//! Tasks are numbered `item * L + local`, where `local` indexes the per-item
//! template (stages in declaration order, fan-out copies in shard order), so
//! the instance DAG is never materialised: successors come from the template.
//!
//! At each event time, every agent type with a free slot starts ready tasks
//! in priority order: longest remaining path to the sink first (critical
//! path first), ties by item order, then stage declaration order, then shard.
//! Time then advances to the next completion. Heaps keep every step
//! logarithmic, so 60 000 tasks plan in milliseconds.
//!
//! Look-ahead (the seed's "consider the next 3 time slots"): list scheduling
//! is greedy and non-preemptive, so it can hand the last free slot of an agent
//! type to a low-priority task just before a higher-priority task of the same
//! type becomes ready, delaying the critical chain behind it. When exactly
//! one slot is free, we look at the pending tasks of that agent type (all
//! dependencies started, so their ready time is known) that become ready
//! within the next `lookahead` distinct completion times and have strictly
//! higher priority. For the best such task U against the ready task T we
//! compare the lower bound on finishing both chains (start + remaining path):
//! run T now and U waits for the first slot to free, versus hold the slot
//! idle for U and T waits. The slot is held only if that bound is strictly
//! better. A held slot always has a running predecessor of U behind it, so
//! time keeps advancing; the decision is re-taken at every event.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// An f64 with a total order, for heap and map keys.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Time(f64);
impl Eq for Time {}
impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Time {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// One task of the per-item template.
#[derive(Debug, Clone)]
pub(crate) struct LocalTask {
    /// Index of the stage in the spec.
    pub stage: usize,
    /// Shard index for fan-out stages.
    pub shard: Option<u32>,
    /// Planned duration (0 for gates).
    pub duration: f64,
    /// Longest remaining path including this task.
    pub tail: f64,
    /// Dense priority rank: 0 = longest remaining path.
    pub rank: u32,
    /// Index into [`Template::agents`]; `None` for gates.
    pub agent: Option<usize>,
    /// Number of template predecessors.
    pub npred: u32,
}

/// The per-item task template with successor lists in CSR form.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    pub tasks: Vec<LocalTask>,
    /// `succ[succ_start[l]..succ_start[l + 1]]` are the successors of `l`.
    pub succ_start: Vec<usize>,
    pub succ: Vec<u32>,
    /// Agent type names, sorted.
    pub agents: Vec<String>,
}

impl Template {
    fn successors(&self, local: usize) -> &[u32] {
        &self.succ[self.succ_start[local]..self.succ_start[local + 1]]
    }
}

/// The outcome of one simulation, indexed by global task number.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    pub start: Vec<f64>,
    pub end: Vec<f64>,
    /// When the last dependency completed.
    pub ready: Vec<f64>,
    /// Lane within the agent type (`u32::MAX` for gates).
    pub slot: Vec<u32>,
    pub makespan: f64,
}

/// Priority key: lower sorts first.
type Key = (u32, u32, u32);

struct Sim<'a> {
    t: &'a Template,
    l: usize,
    lookahead: usize,
    now: f64,
    unfinished: Vec<u32>,
    unstarted: Vec<u32>,
    pred_end: Vec<f64>,
    out: Schedule,
    ready: Vec<BinaryHeap<Reverse<Key>>>,
    ready_gates: Vec<usize>,
    pending: Vec<BTreeSet<Key>>,
    free: Vec<BinaryHeap<Reverse<u32>>>,
    running_ends: Vec<BinaryHeap<Reverse<Time>>>,
    horizon: BTreeMap<Time, u32>,
    events: BinaryHeap<Reverse<(Time, usize)>>,
}

/// Simulates `items` instances of `t` with `capacity[a]` slots per agent type.
pub(crate) fn simulate(t: &Template, items: usize, capacity: &[u32], lookahead: usize) -> Schedule {
    let l = t.tasks.len();
    let n = items * l;
    let na = t.agents.len();
    let mut per_agent = vec![0usize; na];
    for task in &t.tasks {
        if let Some(a) = task.agent {
            per_agent[a] += items;
        }
    }
    // Lanes beyond the number of tasks of a type are never used.
    let free = (0..na)
        .map(|a| {
            let lanes = (capacity[a] as usize).min(per_agent[a]) as u32;
            (0..lanes).map(Reverse).collect()
        })
        .collect();
    let unfinished: Vec<u32> = (0..n).map(|g| t.tasks[g % l].npred).collect();
    let mut sim = Sim {
        t,
        l,
        lookahead,
        now: 0.0,
        unstarted: unfinished.clone(),
        unfinished,
        pred_end: vec![0.0; n],
        out: Schedule {
            start: vec![0.0; n],
            end: vec![0.0; n],
            ready: vec![0.0; n],
            slot: vec![u32::MAX; n],
            makespan: 0.0,
        },
        ready: vec![BinaryHeap::new(); na],
        ready_gates: Vec::new(),
        pending: vec![BTreeSet::new(); na],
        free,
        running_ends: vec![BinaryHeap::new(); na],
        horizon: BTreeMap::new(),
        events: BinaryHeap::new(),
    };
    for g in 0..n {
        if t.tasks[g % l].npred == 0 {
            sim.make_ready(g);
        }
    }
    loop {
        sim.pass_gates();
        sim.dispatch();
        let Some(Reverse((Time(at), g))) = sim.events.pop() else {
            break;
        };
        sim.now = at;
        sim.complete(g);
        while let Some(&Reverse((Time(next), g))) = sim.events.peek() {
            if next != at {
                break;
            }
            sim.events.pop();
            sim.complete(g);
        }
    }
    sim.out.makespan = sim.now;
    sim.out
}

impl Sim<'_> {
    fn key(&self, g: usize) -> Key {
        let local = g % self.l;
        (self.t.tasks[local].rank, (g / self.l) as u32, local as u32)
    }

    fn global(&self, key: Key) -> usize {
        key.1 as usize * self.l + key.2 as usize
    }

    fn make_ready(&mut self, g: usize) {
        self.out.ready[g] = self.now;
        let key = self.key(g);
        match self.t.tasks[g % self.l].agent {
            Some(a) => {
                if self.lookahead > 0 {
                    self.pending[a].remove(&key);
                }
                self.ready[a].push(Reverse(key));
            }
            None => self.ready_gates.push(g),
        }
    }

    /// Gates are instantaneous: pass them (and gates they release) now, so
    /// their dependents compete for slots at this very event.
    fn pass_gates(&mut self) {
        while let Some(g) = self.ready_gates.pop() {
            self.out.start[g] = self.now;
            self.out.end[g] = self.now;
            let local = g % self.l;
            let base = g - local;
            for &s in self.t.successors(local) {
                let gs = base + s as usize;
                self.unstarted[gs] -= 1;
                self.unfinished[gs] -= 1;
                self.pred_end[gs] = self.pred_end[gs].max(self.now);
                if self.unfinished[gs] == 0 {
                    self.make_ready(gs);
                } else if self.unstarted[gs] == 0 {
                    self.note_pending(gs);
                }
            }
        }
    }

    /// Starts ready tasks in global priority order across agent types, so a
    /// higher-priority start (which may make another task pending) is known
    /// before a lower-priority look-ahead decision is taken.
    fn dispatch(&mut self) {
        let na = self.t.agents.len();
        let mut held = vec![false; na];
        loop {
            let best = (0..na)
                .filter(|&a| !held[a] && !self.free[a].is_empty())
                .filter_map(|a| self.ready[a].peek().map(|&Reverse(k)| (k, a)))
                .min();
            let Some((top, a)) = best else {
                return;
            };
            if self.lookahead > 0 && self.free[a].len() == 1 && self.should_hold(a, top) {
                held[a] = true;
                continue;
            }
            self.ready[a].pop();
            let g = self.global(top);
            self.start(g);
        }
    }

    /// Whether to keep the last free slot of `a` idle rather than start `top`.
    fn should_hold(&self, a: usize, top: Key) -> bool {
        let Some(&Time(horizon)) = self
            .horizon
            .keys()
            .take(self.lookahead)
            .fold(None, |_, k| Some(k))
        else {
            return false;
        };
        let task_t = &self.t.tasks[top.2 as usize];
        let candidate = self.pending[a]
            .iter()
            .take_while(|k| k.0 < top.0)
            .map(|&k| self.global(k))
            .find(|&g| self.pred_end[g] <= horizon);
        let Some(u) = candidate else {
            return false;
        };
        let task_u = &self.t.tasks[u % self.l];
        let ready_u = self.pred_end[u];
        let next_end = self.running_ends[a]
            .peek()
            .map_or(f64::INFINITY, |r| (r.0).0);
        let slot_if_run = (self.now + task_t.duration).min(next_end);
        if slot_if_run <= ready_u {
            return false;
        }
        let bound_run = (self.now + task_t.tail).max(slot_if_run + task_u.tail);
        let t_after_hold = (ready_u + task_u.duration).min(next_end);
        let bound_hold = (ready_u + task_u.tail).max(t_after_hold + task_t.tail);
        bound_hold < bound_run - super::critical_path::eps(bound_run)
    }

    /// Every dependency of `g` has started (so its ready time is known) but
    /// one is still running: candidate for the look-ahead.
    fn note_pending(&mut self, g: usize) {
        if self.lookahead == 0 {
            return;
        }
        if let Some(a) = self.t.tasks[g % self.l].agent {
            let key = self.key(g);
            self.pending[a].insert(key);
        }
    }

    fn start(&mut self, g: usize) {
        let local = g % self.l;
        let task = &self.t.tasks[local];
        let end = self.now + task.duration;
        self.out.start[g] = self.now;
        self.out.end[g] = end;
        if let Some(a) = task.agent {
            // dispatch only starts a task when a lane is free.
            let Reverse(lane) = self.free[a].pop().unwrap_or(Reverse(u32::MAX));
            self.out.slot[g] = lane;
            self.running_ends[a].push(Reverse(Time(end)));
        }
        *self.horizon.entry(Time(end)).or_insert(0) += 1;
        self.events.push(Reverse((Time(end), g)));
        let base = g - local;
        for &s in self.t.successors(local) {
            let gs = base + s as usize;
            self.unstarted[gs] -= 1;
            self.pred_end[gs] = self.pred_end[gs].max(end);
            if self.unstarted[gs] == 0 && self.unfinished[gs] > 0 {
                self.note_pending(gs);
            }
        }
    }

    fn complete(&mut self, g: usize) {
        let local = g % self.l;
        let end = self.out.end[g];
        if let Some(a) = self.t.tasks[local].agent {
            self.free[a].push(Reverse(self.out.slot[g]));
            self.running_ends[a].pop();
        }
        if let Some(count) = self.horizon.get_mut(&Time(end)) {
            *count -= 1;
            if *count == 0 {
                self.horizon.remove(&Time(end));
            }
        }
        let base = g - local;
        for &s in self.t.successors(local) {
            let gs = base + s as usize;
            self.unfinished[gs] -= 1;
            if self.unfinished[gs] == 0 {
                self.make_ready(gs);
            }
        }
    }
}
