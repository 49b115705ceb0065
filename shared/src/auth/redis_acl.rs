//! What each role may do in Redis: key patterns of its families
//! (shared/src/redis/keys.rs) and the commands it needs.
//!
//! Every primitive is a Lua script run with EVALSHA (EVAL / SCRIPT LOAD
//! when the server does not know it yet); Redis checks the commands and
//! keys a script touches against the calling user too, so a role gets the
//! plain read and write commands on its own keys and nothing dangerous
//! (FLUSHALL, FLUSHDB, CONFIG, KEYS, DEBUG, SHUTDOWN, … are all in
//! `@dangerous`).

use super::Role;

/// Commands of every service role: connection handling, the scripts, and
/// the read/write commands the scripts call, minus everything dangerous;
/// `UNWATCH` is how the connection pool (deadpool-redis) checks a pooled
/// connection before reuse.
pub const SERVICE_COMMANDS: &str = "-@all +@read +@write +@connection -@dangerous \
     +evalsha +eval +script|load +script|exists +ping +time +select +unwatch +cluster|slots";

/// The Redis rules of `role` under key prefix `prefix` (without the user
/// name and password); `None` for a role that does not use Redis.
pub fn rules(role: &Role, prefix: &str) -> Option<String> {
    let keys: Vec<String> = match role {
        Role::Admin => return Some("~* &* +@all".into()),
        Role::Operator | Role::Console | Role::Person(_) | Role::Publisher => return None,
        // Leader lock, every semaphore (status, SCAN of registrations),
        // bounded counters: all of the prefix.
        Role::Coordinator => vec![format!("~{prefix}:*")],
        // Its semaphores; the debate sync locks it only reads (findings
        // wait while the facilitator holds one).
        Role::Worker => vec![
            format!("~{prefix}:{{sem:*"),
            format!("%R~{prefix}:{{lock:debate-sync:*"),
        ],
        // The sync locks it takes, the experts' queues.
        Role::Facilitator => vec![
            format!("~{prefix}:{{lock:debate-sync:*"),
            format!("~{prefix}:{{queue:expert:*"),
        ],
        // Its leader lock (and the lock's fencing epoch).
        Role::Correlator => vec![format!("~{prefix}:{{lock:correlator-leader}}*")],
    };
    let mut out = format!(
        "resetkeys {} resetchannels {SERVICE_COMMANDS}",
        keys.join(" ")
    );
    if matches!(role, Role::Coordinator) {
        // Listing registered workers walks the registrations with SCAN.
        out.push_str(" +scan");
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::ROLES;

    #[test]
    fn nobody_but_the_admin_may_run_dangerous_commands() {
        for role in ROLES {
            let Some(r) = rules(&role, "caucus") else {
                continue;
            };
            if role == Role::Admin {
                assert!(r.contains("+@all"));
                continue;
            }
            assert!(r.contains("-@dangerous"), "{role}: {r}");
            assert!(!r.contains("~*"), "{role}: {r}");
            for c in ["flushall", "keys", "config", "debug"] {
                assert!(!r.contains(&format!("+{c}")), "{role}: {r}");
            }
        }
    }

    #[test]
    fn the_worker_reads_the_sync_locks_and_owns_its_semaphores() {
        let r = rules(&Role::Worker, "caucus").unwrap();
        assert!(r.contains("~caucus:{sem:*"), "{r}");
        assert!(r.contains("%R~caucus:{lock:debate-sync:*"), "{r}");
        assert!(!r.contains("coordinator-leader"), "{r}");
    }
}
