//! [`Tasks`]: the tracker of a process's spawned work. Shutdown waits for
//! every task in it, and a task that panics is logged and marks the
//! process's health degraded (component [`RUNTIME`]) instead of dying
//! silently.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use crate::health::Health;

/// Health component of a process's runtime tasks: degraded once one
/// panicked, and kept so until the process restarts (a panic is a bug to
/// look at).
pub const RUNTIME: &str = "runtime";

/// Spawns tracked, supervised tasks; cheap to clone.
#[derive(Clone, Debug)]
pub struct Tasks {
    tracker: TaskTracker,
    health: Health,
}

impl Tasks {
    /// An open tracker whose panics mark `health`.
    pub fn new(health: Health) -> Self {
        Tasks {
            tracker: TaskTracker::new(),
            health,
        }
    }

    /// Runs `task` (see [`Tasks::spawn_named`]; logged as `task`).
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_named("task", task)
    }

    /// Runs `task` as tracked work. If it panics, the panic is logged with
    /// `name`, health component [`RUNTIME`] turns degraded, and the panic
    /// goes on to the returned handle as it would without supervision.
    pub fn spawn_named<F>(&self, name: &'static str, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let health = self.health.clone();
        self.tracker.spawn(async move {
            match AssertUnwindSafe(task).catch_unwind().await {
                Ok(out) => out,
                Err(panic) => {
                    let why = panic_message(panic.as_ref());
                    tracing::error!(task = name, reason = %why, "runtime task panicked");
                    health.degraded(RUNTIME, format!("runtime task `{name}` panicked: {why}"));
                    std::panic::resume_unwind(panic)
                }
            }
        })
    }

    /// The underlying tracker (for code that takes a `TaskTracker`; tasks
    /// spawned on it directly are tracked but not supervised).
    pub fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    /// The health that panics mark.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// Accepts no more waiting: [`Tasks::wait`] returns once the running
    /// tasks are done.
    pub fn close(&self) -> bool {
        self.tracker.close()
    }

    /// Waits until the tracker is closed and every task has ended.
    pub async fn wait(&self) {
        self.tracker.wait().await
    }

    /// Tasks still running.
    pub fn len(&self) -> usize {
        self.tracker.len()
    }

    /// `true` when no task is running.
    pub fn is_empty(&self) -> bool {
        self.tracker.is_empty()
    }
}

/// The text of a panic's payload (`panic!("…")` gives a `&str` or a
/// `String`).
pub fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_is_logged_marks_health_and_reaches_the_handle() {
        let health = Health::new();
        let tasks = Tasks::new(health.clone());
        let fine = tasks.spawn_named("fine", async { 7 });
        let broken = tasks.spawn_named("broken", async { panic!("boom") });
        assert_eq!(fine.await.unwrap(), 7);
        assert!(broken.await.unwrap_err().is_panic());
        assert_eq!(
            health.reason(RUNTIME).as_deref(),
            Some("runtime task `broken` panicked: boom")
        );
        tasks.close();
        tasks.wait().await;
        assert!(tasks.is_empty());
    }
}
