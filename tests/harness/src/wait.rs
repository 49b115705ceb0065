//! Polling with a deadline: tests never sleep to wait for a condition.

use std::time::{Duration, Instant};

/// Polls `cond` every few milliseconds until it returns `Some`, or panics
/// with `what` after `timeout`.
pub fn wait_until<T>(what: &str, timeout: Duration, mut cond: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(2);
    loop {
        if let Some(v) = cond() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}
