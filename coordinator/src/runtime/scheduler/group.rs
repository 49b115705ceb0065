//! One loop for every partition a process holds (docs/PARTITIONS.md).
//!
//! Each partition keeps its own scheduler, lease and consumers; only the
//! loop that drives them is shared. Run one task each, the schedulers of a
//! process woke and pumped apart, so each pump published, wrote and
//! acknowledged a few events on its own, and every per-pump cost (the
//! client's flushes, the server's reads, the task switches) was paid
//! once per partition. Driven together, the schedulers woken at once
//! take their turns side by side: their dispatches, writes and
//! acknowledgements leave in the same flush, as one scheduler's would.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::join_all;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, Interval, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::{Command, Scheduler};

/// Hands schedulers to the process's one loop (cheap to clone).
#[derive(Clone)]
pub struct SchedulerGroup {
    members: mpsc::UnboundedSender<Member>,
}

impl SchedulerGroup {
    /// Starts the loop on `tasks`; it ends once every handle is dropped
    /// and its last scheduler stopped.
    pub fn start(tasks: &caucus_shared::service::Tasks) -> Self {
        let (members, rx) = mpsc::unbounded_channel();
        tasks.spawn_named("schedulers", drive(rx));
        SchedulerGroup { members }
    }

    /// Runs `sched` in the loop until `stop` (or its channel closes), as
    /// [`Scheduler::run`] would on a task of its own, and then stores
    /// what it can. Runs it alone when the loop is gone.
    ///
    /// The scheduler travels boxed: moved by value through these frames,
    /// a debug build's stack held several copies of it and overflowed.
    pub async fn run(
        &self,
        sched: Box<Scheduler>,
        rx: mpsc::Receiver<Command>,
        stop: CancellationToken,
    ) {
        let (done, back) = oneshot::channel();
        let member = Member::new(sched, rx, stop.clone(), done);
        if let Err(mpsc::error::SendError(m)) = self.members.send(member) {
            return Box::pin(m.sched.run(m.rx, stop)).await;
        }
        match back.await {
            Ok((mut sched, rx)) => {
                Box::pin(sched.finish()).await;
                drop(rx);
            }
            // The loop panicked (its health says so): the scheduler went
            // with it, as in a crash; its unacknowledged events are
            // redelivered to the partition's next term.
            Err(_) => tracing::error!("the scheduling loop ended under a running term"),
        }
    }
}

/// A scheduler in the loop, with what wakes it.
struct Member {
    sched: Box<Scheduler>,
    rx: mpsc::Receiver<Command>,
    tick: Interval,
    /// The held-back write's timer, armed for `armed`.
    held: Pin<Box<Sleep>>,
    armed: Option<Instant>,
    stop: Pin<Box<WaitForCancellationFutureOwned>>,
    done: oneshot::Sender<(Box<Scheduler>, mpsc::Receiver<Command>)>,
}

/// What a member's turn takes: the command and tick that woke it, or its
/// stop (which wins: a stopped scheduler takes no further turn). A member
/// woken only by its held-back write takes a turn with neither.
#[derive(Default)]
struct Wakes {
    cmd: Option<Command>,
    ticked: bool,
    stop: bool,
}

impl Member {
    fn new(
        sched: Box<Scheduler>,
        rx: mpsc::Receiver<Command>,
        stop: CancellationToken,
        done: oneshot::Sender<(Box<Scheduler>, mpsc::Receiver<Command>)>,
    ) -> Self {
        Member {
            tick: sched.ticker(),
            sched,
            rx,
            held: Box::pin(tokio::time::sleep_until(Instant::now())),
            armed: None,
            stop: Box::pin(stop.cancelled_owned()),
            done,
        }
    }

    /// Everything that woke this member, or `Pending` (with every source
    /// registered for a wake-up).
    fn poll_wakes(&mut self, cx: &mut Context<'_>) -> Poll<Wakes> {
        let mut w = Wakes::default();
        if self.stop.as_mut().poll(cx).is_ready() {
            w.stop = true;
            return Poll::Ready(w);
        }
        // The tick before the commands: under a steady flow of events
        // there is always a command, and the tick must still come.
        w.ticked = self.tick.poll_tick(cx).is_ready();
        if self.armed != self.sched.next_persist {
            self.armed = self.sched.next_persist;
            if let Some(at) = self.armed {
                self.held.as_mut().reset(at);
            }
        }
        // Nothing to carry: the turn's pump writes what is due.
        let due = self.armed.is_some() && self.held.as_mut().poll(cx).is_ready();
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(cmd)) => w.cmd = Some(cmd),
            Poll::Ready(None) => w.stop = true,
            Poll::Pending => {}
        }
        if w.stop || w.ticked || due || w.cmd.is_some() {
            Poll::Ready(w)
        } else {
            Poll::Pending
        }
    }

    async fn turn(&mut self, w: Wakes) {
        Box::pin(self.sched.turn(w.cmd, &mut self.rx, w.ticked)).await;
    }
}

/// The loop: waits until some members wake, lets them take their turns
/// side by side, and hands each stopped one back to its term.
async fn drive(mut arrivals: mpsc::UnboundedReceiver<Member>) {
    let mut members: Vec<Member> = Vec::new();
    let mut open = true;
    loop {
        let woken: Vec<(usize, Wakes)> = std::future::poll_fn(|cx| {
            while open {
                match arrivals.poll_recv(cx) {
                    Poll::Ready(Some(m)) => members.push(m),
                    Poll::Ready(None) => open = false,
                    Poll::Pending => break,
                }
            }
            let woken: Vec<(usize, Wakes)> = members
                .iter_mut()
                .enumerate()
                .filter_map(|(i, m)| match m.poll_wakes(cx) {
                    Poll::Ready(w) => Some((i, w)),
                    Poll::Pending => None,
                })
                .collect();
            if !woken.is_empty() || (!open && members.is_empty()) {
                Poll::Ready(woken)
            } else {
                Poll::Pending
            }
        })
        .await;
        if woken.is_empty() {
            return;
        }
        let mut stopped = Vec::new();
        let mut turns: Vec<Option<Wakes>> = (0..members.len()).map(|_| None).collect();
        for (i, w) in woken {
            if w.stop {
                stopped.push(i);
            } else {
                turns[i] = Some(w);
            }
        }
        join_all(
            members
                .iter_mut()
                .zip(turns)
                .filter_map(|(m, w)| Some(m.turn(w?))),
        )
        .await;
        stopped.sort_unstable();
        for i in stopped.into_iter().rev() {
            let m = members.swap_remove(i);
            let _ = m.done.send((m.sched, m.rx));
        }
    }
}
