//! Subject builders for every subject of the wire contract, and the token
//! encoding that keeps item names such as `BRK.B` out of the subject grammar.
//!
//! A token may not contain `.`, `*`, `>` or white space. [`encode_token`]
//! keeps `[A-Za-z0-9_-]` and writes every other byte of the UTF-8 text as
//! `~XX` (upper-case hex), so `BRK.B` → `BRK~2EB`, `A B` → `A~20B`,
//! `X*Y` → `X~2AY`; the empty string is `~`. [`decode_token`] reverses it.

use crate::Error;

/// The JetStream streams of the topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamKind {
    /// Work queue of task dispatches.
    Tasks,
    /// Task lifecycle events and alert cards.
    Events,
    /// Findings from agents and outside services.
    Findings,
    /// Agent-to-agent messages and broadcasts.
    Messages,
    /// Agent failure events.
    Failures,
    /// Pause/resume/batch commands and correlations.
    Control,
    /// Debate events.
    Debates,
    /// Dead letters.
    Dlq,
}

impl StreamKind {
    /// Every stream, in set-up order.
    pub const ALL: [StreamKind; 8] = [
        StreamKind::Tasks,
        StreamKind::Events,
        StreamKind::Findings,
        StreamKind::Messages,
        StreamKind::Failures,
        StreamKind::Control,
        StreamKind::Debates,
        StreamKind::Dlq,
    ];

    fn suffix(self) -> &'static str {
        match self {
            StreamKind::Tasks => "TASKS",
            StreamKind::Events => "EVENTS",
            StreamKind::Findings => "FINDINGS",
            StreamKind::Messages => "MESSAGES",
            StreamKind::Failures => "FAILURES",
            StreamKind::Control => "CONTROL",
            StreamKind::Debates => "DEBATES",
            StreamKind::Dlq => "DLQ",
        }
    }
}

/// Builds subjects under one prefix (default `caucus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subjects {
    prefix: String,
}

impl Default for Subjects {
    fn default() -> Self {
        Subjects::new("caucus")
    }
}

impl Subjects {
    /// Subjects under `prefix` (validated by config: one plain token).
    pub fn new(prefix: impl Into<String>) -> Self {
        Subjects {
            prefix: prefix.into(),
        }
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Stream name, e.g. `CAUCUS_TASKS`.
    pub fn stream(&self, kind: StreamKind) -> String {
        format!("{}_{}", self.prefix.to_ascii_uppercase(), kind.suffix())
    }

    /// Subjects a stream captures.
    pub fn stream_subjects(&self, kind: StreamKind) -> Vec<String> {
        let p = &self.prefix;
        match kind {
            StreamKind::Tasks => vec![format!("{p}.tasks.>")],
            StreamKind::Events => vec![format!("{p}.events.>"), format!("{p}.alerts.>")],
            StreamKind::Findings => vec![format!("{p}.findings.>")],
            StreamKind::Messages => vec![format!("{p}.msg.>")],
            StreamKind::Failures => vec![format!("{p}.failures.>")],
            StreamKind::Control => vec![format!("{p}.control.>"), format!("{p}.correlations")],
            StreamKind::Debates => vec![format!("{p}.debates.>")],
            StreamKind::Dlq => vec![format!("{p}.dlq.>")],
        }
    }

    /// KV bucket name, e.g. `caucus_workflows`.
    pub fn bucket(&self, name: &str) -> String {
        format!("{}_{name}", self.prefix)
    }

    /// `caucus.tasks.<agent_type>`: dispatches for one agent type.
    pub fn tasks(&self, agent_type: &str) -> String {
        format!("{}.tasks.{}", self.prefix, encode_token(agent_type))
    }

    /// `caucus.events.task.<agent_type>.<status>`.
    pub fn task_event(&self, agent_type: &str, status: &str) -> String {
        format!(
            "{}.events.task.{}.{}",
            self.prefix,
            encode_token(agent_type),
            encode_token(status)
        )
    }

    /// The subject of a task event of partition `partition`:
    /// `caucus.events.task.<agent_type>.<status>.<partition>`, or
    /// [`Subjects::task_event`]'s when the dispatch named no partition (one
    /// partition: the subjects of every release before partitions).
    pub fn task_event_in(&self, agent_type: &str, status: &str, partition: Option<u32>) -> String {
        match partition {
            Some(p) => format!("{}.{p}", self.task_event(agent_type, status)),
            None => self.task_event(agent_type, status),
        }
    }

    /// `caucus.events.task.*.*.<partition>`: one partition's task events.
    pub fn task_events_of(&self, partition: u32) -> String {
        format!("{}.events.task.*.*.{partition}", self.prefix)
    }

    /// `caucus.events.task.>`.
    pub fn task_events_all(&self) -> String {
        format!("{}.events.task.>", self.prefix)
    }

    /// `caucus.findings.<key>`.
    pub fn findings(&self, key: &str) -> String {
        format!("{}.findings.{}", self.prefix, encode_token(key))
    }

    /// `caucus.findings.>`.
    pub fn findings_all(&self) -> String {
        format!("{}.findings.>", self.prefix)
    }

    /// `caucus.msg.<to_agent>`.
    pub fn msg(&self, to_agent: &str) -> String {
        format!("{}.msg.{}", self.prefix, encode_token(to_agent))
    }

    /// `caucus.msg.all`: broadcast to every agent.
    pub fn msg_all(&self) -> String {
        format!("{}.msg.all", self.prefix)
    }

    /// `caucus.failures.<agent_type>`.
    pub fn failures(&self, agent_type: &str) -> String {
        format!("{}.failures.{}", self.prefix, encode_token(agent_type))
    }

    /// `caucus.failures.>`.
    pub fn failures_all(&self) -> String {
        format!("{}.failures.>", self.prefix)
    }

    /// `caucus.control.<message_type>`.
    pub fn control(&self, message_type: &str) -> String {
        format!("{}.control.{}", self.prefix, encode_token(message_type))
    }

    /// `caucus.control.>`.
    pub fn control_all(&self) -> String {
        format!("{}.control.>", self.prefix)
    }

    /// `caucus.correlations`.
    pub fn correlations(&self) -> String {
        format!("{}.correlations", self.prefix)
    }

    /// `caucus.debates.<debate_id>.<event>`.
    pub fn debates(&self, debate_id: &str, event: &str) -> String {
        format!(
            "{}.debates.{}.{}",
            self.prefix,
            encode_token(debate_id),
            encode_token(event)
        )
    }

    /// `caucus.debates.>`.
    pub fn debates_all(&self) -> String {
        format!("{}.debates.>", self.prefix)
    }

    /// `caucus.alerts.<severity>`.
    pub fn alerts(&self, severity: &str) -> String {
        format!("{}.alerts.{}", self.prefix, encode_token(severity))
    }

    /// `caucus.alerts.>`.
    pub fn alerts_all(&self) -> String {
        format!("{}.alerts.>", self.prefix)
    }

    /// `caucus.api.<service>.<operation>` (request/reply, no stream).
    pub fn api(&self, service: &str, operation: &str) -> String {
        format!(
            "{}.api.{}.{}",
            self.prefix,
            encode_token(service),
            encode_token(operation)
        )
    }

    /// `caucus.dlq.<original subject>`.
    pub fn dlq(&self, original_subject: &str) -> String {
        format!("{}.dlq.{original_subject}", self.prefix)
    }

    /// `caucus.dlq.>`.
    pub fn dlq_all(&self) -> String {
        format!("{}.dlq.>", self.prefix)
    }
}

fn keep(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Encodes arbitrary text as one subject token (see the module docs).
pub fn encode_token(raw: &str) -> String {
    if raw.is_empty() {
        return "~".into();
    }
    if raw.bytes().all(keep) {
        return raw.to_string();
    }
    let mut out = String::with_capacity(raw.len() + 8);
    for b in raw.bytes() {
        if keep(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("~{b:02X}"));
        }
    }
    out
}

/// Decodes a token made by [`encode_token`].
pub fn decode_token(token: &str) -> Result<String, Error> {
    let err = |reason: &str| Error::Token {
        token: token.to_string(),
        reason: reason.to_string(),
    };
    if token == "~" {
        return Ok(String::new());
    }
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'~' {
            let hex = token
                .get(i + 1..i + 3)
                .ok_or_else(|| err("`~` must be followed by two hex digits"))?;
            let v = u8::from_str_radix(hex, 16).map_err(|_| err("bad hex after `~`"))?;
            out.push(v);
            i += 3;
        } else if keep(b) {
            out.push(b);
            i += 1;
        } else {
            return Err(err("character not allowed in an encoded token"));
        }
    }
    String::from_utf8(out).map_err(|_| err("decodes to invalid UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickers_round_trip() {
        for raw in [
            "AAPL", "BRK.B", "A B", "X*Y", "a>b", "", "~", "100%", "ÄÖ", "tab\tx", "~2E",
        ] {
            let t = encode_token(raw);
            assert!(
                !t.is_empty()
                    && !t.contains(['.', '*', '>'])
                    && !t.chars().any(char::is_whitespace),
                "{raw:?} -> {t:?}"
            );
            assert_eq!(decode_token(&t).unwrap(), raw, "{t}");
        }
        assert_eq!(encode_token("BRK.B"), "BRK~2EB");
        assert_eq!(encode_token("A B"), "A~20B");
        assert_eq!(encode_token("X*Y"), "X~2AY");
    }

    #[test]
    fn bad_tokens_are_rejected() {
        assert!(decode_token("AB~").is_err());
        assert!(decode_token("AB~ZZ").is_err());
        assert!(decode_token("A.B").is_err());
        assert!(decode_token("~FF").is_err());
    }

    #[test]
    fn subjects_follow_the_contract() {
        let s = Subjects::default();
        assert_eq!(s.tasks("valuation"), "caucus.tasks.valuation");
        assert_eq!(
            s.task_event("valuation", "completed"),
            "caucus.events.task.valuation.completed"
        );
        assert_eq!(s.findings("BRK.B"), "caucus.findings.BRK~2EB");
        assert_eq!(s.msg_all(), "caucus.msg.all");
        assert_eq!(s.control("pause_request"), "caucus.control.pause_request");
        assert_eq!(
            s.debates("D-1", "challenge"),
            "caucus.debates.D-1.challenge"
        );
        assert_eq!(s.api("coordinator", "plan"), "caucus.api.coordinator.plan");
        assert_eq!(
            s.dlq("caucus.tasks.valuation"),
            "caucus.dlq.caucus.tasks.valuation"
        );
        assert_eq!(s.stream(StreamKind::Tasks), "CAUCUS_TASKS");
        assert_eq!(Subjects::new("acme").bucket("workflows"), "acme_workflows");
    }
}
