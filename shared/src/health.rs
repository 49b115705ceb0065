//! What a service's `health` reports: each component (NATS, Redis, the
//! leader lease, a worker's heartbeat) is either fine or degraded with a
//! reason, and the service is `ok` only when every component is fine.
//!
//! The service context owns one [`Health`]; the loops that use NATS or
//! Redis mark their component, and `caucus.api.<service>.health` reads it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Component: the NATS connection.
pub const NATS: &str = "nats";
/// Component: the Redis connection (a periodic probe).
pub const REDIS: &str = "redis";
/// Component: the leader lease (coordinator, correlator).
pub const LEADERSHIP: &str = "leadership";

/// Shared, cheap to clone; every clone sees the same state.
#[derive(Clone, Debug, Default)]
pub struct Health {
    degraded: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Health {
    /// Everything fine.
    pub fn new() -> Self {
        Self::default()
    }

    /// `component` works again. `true` when it was degraded before.
    pub fn ok(&self, component: &str) -> bool {
        self.degraded
            .lock()
            .expect("health state")
            .remove(component)
            .is_some()
    }

    /// `component` cannot do its work, for `reason`. `true` when it was
    /// fine before.
    pub fn degraded(&self, component: &str, reason: impl Into<String>) -> bool {
        self.degraded
            .lock()
            .expect("health state")
            .insert(component.to_string(), reason.into())
            .is_none()
    }

    /// Why `component` is degraded, if it is.
    pub fn reason(&self, component: &str) -> Option<String> {
        self.degraded
            .lock()
            .expect("health state")
            .get(component)
            .cloned()
    }

    /// Every degraded component and why, sorted by component.
    pub fn problems(&self) -> BTreeMap<String, String> {
        self.degraded.lock().expect("health state").clone()
    }

    /// `"ok"` or `"degraded"`.
    pub fn status(&self) -> &'static str {
        if self.degraded.lock().expect("health state").is_empty() {
            "ok"
        } else {
            "degraded"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degraded_until_every_component_is_ok_again() {
        let h = Health::new();
        assert_eq!(h.status(), "ok");
        assert!(h.degraded(REDIS, "Redis unreachable"));
        assert!(!h.degraded(REDIS, "Redis unreachable still"));
        h.clone()
            .degraded(LEADERSHIP, "cannot take the leader lock");
        assert_eq!(h.status(), "degraded");
        assert_eq!(h.reason(REDIS).as_deref(), Some("Redis unreachable still"));
        assert!(h.ok(REDIS));
        assert!(!h.ok(REDIS));
        assert_eq!(h.status(), "degraded");
        h.ok(LEADERSHIP);
        assert_eq!(h.status(), "ok");
        assert!(h.problems().is_empty());
    }
}
