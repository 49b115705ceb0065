//! Keeping a slot's capacity lease alive, and knowing when it is not.
//!
//! A [`LeaseKeeper`] renews the lease every third of its ttl in the
//! background, for as long as the slot holds it (idle or running a task).
//! The pure [`LeaseState`] decides, from the instants the renewals were
//! sent and how they were answered:
//!
//! - *healthy*: the last renewal succeeded: the slot may take tasks;
//! - *failing*: the last attempt failed (Redis unreachable, timed out): the
//!   slot takes no new task until a renewal succeeds again, but a running
//!   task carries on while the lease is certainly still live;
//! - *lost*: Redis said the lease is gone, or no renewal was confirmed for
//!   `ttl − safety` since the last confirmed one was *sent* (the server set
//!   the expiry no earlier than that send, so the lease is still live in
//!   Redis until at least `safety` later). The running task is cancelled
//!   before anybody else can be granted its slot.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use caucus_shared::redis::{CapacitySemaphore, Lease, Renewed};
use caucus_shared::service::Tasks;

/// Why a lease counts as lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lost {
    /// Redis answered that the lease expired or was removed.
    Gone,
    /// No renewal confirmed within `ttl − safety` of the last confirmed one.
    Expired,
}

/// How one renewal attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// Extended, or re-created after Redis lost its data.
    Renewed,
    /// Redis says the lease is gone.
    Gone,
    /// No answer (error or time-out).
    Failed,
}

/// The lease's standing as the slot sees it; pure, driven by instants.
#[derive(Debug, Clone)]
pub(crate) struct LeaseState {
    ttl: Duration,
    /// When the last confirmed grant or renewal was sent.
    confirmed_at: Instant,
    failing: bool,
    lost: Option<Lost>,
}

impl LeaseState {
    /// A lease whose grant was requested at `granted_at`.
    pub(crate) fn new(ttl: Duration, granted_at: Instant) -> Self {
        LeaseState {
            ttl,
            confirmed_at: granted_at,
            failing: false,
            lost: None,
        }
    }

    /// Margin kept between the local deadline and the earliest server
    /// expiry: covers the time it takes to cancel a handler and the drift
    /// between the two clocks' rates.
    pub(crate) fn safety(&self) -> Duration {
        self.ttl / 5
    }

    /// How often a healthy lease is renewed.
    pub(crate) fn period(&self) -> Duration {
        self.ttl / 3
    }

    /// How soon a failed renewal is tried again.
    pub(crate) fn retry(&self) -> Duration {
        (self.ttl / 10).max(Duration::from_millis(10))
    }

    /// The longest one renewal call may take before it counts as failed.
    pub(crate) fn call_timeout(&self) -> Duration {
        self.period().max(Duration::from_millis(10))
    }

    /// Past this instant the lease is lost unless a renewal confirmed it.
    pub(crate) fn deadline(&self) -> Instant {
        self.confirmed_at + self.ttl.saturating_sub(self.safety())
    }

    /// When the next renewal attempt is due.
    pub(crate) fn next_attempt(&self, last_attempt: Instant) -> Instant {
        if self.failing {
            last_attempt + self.retry()
        } else {
            self.confirmed_at + self.period()
        }
    }

    /// Records the outcome of an attempt sent at `sent_at`.
    pub(crate) fn on_attempt(&mut self, sent_at: Instant, outcome: Attempt) {
        if self.lost.is_some() {
            return;
        }
        match outcome {
            Attempt::Renewed => {
                // A reply can only confirm from the moment it was asked.
                if sent_at > self.confirmed_at {
                    self.confirmed_at = sent_at;
                }
                self.failing = false;
            }
            Attempt::Gone => self.lost = Some(Lost::Gone),
            Attempt::Failed => self.failing = true,
        }
    }

    /// Whether the lease is lost at `now` (and records it).
    pub(crate) fn check(&mut self, now: Instant) -> Option<Lost> {
        if self.lost.is_none() && now >= self.deadline() {
            self.lost = Some(Lost::Expired);
        }
        self.lost
    }

    /// Whether the slot may take a new task at `now`.
    pub(crate) fn may_take_tasks(&self, now: Instant) -> bool {
        !self.failing && self.lost.is_none() && now < self.deadline()
    }
}

/// What the slot reads: may it take tasks, and is the lease lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct View {
    pub(crate) usable: bool,
    pub(crate) lost: Option<Lost>,
}

/// Renews one lease in the background until stopped or lost.
pub(crate) struct LeaseKeeper {
    view: watch::Receiver<View>,
    lost: CancellationToken,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Lease>,
}

impl LeaseKeeper {
    /// Starts keeping `lease`, whose grant was requested at `granted_at`.
    pub(crate) fn start(
        tasks: &Tasks,
        sem: CapacitySemaphore,
        lease: Lease,
        ttl: Duration,
        granted_at: Instant,
    ) -> Self {
        let state = LeaseState::new(ttl, granted_at);
        let (tx, view) = watch::channel(View {
            usable: true,
            lost: None,
        });
        let lost = CancellationToken::new();
        let stop = CancellationToken::new();
        let task = tasks.spawn_named(
            "lease-keeper",
            keep(sem, lease, ttl, state, tx, lost.clone(), stop.clone()),
        );
        LeaseKeeper {
            view,
            lost,
            stop,
            task,
        }
    }

    /// Cancelled once the lease is lost.
    pub(crate) fn lost(&self) -> &CancellationToken {
        &self.lost
    }

    /// The current view.
    pub(crate) fn view(&self) -> View {
        *self.view.borrow()
    }

    /// Waits until the slot may take tasks (`true`) or the lease is lost or
    /// `cancel` fires (`false`).
    pub(crate) async fn usable(&self, cancel: &CancellationToken) -> bool {
        let mut rx = self.view.clone();
        loop {
            let v = *rx.borrow_and_update();
            if v.lost.is_some() {
                return false;
            }
            if v.usable {
                return true;
            }
            tokio::select! {
                _ = cancel.cancelled() => return false,
                r = rx.changed() => if r.is_err() { return false },
            }
        }
    }

    /// Stops renewing; returns the lease as last renewed (its epoch may
    /// have moved after Redis lost its data).
    pub(crate) async fn stop(self) -> Option<Lease> {
        self.stop.cancel();
        self.task.await.ok()
    }
}

async fn keep(
    sem: CapacitySemaphore,
    mut lease: Lease,
    ttl: Duration,
    mut state: LeaseState,
    tx: watch::Sender<View>,
    lost: CancellationToken,
    stop: CancellationToken,
) -> Lease {
    let agent_type = sem.agent_type().to_string();
    let mut last_attempt = Instant::now();
    loop {
        if let Some(why) = state.check(Instant::now()) {
            tracing::warn!(agent_type = %agent_type, holder = %lease.holder_id, reason = ?why,
                "capacity lease lost; cancelling the running task and taking no new one");
            let _ = tx.send(View {
                usable: false,
                lost: Some(why),
            });
            lost.cancel();
            return lease;
        }
        let due = state.next_attempt(last_attempt).min(state.deadline());
        tokio::select! {
            _ = stop.cancelled() => return lease,
            _ = tokio::time::sleep_until(due) => {}
        }
        if state.check(Instant::now()).is_some() {
            continue;
        }
        let sent_at = Instant::now();
        last_attempt = sent_at;
        let mut renewed = lease.clone();
        let call = sem.renew_lease(&mut renewed, ttl);
        let outcome = tokio::select! {
            _ = stop.cancelled() => return lease,
            // A call still unanswered at the deadline cannot save the lease.
            _ = tokio::time::sleep_until(state.deadline()) => Attempt::Failed,
            r = tokio::time::timeout(state.call_timeout(), call) => match r {
                Ok(Ok(Renewed::Extended)) => Attempt::Renewed,
                Ok(Ok(Renewed::Recreated)) => {
                    tracing::info!(agent_type = %agent_type, holder = %renewed.holder_id,
                        "Redis lost its data; capacity lease re-registered");
                    Attempt::Renewed
                }
                Ok(Ok(Renewed::Gone)) => Attempt::Gone,
                Ok(Err(e)) => {
                    tracing::warn!(agent_type = %agent_type, error = %e, "lease renewal failed; taking no new task until it succeeds");
                    Attempt::Failed
                }
                Err(_) => {
                    tracing::warn!(agent_type = %agent_type, "lease renewal timed out; taking no new task until it succeeds");
                    Attempt::Failed
                }
            },
        };
        if outcome == Attempt::Renewed {
            lease = renewed;
        }
        let was_failing = !state.may_take_tasks(sent_at);
        state.on_attempt(sent_at, outcome);
        let now = Instant::now();
        let usable = state.may_take_tasks(now);
        if usable && was_failing {
            tracing::info!(agent_type = %agent_type, "lease renewal succeeded again; taking tasks");
        }
        let _ = tx.send(View {
            usable,
            lost: state.check(now),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_millis(1000);

    #[test]
    fn a_renewed_lease_stays_usable_and_its_deadline_moves() {
        let t0 = Instant::now();
        let mut s = LeaseState::new(TTL, t0);
        assert_eq!(s.deadline(), t0 + Duration::from_millis(800));
        assert!(s.may_take_tasks(t0));
        assert_eq!(s.next_attempt(t0), t0 + TTL / 3);
        let sent = t0 + Duration::from_millis(333);
        s.on_attempt(sent, Attempt::Renewed);
        assert_eq!(s.deadline(), sent + Duration::from_millis(800));
        assert_eq!(s.check(t0 + Duration::from_millis(900)), None);
        assert!(s.may_take_tasks(t0 + Duration::from_millis(900)));
    }

    #[test]
    fn a_failing_renewal_stops_taking_tasks_until_one_succeeds() {
        let t0 = Instant::now();
        let mut s = LeaseState::new(TTL, t0);
        let t1 = t0 + Duration::from_millis(333);
        s.on_attempt(t1, Attempt::Failed);
        assert!(!s.may_take_tasks(t1), "no new task while renewal fails");
        assert_eq!(s.check(t1), None, "but the lease is still live");
        assert_eq!(s.next_attempt(t1), t1 + Duration::from_millis(100));
        // The deadline is still the one of the grant.
        assert_eq!(s.deadline(), t0 + Duration::from_millis(800));
        let t2 = t1 + Duration::from_millis(100);
        s.on_attempt(t2, Attempt::Renewed);
        assert!(s.may_take_tasks(t2));
        assert_eq!(s.deadline(), t2 + Duration::from_millis(800));
    }

    #[test]
    fn no_confirmation_within_ttl_minus_safety_is_lost() {
        let t0 = Instant::now();
        let mut s = LeaseState::new(TTL, t0);
        s.on_attempt(t0 + Duration::from_millis(333), Attempt::Failed);
        s.on_attempt(t0 + Duration::from_millis(433), Attempt::Failed);
        assert_eq!(s.check(t0 + Duration::from_millis(799)), None);
        assert_eq!(
            s.check(t0 + Duration::from_millis(800)),
            Some(Lost::Expired)
        );
        // A late answer to an old request cannot bring it back.
        s.on_attempt(t0 + Duration::from_millis(700), Attempt::Renewed);
        assert_eq!(
            s.check(t0 + Duration::from_millis(801)),
            Some(Lost::Expired)
        );
        assert!(!s.may_take_tasks(t0 + Duration::from_millis(801)));
    }

    #[test]
    fn redis_saying_gone_is_lost_at_once() {
        let t0 = Instant::now();
        let mut s = LeaseState::new(TTL, t0);
        s.on_attempt(t0 + Duration::from_millis(10), Attempt::Gone);
        assert_eq!(s.check(t0 + Duration::from_millis(11)), Some(Lost::Gone));
        assert!(!s.may_take_tasks(t0 + Duration::from_millis(11)));
    }

    #[test]
    fn an_old_reply_never_moves_the_deadline_back() {
        let t0 = Instant::now();
        let mut s = LeaseState::new(TTL, t0 + Duration::from_millis(500));
        s.on_attempt(t0, Attempt::Renewed);
        assert_eq!(
            s.deadline(),
            t0 + Duration::from_millis(500) + Duration::from_millis(800)
        );
    }

    #[test]
    fn the_deadline_is_before_the_earliest_server_expiry() {
        // The server computes expiry = (its now, no earlier than the send)
        // + ttl; the local deadline is the send + ttl − safety.
        let s = LeaseState::new(TTL, Instant::now());
        assert!(s.safety() > Duration::ZERO);
        assert!(s.period() + s.retry() < TTL - s.safety());
    }
}
