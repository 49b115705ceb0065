//! Key-space isolation (seed 004, "Stream Isolation", "Write Permissions"):
//! a research task writes by returning `writes: [{key, value}]` in its
//! output; the coordinator stores only the writes under the stage's
//! `output_key_space` (for discovery `streams/stream-{stream}`, so each
//! stream its own) and refuses the rest. The agent is never trusted.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest key accepted.
pub const MAX_KEY_LEN: usize = 256;

/// One accepted write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyWrite {
    /// Key inside the run's key space (`streams/stream-2/sources.md`).
    pub key: String,
    /// The content.
    pub value: Value,
}

/// One refused write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefusedWrite {
    /// Task key (`discover#1`).
    pub task: String,
    /// The key it tried (or a description when there was none).
    pub key: String,
    /// Why it was refused.
    pub reason: String,
}

/// The key space of a task: `{stream}` becomes the 1-based stream number
/// (the seed's `stream-1`, `stream-2`, …) and `{shard}` the 0-based shard.
pub fn key_space(template: &str, shard: Option<u32>) -> String {
    let shard = shard.unwrap_or(0);
    template
        .replace("{stream}", &(shard + 1).to_string())
        .replace("{shard}", &shard.to_string())
        .trim_matches('/')
        .to_string()
}

fn valid_segment(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '='))
}

/// Why `key` may not be written by a task owning `space` (`None`: may).
pub fn refusal(key: &str, space: Option<&str>) -> Option<String> {
    let Some(space) = space.filter(|s| !s.is_empty()) else {
        return Some("this stage has no output key space".into());
    };
    if key.len() > MAX_KEY_LEN {
        return Some(format!("key longer than {MAX_KEY_LEN} characters"));
    }
    if !key.split('/').all(valid_segment) {
        return Some(
            "key must be `/`-separated segments of [A-Za-z0-9._=-], without `.` or `..`".into(),
        );
    }
    let inside = key
        .strip_prefix(space)
        .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1);
    if !inside {
        return Some(format!("outside the task's key space `{space}/`"));
    }
    None
}

/// Takes `output.writes` apart: the accepted writes stay in the output (so
/// later stages see only those) and are returned; the refused ones are
/// removed from it and returned with their reasons.
pub fn split_writes(
    task: &str,
    output: &mut Value,
    space: Option<&str>,
) -> (Vec<KeyWrite>, Vec<RefusedWrite>) {
    let Some(obj) = output.as_object_mut() else {
        return (Vec::new(), Vec::new());
    };
    let Some(writes) = obj.remove("writes") else {
        return (Vec::new(), Vec::new());
    };
    let mut accepted = Vec::new();
    let mut refused = Vec::new();
    let entries = match writes {
        Value::Array(a) => a,
        Value::Null => Vec::new(),
        other => {
            refused.push(RefusedWrite {
                task: task.to_string(),
                key: "(writes)".into(),
                reason: format!("`writes` must be a list of {{key, value}}, not {other}"),
            });
            Vec::new()
        }
    };
    for w in entries {
        let Some(key) = w.get("key").and_then(Value::as_str).map(str::to_string) else {
            refused.push(RefusedWrite {
                task: task.to_string(),
                key: "(missing)".into(),
                reason: "a write without a string `key`".into(),
            });
            continue;
        };
        match refusal(&key, space) {
            Some(reason) => refused.push(RefusedWrite {
                task: task.to_string(),
                key,
                reason,
            }),
            None => accepted.push(KeyWrite {
                key,
                value: w.get("value").cloned().unwrap_or(Value::Null),
            }),
        }
    }
    obj.insert(
        "writes".into(),
        serde_json::to_value(&accepted).unwrap_or(Value::Null),
    );
    (accepted, refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_stream_writes_only_its_own_space() {
        let space = key_space("streams/stream-{stream}", Some(1));
        assert_eq!(space, "streams/stream-2");
        let s = Some(space.as_str());
        assert_eq!(refusal("streams/stream-2/sources.md", s), None);
        assert!(refusal("streams/stream-1/sources.md", s)
            .unwrap()
            .contains("outside"));
        assert!(refusal("streams/stream-22/x.md", s).is_some());
        assert!(refusal("streams/stream-2", s).is_some(), "the space itself");
        assert!(refusal("streams/stream-2/../stream-1/x", s).is_some());
        assert!(refusal("streams/stream-2//x", s).is_some());
        assert!(refusal("streams/stream-2/a b", s).is_some());
        assert!(refusal("validation/validated.md", None).is_some());
        assert_eq!(key_space("validation", None), "validation");
    }

    #[test]
    fn refused_writes_leave_the_output() {
        let mut out = json!({"sources": [], "writes": [
            {"key": "streams/stream-1/sources.md", "value": "mine"},
            {"key": "streams/stream-3/sources.md", "value": "theirs"},
            {"value": "no key"}
        ]});
        let (ok, bad) = split_writes("discover#0", &mut out, Some("streams/stream-1"));
        assert_eq!(ok.len(), 1);
        assert_eq!(bad.len(), 2);
        assert_eq!(bad[0].key, "streams/stream-3/sources.md");
        assert_eq!(out["writes"].as_array().unwrap().len(), 1);
        assert_eq!(out["writes"][0]["value"], "mine");
        let mut out = json!({"writes": "nope"});
        let (ok, bad) = split_writes("t", &mut out, Some("x"));
        assert!(ok.is_empty());
        assert_eq!(bad.len(), 1);
    }
}
