//! The tasks of one leadership term, supervised: a task that panics or
//! ends while the term goes on ends the term and marks the process's
//! health, instead of leaving the scheduler without its events or
//! capacity readings.

use std::collections::HashMap;
use std::future::Future;

use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;

use caucus_shared::health::Health;
use caucus_shared::service::panic_message;

/// Health component of the coordinator's runtime tasks (the one every
/// process's supervised tasks mark).
pub use caucus_shared::service::RUNTIME;

/// The running tasks of a term, by name.
pub struct TermTasks {
    set: JoinSet<()>,
    names: HashMap<Id, &'static str>,
    term: CancellationToken,
    health: Health,
}

impl TermTasks {
    /// No tasks yet; `term` is cancelled when one fails.
    pub fn new(term: CancellationToken, health: Health) -> Self {
        TermTasks {
            set: JoinSet::new(),
            names: HashMap::new(),
            term,
            health,
        }
    }

    /// Runs `task` as part of the term.
    pub fn spawn<F>(&mut self, name: &'static str, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let handle = self.set.spawn(task);
        self.names.insert(handle.id(), name);
    }

    /// Waits for every task. One that panics, or returns before the term
    /// was cancelled, is logged, marks health degraded (component
    /// [`RUNTIME`], kept until the process restarts: a panic is a bug to
    /// look at) and cancels the term, so the leadership loop starts a
    /// fresh one. Returns the names of the tasks that failed.
    pub async fn supervise(mut self) -> Vec<&'static str> {
        let mut failed = Vec::new();
        while let Some(joined) = self.set.join_next_with_id().await {
            let (id, why) = match joined {
                Ok((id, ())) if !self.term.is_cancelled() => {
                    (id, "ended while the term went on".to_string())
                }
                Ok(_) => continue,
                Err(e) if e.is_panic() => {
                    let id = e.id();
                    (id, format!("panicked: {}", panic_message(&*e.into_panic())))
                }
                Err(_) => continue,
            };
            let name = self.names.get(&id).copied().unwrap_or("?");
            tracing::error!(task = name, reason = %why, "coordinator runtime task failed; ending this term");
            self.health
                .degraded(RUNTIME, format!("runtime task `{name}` {why}"));
            failed.push(name);
            self.term.cancel();
        }
        failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_task_ends_the_term_and_degrades_health() {
        let term = CancellationToken::new();
        let health = Health::new();
        let mut tasks = TermTasks::new(term.clone(), health.clone());
        let t = term.clone();
        tasks.spawn("steady", async move { t.cancelled().await });
        tasks.spawn("broken", async { panic!("boom") });
        let failed = tasks.supervise().await;
        assert_eq!(failed, ["broken"]);
        assert!(term.is_cancelled());
        assert_eq!(
            health.reason(RUNTIME).as_deref(),
            Some("runtime task `broken` panicked: boom")
        );
    }

    #[tokio::test]
    async fn tasks_that_end_with_the_term_are_fine() {
        let term = CancellationToken::new();
        let health = Health::new();
        let mut tasks = TermTasks::new(term.clone(), health.clone());
        for name in ["a", "b"] {
            let t = term.clone();
            tasks.spawn(name, async move { t.cancelled().await });
        }
        term.cancel();
        assert!(tasks.supervise().await.is_empty());
        assert_eq!(health.status(), "ok");
    }

    #[tokio::test]
    async fn a_task_returning_early_ends_the_term() {
        let term = CancellationToken::new();
        let health = Health::new();
        let mut tasks = TermTasks::new(term.clone(), health.clone());
        tasks.spawn("quitter", async {});
        assert_eq!(tasks.supervise().await, ["quitter"]);
        assert!(term.is_cancelled());
        assert!(health.reason(RUNTIME).unwrap().contains("ended while"));
    }
}
