//! The audit trail (seed 004, "Audit Trail"): `Timestamp | Agent | Action |
//! Result` for every phase transition, error, human escalation and quality
//! gate decision. Kept on the workflow record, so it is as durable as the
//! record itself (JetStream KV) and survives a coordinator restart.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// Entries kept per workflow, at most; beyond it the oldest
/// per-stream entries would be lost, so the newest are dropped instead and
/// one entry says so.
pub const MAX_AUDIT_ENTRIES: usize = 2000;

/// One line of the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When it happened.
    pub at: DateTime<Utc>,
    /// Who acted: `coordinator`, or the stream / stage (`stream-2`, `validate`).
    pub agent: String,
    /// What happened (`transition`, `quality_gate`, `write_refused`, …).
    pub action: String,
    /// The outcome, human-readable.
    pub result: String,
}

impl std::fmt::Display for AuditEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} | {} | {} | {}",
            self.at.to_rfc3339_opts(SecondsFormat::Millis, true),
            self.agent,
            self.action,
            self.result
        )
    }
}

/// Appends to `trail`, keeping it within [`MAX_AUDIT_ENTRIES`].
pub fn append(trail: &mut Vec<AuditEntry>, entry: AuditEntry) {
    if trail.len() + 1 < MAX_AUDIT_ENTRIES {
        trail.push(entry);
    } else if trail.len() + 1 == MAX_AUDIT_ENTRIES {
        trail.push(AuditEntry {
            agent: "coordinator".into(),
            action: "audit_truncated".into(),
            result: format!("more than {MAX_AUDIT_ENTRIES} entries; later ones are not kept"),
            ..entry
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_seed_format_and_stays_bounded() {
        let at = DateTime::parse_from_rfc3339("2026-01-01T10:30:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let e = AuditEntry {
            at,
            agent: "stream-2".into(),
            action: "stream_failed".into(),
            result: "search backend unavailable".into(),
        };
        assert_eq!(
            e.to_string(),
            "2026-01-01T10:30:00.000Z | stream-2 | stream_failed | search backend unavailable"
        );
        let mut trail = Vec::new();
        for _ in 0..MAX_AUDIT_ENTRIES + 10 {
            append(&mut trail, e.clone());
        }
        assert_eq!(trail.len(), MAX_AUDIT_ENTRIES);
        assert_eq!(trail.last().unwrap().action, "audit_truncated");
    }
}
