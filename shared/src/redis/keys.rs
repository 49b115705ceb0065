//! Key families of the Redis primitives.
//!
//! Every key of one primitive carries the same hash tag (the `{...}` part),
//! so its scripts touch a single slot and run unchanged on Redis Cluster:
//!
//! | primitive | keys |
//! |---|---|
//! | capacity semaphore | `P:{sem:T}:holders`, `P:{sem:T}:workers`, `P:{sem:T}:slots`, `P:{sem:T}:cap`, `P:{sem:T}:epoch` |
//! | owned lock | `P:{lock:N}`, `P:{lock:N}:epoch` (leader locks' fencing epoch) |
//! | bounded counter | `P:{queue:N}:members` |
//! | batch slots | `P:{batch:B}:running` |
//!
//! `P` is the configured `subject_prefix` (default `caucus`). Names and the
//! prefix are restricted to `[A-Za-z0-9_.:-]`, so a caller can never smuggle
//! a brace in and move a key into another slot.

use crate::Error;

/// The prefix used when none is configured (matches `Config::subject_prefix`).
pub const DEFAULT_PREFIX: &str = "caucus";

/// Longest accepted name or prefix; keys stay short and readable.
pub const MAX_NAME_LEN: usize = 128;

/// Hash-tag family of capacity semaphores (`{sem:<agent type>}`).
pub const SEMAPHORE_FAMILY: &str = "sem";
/// Hash-tag family of owned locks (`{lock:<name>}`).
pub const LOCK_FAMILY: &str = "lock";
/// Hash-tag family of bounded counters (`{queue:<name>}`).
pub const QUEUE_FAMILY: &str = "queue";

/// Hash-tag family of batch slots (`{batch:<batch id>}`).
pub const BATCH_FAMILY: &str = "batch";

/// Semaphore suffix: ZSET holder id → lease expiry (server ms).
pub const SEM_HOLDERS: &str = "holders";
/// Semaphore suffix: ZSET worker id → registration expiry (server ms).
pub const SEM_WORKERS: &str = "workers";
/// Semaphore suffix: HASH worker id → registered slots.
pub const SEM_SLOTS: &str = "slots";
/// Semaphore suffix: STRING optional cap on capacity.
pub const SEM_CAP: &str = "cap";
/// Semaphore suffix: HASH `{id, recover_until}`, the data epoch; never
/// expires, so its absence means Redis lost the semaphore's data.
pub const SEM_EPOCH: &str = "epoch";
/// Bounded counter suffix: ZSET member → expiry (server ms).
pub const QUEUE_MEMBERS: &str = "members";

/// Checks a name (agent type, lock name, queue name) or a prefix.
///
/// `kind` names what is checked, for the error message.
pub fn validate_name(kind: &'static str, name: &str) -> Result<(), Error> {
    let reason = if name.is_empty() {
        Some("must not be empty".to_string())
    } else if name.len() > MAX_NAME_LEN {
        Some(format!("must be at most {MAX_NAME_LEN} bytes"))
    } else {
        name.chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')))
            .map(|c| format!("character {c:?} is not allowed (only [A-Za-z0-9_.:-])"))
    };
    match reason {
        None => Ok(()),
        Some(reason) => Err(Error::InvalidName {
            kind,
            name: name.to_string(),
            reason,
        }),
    }
}

/// `P:{family:name}`: the tagged base every key of one primitive starts with.
fn tagged(prefix: &str, family: &str, name: &str) -> String {
    format!("{prefix}:{{{family}:{name}}}")
}

/// The keys of one capacity semaphore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemaphoreKeys {
    /// ZSET holder id → lease expiry (server ms).
    pub holders: String,
    /// ZSET worker id → registration expiry (server ms).
    pub workers: String,
    /// HASH worker id → slots.
    pub slots: String,
    /// STRING cap on capacity (absent = no cap).
    pub cap: String,
    /// HASH data epoch `{id, recover_until}` (absent = data lost or never
    /// used).
    pub epoch: String,
}

impl SemaphoreKeys {
    /// Keys of the semaphore of `agent_type`; both names are validated.
    pub fn new(prefix: &str, agent_type: &str) -> Result<Self, Error> {
        validate_name("key prefix", prefix)?;
        validate_name("agent type", agent_type)?;
        let base = tagged(prefix, SEMAPHORE_FAMILY, agent_type);
        Ok(SemaphoreKeys {
            holders: format!("{base}:{SEM_HOLDERS}"),
            workers: format!("{base}:{SEM_WORKERS}"),
            slots: format!("{base}:{SEM_SLOTS}"),
            cap: format!("{base}:{SEM_CAP}"),
            epoch: format!("{base}:{SEM_EPOCH}"),
        })
    }
}

/// `SCAN MATCH` pattern of every semaphore's worker registry under `prefix`.
pub fn semaphore_workers_pattern(prefix: &str) -> Result<String, Error> {
    validate_name("key prefix", prefix)?;
    Ok(format!("{prefix}:{{{SEMAPHORE_FAMILY}:*}}:{SEM_WORKERS}"))
}

/// The agent type of a key matched by [`semaphore_workers_pattern`].
pub fn agent_type_of_workers_key<'a>(prefix: &str, key: &'a str) -> Option<&'a str> {
    let head = format!("{prefix}:{{{SEMAPHORE_FAMILY}:");
    let tail = format!("}}:{SEM_WORKERS}");
    let name = key
        .strip_prefix(head.as_str())?
        .strip_suffix(tail.as_str())?;
    validate_name("agent type", name).ok().map(|_| name)
}

/// `P:{lock:name}`: the single key of an owned lock.
pub fn lock_key(prefix: &str, name: &str) -> Result<String, Error> {
    validate_name("key prefix", prefix)?;
    validate_name("lock name", name)?;
    Ok(tagged(prefix, LOCK_FAMILY, name))
}

/// Lock suffix: STRING the fencing epoch of a leader lock (`P:{lock:N}:epoch`,
/// same hash tag as the lock, so one script takes both).
pub const LOCK_EPOCH: &str = "epoch";

/// `P:{queue:name}:members`: the member set of a bounded counter.
pub fn queue_members_key(prefix: &str, name: &str) -> Result<String, Error> {
    validate_name("key prefix", prefix)?;
    validate_name("queue name", name)?;
    Ok(format!(
        "{}:{QUEUE_MEMBERS}",
        tagged(prefix, QUEUE_FAMILY, name)
    ))
}

/// Batch slots suffix: HASH workflow id → partition, the batch's
/// workflows resumed and not finished yet.
pub const BATCH_RUNNING: &str = "running";

/// Longest accepted batch id (the coordinator's limit for batch ids).
pub const MAX_BATCH_ID_LEN: usize = 200;

/// `P:{batch:id}:running`: the running workflows of one batch. Batch ids
/// are longer than other names and may also hold `=`; braces never.
pub fn batch_running_key(prefix: &str, batch_id: &str) -> Result<String, Error> {
    validate_name("key prefix", prefix)?;
    let reason = if batch_id.is_empty() {
        Some("must not be empty".to_string())
    } else if batch_id.len() > MAX_BATCH_ID_LEN {
        Some(format!("must be at most {MAX_BATCH_ID_LEN} bytes"))
    } else {
        batch_id
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-' | '=')))
            .map(|c| format!("character {c:?} is not allowed (only [A-Za-z0-9_.:=-])"))
    };
    if let Some(reason) = reason {
        return Err(Error::InvalidName {
            kind: "batch id",
            name: batch_id.to_string(),
            reason,
        });
    }
    Ok(format!(
        "{}:{BATCH_RUNNING}",
        tagged(prefix, BATCH_FAMILY, batch_id)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semaphore_keys_share_one_tag() {
        let k = SemaphoreKeys::new("caucus", "valuation").unwrap();
        assert_eq!(k.holders, "caucus:{sem:valuation}:holders");
        assert_eq!(k.workers, "caucus:{sem:valuation}:workers");
        assert_eq!(k.slots, "caucus:{sem:valuation}:slots");
        assert_eq!(k.cap, "caucus:{sem:valuation}:cap");
        assert_eq!(k.epoch, "caucus:{sem:valuation}:epoch");
    }

    #[test]
    fn lock_and_queue_keys() {
        assert_eq!(
            lock_key("caucus", "debate-sync:D1").unwrap(),
            "caucus:{lock:debate-sync:D1}"
        );
        assert_eq!(
            queue_members_key("caucus", "expert-1").unwrap(),
            "caucus:{queue:expert-1}:members"
        );
        assert_eq!(
            batch_running_key("caucus", "corr-a=b").unwrap(),
            "caucus:{batch:corr-a=b}:running"
        );
        for bad in ["", "a}b", "{x}", "a b", &"x".repeat(201)] {
            assert!(batch_running_key("caucus", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rejects_braces_and_spaces() {
        for bad in ["", "a}b", "{x}", "a b", "é", "a/b", &"x".repeat(129)] {
            let e = SemaphoreKeys::new("caucus", bad).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::InvalidName {
                        kind: "agent type",
                        ..
                    }
                ),
                "{bad:?}: {e}"
            );
        }
        let e = lock_key("cau{cus", "x").unwrap_err();
        assert!(matches!(
            e,
            Error::InvalidName {
                kind: "key prefix",
                ..
            }
        ));
    }

    #[test]
    fn agent_type_round_trips_through_the_scan_pattern() {
        let k = SemaphoreKeys::new("p", "fin.v2:x").unwrap();
        assert_eq!(agent_type_of_workers_key("p", &k.workers), Some("fin.v2:x"));
        assert_eq!(agent_type_of_workers_key("p", &k.holders), None);
        assert_eq!(agent_type_of_workers_key("q", &k.workers), None);
        assert_eq!(semaphore_workers_pattern("p").unwrap(), "p:{sem:*}:workers");
    }
}
