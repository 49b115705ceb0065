//! The wire contract against the seeds' own JSON: every block of seed 001
//! (kept verbatim in tests/fixtures/), the DESIGN §2 example, and every
//! DD-012 / DD-017 message type of seed 000 with its field list.

use caucus_shared::envelope::{decode_json, DecodeError, Envelope, MessageType, Priority};
use caucus_shared::messages::*;
use caucus_shared::task::{TaskDispatch, TaskEvent, TaskStatus};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

const MAX: usize = 1024 * 1024;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn ts(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// Turns the seed's commented JSON into JSON: drops `//` to end of line and
/// the unary `+` of numbers (`+10`), both only outside strings.
fn strip_jsonc(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut chars = src.chars().peekable();
    let (mut in_string, mut escaped) = (false, false);
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '/' if chars.peek() == Some(&'/') => {
                while chars.peek().is_some_and(|&n| n != '\n') {
                    chars.next();
                }
            }
            '+' if chars.peek().is_some_and(char::is_ascii_digit) => {}
            _ => out.push(c),
        }
    }
    out
}

/// Encodes, decodes and compares; returns the decoded copy.
fn envelope_round_trip(env: &Envelope) -> Envelope {
    let back = Envelope::decode(&env.to_bytes(), MAX).expect("re-decodes");
    assert_eq!(&back, env);
    back
}

/// Typed content re-serialises and re-parses to an equal value.
fn content_round_trip<T: MessageContent + PartialEq + std::fmt::Debug>(value: &T) {
    let json = serde_json::to_value(value).unwrap();
    let back: T = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(&back, value, "{json}");
    let env = Envelope::with_content("round_trip", value).unwrap();
    assert_eq!(env.message_type, T::MESSAGE_TYPE);
    assert_eq!(&envelope_round_trip(&env).content_as::<T>().unwrap(), value);
}

fn decode_err(body: &[u8]) -> DecodeError {
    Envelope::decode(body, MAX).expect_err("must be rejected")
}

// ---- seed 001, verbatim ---------------------------------------------------

#[test]
fn seed001_message_structure_parses() {
    let raw = fixture("seed001_message_structure.json");
    let env = Envelope::decode(raw.as_bytes(), MAX).unwrap();
    assert_eq!(env.message_type, MessageType::Finding);
    assert_eq!(env.from_agent, "financial_analyst");
    assert_eq!(env.to_agent.as_deref(), Some("valuation_agent"));
    assert_eq!(env.priority, Priority::High);
    assert_eq!(env.timestamp, ts("2025-11-16T10:30:00Z"));
    assert!(env.requires_response);
    assert_eq!(env.correlation_id, None);
    assert_eq!(env.schema_version, 1);
    let id = uuid::Uuid::parse_str(&env.id).expect("generated id is a UUID");
    assert_eq!(id.get_version_num(), 7);

    let f: Finding = env.content_as().unwrap();
    assert_eq!(f.finding, "Abnormal capex increase");
    assert_eq!(f.confidence, 0.85);
    assert_eq!(f.evidence, ["10-K page 45", "CFO commentary"]);
    assert_eq!(f.impact.as_deref(), Some("Adjust FCF projections"));
    // Nothing the seed sent is lost when the typed content is written back.
    assert_eq!(serde_json::to_value(&f).unwrap(), env.content);

    envelope_round_trip(&env);
    content_round_trip(&f);
    // Plain serde agrees with the checked decoder (apart from the fresh id).
    let plain: Envelope = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        Envelope {
            id: env.id.clone(),
            ..plain
        },
        env
    );
}

#[test]
fn seed001_challenge_format_parses() {
    let raw = fixture("seed001_challenge_format.json");
    let c: Challenge = serde_json::from_str(&raw).unwrap();
    assert_eq!(c.challenge_id, "CH-001");
    assert_eq!(c.challenger, "strategy_analyst");
    assert_eq!(c.challenged, "financial_analyst");
    assert_eq!(c.disputed_finding, "Management effectiveness");
    assert_eq!(c.challenge_basis, "ROI declining despite claims");
    assert_eq!(
        c.required_evidence,
        ["Historical ROI data", "Peer comparison"]
    );
    assert_eq!(c.escalation_timer, 3600);
    assert_eq!(c.priority, ChallengePriority::CriticalPath);
    assert_eq!(c.provisional_resolution, None);
    content_round_trip(&c);

    let as_value: Value = serde_json::from_str(&raw).unwrap();
    let env = Envelope::new(MessageType::Challenge, "strategy_analyst", as_value)
        .to("financial_analyst")
        .with_requires_response(true);
    env.validate_content().unwrap();
    let back = envelope_round_trip(&env);
    assert_eq!(back.content_as::<Challenge>().unwrap(), c);
    assert!(matches!(back.typed_content().unwrap(), Content::Challenge(x) if x == c));

    for (p, wire) in [
        (ChallengePriority::CriticalPath, "critical-path"),
        (ChallengePriority::Valuation, "valuation"),
        (ChallengePriority::Supporting, "supporting"),
    ] {
        assert_eq!(serde_json::to_value(p).unwrap(), wire);
        assert_eq!(p.as_str(), wire);
    }
    let snake = raw.replace("critical-path", "critical_path");
    let err = Envelope::new(
        MessageType::Challenge,
        "strategy_analyst",
        serde_json::from_str(&snake).unwrap(),
    )
    .validate_content()
    .unwrap_err();
    assert_eq!(err.code(), "invalid_content");
    assert!(err.to_string().contains("priority"), "{err}");
}

#[test]
fn seed001_finding_with_precedent_parses() {
    let raw = fixture("seed001_finding_with_precedent.json");
    let env = Envelope::decode(raw.as_bytes(), MAX).unwrap();
    assert_eq!(env.message_type, MessageType::FindingWithPrecedent);
    assert_eq!(env.priority, Priority::High);
    let f: FindingWithPrecedent = env.content_as().unwrap();
    assert_eq!(f.base.finding, "Abnormal capex increase");
    assert_eq!(f.base.confidence, 0.85);
    assert_eq!(
        f.base.impact.as_deref(),
        Some("Adjust FCF projections with growth bias")
    );
    let h = &f.historical_context;
    assert_eq!(
        h.similar_patterns,
        [SimilarPattern {
            company: "MSFT".into(),
            year: 2016,
            outcome: "Cloud investment paid off".into()
        }]
    );
    assert_eq!(h.pattern_success_rate, Some(0.72));
    assert_eq!(h.my_accuracy_on_pattern, Some(0.81));
    assert_eq!(serde_json::to_value(&f).unwrap(), env.content);
    // A consumer that only knows plain findings can still read it.
    assert_eq!(env.content_as::<Finding>().unwrap(), f.base);

    envelope_round_trip(&env);
    content_round_trip(&f);

    let mut bad = env.clone();
    bad.content["historical_context"]["pattern_success_rate"] = json!(7.2);
    let err = Envelope::decode(&bad.to_bytes(), MAX).unwrap_err();
    assert_eq!(err.code(), "invalid_content");
    assert!(err.to_string().contains("pattern_success_rate"), "{err}");
}

#[test]
fn seed001_macro_broadcast_parses_once_comments_are_stripped() {
    let raw = fixture("seed001_macro_broadcast.json");
    // As printed in the seed it is not JSON: a real sender must not do this.
    assert_eq!(decode_err(raw.as_bytes()).code(), "malformed_json");

    let env = Envelope::decode(strip_jsonc(&raw).as_bytes(), MAX).unwrap();
    assert_eq!(env.message_type, MessageType::Alert);
    assert_eq!(env.from_agent, "macro_analyst");
    assert!(env.is_broadcast());
    assert_eq!(env.priority, Priority::SystemCritical);
    assert!(env.priority.bypasses_queues());
    assert!(!env.requires_response);
    assert_eq!(env.timestamp, ts("2025-01-15T10:30:00Z"));

    let a: Alert = env.content_as().unwrap();
    assert_eq!(a.event_type.as_deref(), Some("regime_change"));
    assert_eq!(a.old_regime.as_deref(), Some("BULL_LOW_RATES"));
    assert_eq!(a.new_regime.as_deref(), Some("BEAR_HIGH_RATES"));
    assert_eq!(a.confidence, Some(0.85));
    let imp = a.implications.as_ref().unwrap();
    assert_eq!(imp["sector_favorability_changes"]["Technology"], -15);
    assert_eq!(imp["sector_favorability_changes"]["Healthcare"], 10);
    assert_eq!(imp["discount_rate_changes"]["Utilities"], 0.015);
    assert_eq!(a.recommended_actions.len(), 3);
    assert!(a.extra.is_empty());
    assert_eq!(serde_json::to_value(&a).unwrap(), env.content);

    envelope_round_trip(&env);
    content_round_trip(&a);
}

#[test]
fn strip_jsonc_leaves_strings_alone() {
    let src = r#"{"url": "http://x//y", "n": +1, "s": "a\"//b+2"} // tail"#;
    let v: Value = serde_json::from_str(&strip_jsonc(src)).unwrap();
    assert_eq!(v, json!({"url": "http://x//y", "n": 1, "s": "a\"//b+2"}));
}

#[test]
fn design_example_envelope_parses() {
    let raw = fixture("design_envelope.json");
    let env = Envelope::decode(raw.as_bytes(), MAX).unwrap();
    assert_eq!(env.id, "0193…-uuid-v7");
    assert_eq!(env.correlation_id, None);
    assert_eq!(env.schema_version, 1);
    assert_eq!(env.content_as::<Finding>().unwrap().confidence, 0.85);
    envelope_round_trip(&env);
}

// ---- seed 000: DD-012 and DD-017 message types ---------------------------

/// Decodes `{message_type, content}` from the coordinator and returns the typed content.
fn seed000<T: MessageContent + PartialEq + std::fmt::Debug>(content: Value) -> T {
    let body = json!({
        "message_type": T::MESSAGE_TYPE.as_str(),
        "from_agent": "lead_coordinator",
        "content": content,
    });
    let env = Envelope::decode(body.to_string().as_bytes(), MAX).unwrap();
    assert_eq!(env.message_type, T::MESSAGE_TYPE);
    let typed: T = env.content_as().unwrap();
    // Every seed field survives re-serialisation unchanged.
    let written = serde_json::to_value(&typed).unwrap();
    for (k, v) in content.as_object().unwrap() {
        assert_eq!(written.get(k), Some(v), "field {k} of {}", T::MESSAGE_TYPE);
    }
    envelope_round_trip(&env);
    content_round_trip(&typed);
    typed
}

fn missing(message_type: MessageType, content: Value) -> String {
    let err = Envelope::new(message_type, "x", content)
        .validate_content()
        .unwrap_err();
    assert_eq!(err.code(), "invalid_content");
    err.to_string()
}

#[test]
fn dd012_pause_request() {
    let p: PauseRequest = seed000(json!({
        "stock_id": "AAPL", "reason": "Koyfin quota exceeded",
        "checkpoint_id": "cp-17", "trigger_source": "tier2_failure"
    }));
    assert_eq!(p.stock_id, "AAPL");
    assert_eq!(p.checkpoint_id.as_deref(), Some("cp-17"));
    assert_eq!(p.trigger_source, "tier2_failure");
    let why = missing(
        MessageType::PauseRequest,
        json!({"reason": "r", "trigger_source": "human"}),
    );
    assert!(why.contains("stock_id"), "{why}");
}

#[test]
fn dd012_pause_complete() {
    let p: PauseComplete = seed000(json!({
        "stock_id": "AAPL", "paused_at": "2025-11-16T14:47:30Z",
        "resume_dependencies": ["financial"]
    }));
    assert_eq!(p.paused_at, ts("2025-11-16T14:47:30Z"));
    assert_eq!(p.resume_dependencies, ["financial"]);
}

#[test]
fn dd012_resume_command() {
    let r: ResumeCommand = seed000(json!({
        "stock_id": "AAPL",
        "resume_plan": {"restart": ["financial", "valuation", "report"],
                        "skip": ["screening", "business"], "wait": ["strategy"]},
        "notify": true
    }));
    let plan = r.resume_plan.unwrap();
    assert_eq!(plan.restart, ["financial", "valuation", "report"]);
    assert_eq!(plan.skip, ["screening", "business"]);
    assert_eq!(plan.wait, ["strategy"]);
    assert!(r.notify);
    // A person may resume without a plan: the coordinator computes it.
    let bare: ResumeCommand = seed000(json!({"stock_id": "MSFT"}));
    assert_eq!(bare.resume_plan, None);
    assert!(!bare.notify);
}

#[test]
fn dd012_batch_pause_request() {
    let b: BatchPauseRequest = seed000(json!({
        "stock_ids": ["AAPL", "MSFT", "BRK.B"], "reason": "Koyfin API quota exceeded",
        "batch_id": "B-1", "max_concurrency": 3
    }));
    assert_eq!(b.stock_ids, ["AAPL", "MSFT", "BRK.B"]);
    assert_eq!(b.max_concurrency, 3);
    let dflt: BatchPauseRequest =
        seed000(json!({"stock_ids": ["AAPL"], "reason": "r", "batch_id": "B-2"}));
    assert_eq!(dflt.max_concurrency, 5);
    let why = missing(
        MessageType::BatchPauseRequest,
        json!({"stock_ids": [], "reason": "r", "batch_id": "B"}),
    );
    assert!(why.contains("stock_ids"), "{why}");
}

#[test]
fn dd017_agent_failure_event() {
    let f: AgentFailureEvent = seed000(json!({
        "stock_ticker": "TSLA", "agent_type": "financial", "error_type": "quota_exceeded",
        "error_message": "Koyfin API: quota exceeded (1000/1000) req-8f2c",
        "data_source": "koyfin", "timestamp": "2025-11-16T14:47:00Z"
    }));
    assert_eq!(f.data_source.as_deref(), Some("koyfin"));
    assert_eq!(
        f.occurred_at(ts("2030-01-01T00:00:00Z")),
        ts("2025-11-16T14:47:00Z")
    );
    let no_ts: AgentFailureEvent = seed000(json!({
        "stock_ticker": "TSLA", "agent_type": "financial",
        "error_type": "timeout", "error_message": "read timed out"
    }));
    assert_eq!(
        no_ts.occurred_at(ts("2030-01-01T00:00:00Z")),
        ts("2030-01-01T00:00:00Z")
    );
}

#[test]
fn dd017_correlation_detected() {
    let c: CorrelationDetected = seed000(json!({
        "correlation_id": "corr-1",
        "stock_tickers": ["AAPL", "MSFT", "GOOGL", "AMZN", "TSLA"],
        "root_cause": "koyfin API quota exceeded", "signature": "9f86d081884c7d65",
        "batch_triggered": true
    }));
    assert_eq!(c.stock_tickers.len(), 5);
    assert!(c.batch_triggered);
}

#[test]
fn dd017_batch_trigger() {
    let b: BatchTrigger = seed000(json!({
        "stock_ids": ["AAPL", "MSFT", "GOOGL"], "root_cause": "koyfin API quota exceeded",
        "correlation_id": "corr-1"
    }));
    assert_eq!(b.correlation_id, "corr-1");
    assert_eq!(b.batch_id, None);
}

#[test]
fn request_and_confirmation() {
    let r: Request = seed000(json!({
        "query": "Segment margins 2019-2024", "scope": "cloud segment only",
        "parameters": {"years": 5}, "deadline": "2025-11-16T12:00:00Z",
        "rationale": "margin debate"
    }));
    assert_eq!(r.parameters["years"], 5);
    let c: Confirmation = seed000(json!({
        "finding": "Capex +40% y/y", "agrees": true, "confidence": 0.9,
        "evidence": ["10-K p.45"], "in_reply_to": "0193-abc"
    }));
    assert_eq!(c.agrees, Some(true));
    let why = missing(
        MessageType::Confirmation,
        json!({"finding": "x", "confidence": -0.1}),
    );
    assert!(why.contains("confidence"), "{why}");
}

#[test]
fn debate_events() {
    let ack: DebateAck = seed000(json!({
        "debate_id": "D-1", "challenge_id": "CH-001",
        "respond_by": "2025-11-16T11:30:00Z", "snapshot_id": "snap_12345"
    }));
    assert_eq!(ack.snapshot_id.as_deref(), Some("snap_12345"));
    let ev: DebateEvidence = seed000(json!({
        "debate_id": "D-1", "evidence": ["ROI 2019-2024"],
        "position": {"statement": "25% operating margin", "metric": "operating_margin",
                     "value": 0.25, "confidence": 0.7, "evidence": []},
        "revised": false
    }));
    assert_eq!(ev.position.unwrap().value, Some(json!(0.25)));
    let v: DebateVerdict =
        seed000(json!({"debate_id": "D-1", "accepted": false, "reason": "no peers"}));
    assert!(!v.accepted);
    let e: DebateEscalation = seed000(json!({
        "debate_id": "D-1", "from_level": 1, "to_level": 2, "reason": "evidence_rejected"
    }));
    assert_eq!(e.to_level, 2);
    let why = missing(
        MessageType::DebateEscalation,
        json!({"debate_id": "D-1", "from_level": 3, "to_level": 2, "reason": "r"}),
    );
    assert!(why.contains("to_level"), "{why}");
    let r: DebateResolution = seed000(json!({
        "debate_id": "D-1", "level": 4, "method": "conservative_default",
        "position": {"statement": "25% operating margin", "metric": "operating_margin", "value": 0.25, "evidence": []},
        "provisional": true, "rationale": "lowest margin", "evidence_considered": ["10-K"]
    }));
    assert_eq!(r.method, ResolutionMethod::ConservativeDefault);
    assert!(r.provisional);
}

#[test]
fn task_bodies_inside_and_outside_envelopes() {
    let dispatch = json!({
        "task_id": "wf1/valuation", "workflow_id": "wf1", "item": "BRK.B",
        "pipeline": "stock-analysis", "stage": "valuation", "agent_type": "valuation",
        "attempt": 1, "dispatched_at": "2025-11-16T10:30:00Z"
    });
    let d: TaskDispatch = decode_json(dispatch.to_string().as_bytes(), MAX).unwrap();
    assert_eq!(d.msg_id(), "wf1/valuation@1");
    let inside: TaskDispatch = seed000(dispatch.clone());
    assert_eq!(inside, d);

    let event = json!({
        "task_id": "wf1/valuation", "workflow_id": "wf1", "stage": "valuation",
        "agent_type": "valuation", "attempt": 2, "status": "completed",
        "worker_id": "w-1", "output": {"target_price": 85.0}, "at": "2025-11-16T10:31:00Z"
    });
    let e: TaskEvent = decode_json(event.to_string().as_bytes(), MAX).unwrap();
    assert_eq!(e.status, TaskStatus::Completed);
    assert_eq!(e.msg_id(), "wf1/valuation@2:completed");
    let _: TaskEvent = seed000(event);

    let mut no_id = dispatch.clone();
    no_id.as_object_mut().unwrap().remove("task_id");
    let err = decode_json::<TaskDispatch>(no_id.to_string().as_bytes(), MAX).unwrap_err();
    assert_eq!(err, DecodeError::MissingField("task_id".into()));
    assert_eq!(err.code(), "missing_field");

    let mut v2 = dispatch.clone();
    v2["schema_version"] = json!(2);
    let err = decode_json::<TaskDispatch>(v2.to_string().as_bytes(), MAX).unwrap_err();
    assert_eq!(err, DecodeError::UnsupportedSchemaVersion(2));

    let mut bad_attempt = dispatch;
    bad_attempt["attempt"] = json!("one");
    let err = decode_json::<TaskDispatch>(bad_attempt.to_string().as_bytes(), MAX).unwrap_err();
    assert_eq!(err.code(), "invalid_field");
    assert!(
        matches!(&err, DecodeError::InvalidField { field, .. } if field == "attempt"),
        "{err}"
    );

    let err = decode_json::<TaskDispatch>(b"[1]", MAX).unwrap_err();
    assert_eq!(err.code(), "not_an_object");
}

// ---- negative cases -------------------------------------------------------

#[test]
fn unknown_message_type_is_named() {
    let err = decode_err(br#"{"message_type": "gossip", "from_agent": "a"}"#);
    assert_eq!(err, DecodeError::UnknownMessageType("gossip".into()));
    assert_eq!(err.code(), "unknown_message_type");
    let text = err.to_string();
    assert!(
        text.contains("`gossip`") && text.contains("finding"),
        "{text}"
    );

    let near = decode_err(br#"{"message_type": "Pause-Request", "from_agent": "a"}"#);
    assert_eq!(near.code(), "unknown_message_type");
    assert!(
        near.to_string().contains("did you mean `pause_request`"),
        "{near}"
    );

    // Plain serde refuses it too: there is no catch-all variant.
    assert!(
        serde_json::from_str::<Envelope>(r#"{"message_type": "gossip", "from_agent": "a"}"#)
            .is_err()
    );
}

#[test]
fn malformed_json_reports_position() {
    let err = decode_err(b"{\n  \"message_type\": \"finding\",\n  oops\n}");
    assert_eq!(err.code(), "malformed_json");
    match &err {
        DecodeError::NotJson { line, column, .. } => assert_eq!((*line, *column), (3, 3)),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("line 3, column 3"), "{err}");
    assert_eq!(decode_err(b"").code(), "malformed_json");
}

#[test]
fn non_objects_are_rejected() {
    for (body, kind) in [
        (&b"[1, 2]"[..], "an array"),
        (b"\"finding\"", "a string"),
        (b"42", "a number"),
        (b"null", "null"),
    ] {
        let err = decode_err(body);
        assert_eq!(err, DecodeError::NotObject { found: kind });
        assert_eq!(err.code(), "not_an_object");
    }
}

#[test]
fn oversize_bodies_are_rejected_before_parsing() {
    let body = fixture("seed001_message_structure.json");
    let limit = body.len() - 1;
    let err = Envelope::decode(body.as_bytes(), limit).unwrap_err();
    assert_eq!(
        err,
        DecodeError::Oversize {
            size: body.len(),
            limit
        }
    );
    assert_eq!(err.code(), "oversize");
    // Oversize wins even over garbage: the limit protects the parser.
    let junk = vec![b'x'; 2048];
    assert_eq!(
        Envelope::decode(&junk, 1024).unwrap_err().code(),
        "oversize"
    );
    assert!(Envelope::decode(body.as_bytes(), body.len()).is_ok());
}

#[test]
fn schema_version_2_is_refused() {
    let err = decode_err(
        br#"{"message_type": "finding", "from_agent": "a", "schema_version": 2,
             "content": {"finding": "f", "confidence": 0.5}}"#,
    );
    assert_eq!(err, DecodeError::UnsupportedSchemaVersion(2));
    assert_eq!(err.code(), "unsupported_schema_version");
    // Checked before the type, since a newer version may add types.
    let err =
        decode_err(br#"{"message_type": "future_thing", "from_agent": "a", "schema_version": 2}"#);
    assert_eq!(err.code(), "unsupported_schema_version");
    let err = decode_err(br#"{"message_type": "alert", "from_agent": "a", "schema_version": "1"}"#);
    assert_eq!(err.code(), "invalid_field");
}

#[test]
fn finding_confidence_out_of_range_is_invalid_content() {
    let err = decode_err(
        br#"{"message_type": "finding", "from_agent": "a",
             "content": {"finding": "f", "confidence": 1.5}}"#,
    );
    assert_eq!(err.code(), "invalid_content");
    match &err {
        DecodeError::InvalidContent {
            message_type,
            reason,
        } => {
            assert_eq!(*message_type, MessageType::Finding);
            assert!(
                reason.contains("confidence") && reason.contains("1.5"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    // The checked constructor refuses to build it in the first place.
    let err = Envelope::with_content("a", &Finding::new("f", 1.5)).unwrap_err();
    assert_eq!(err.code(), "invalid_content");
}

#[test]
fn field_level_errors_name_the_field() {
    let err = decode_err(br#"{"message_type": "alert"}"#);
    assert_eq!(err, DecodeError::MissingField("from_agent".into()));
    let err = decode_err(br#"{"from_agent": "a"}"#);
    assert_eq!(err, DecodeError::MissingField("message_type".into()));
    let err = decode_err(br#"{"message_type": 7, "from_agent": "a"}"#);
    assert_eq!(err.code(), "invalid_field");
    let err = decode_err(br#"{"message_type": "alert", "from_agent": "a", "priority": "urgent"}"#);
    assert!(
        matches!(&err, DecodeError::InvalidField { field, .. } if field == "priority"),
        "{err}"
    );
    let err =
        decode_err(br#"{"message_type": "alert", "from_agent": "a", "timestamp": "yesterday"}"#);
    assert!(
        matches!(&err, DecodeError::InvalidField { field, .. } if field == "timestamp"),
        "{err}"
    );
    let err = decode_err(br#"{"message_type": "alert", "from_agent": "a", "content": [1]}"#);
    assert_eq!(err.code(), "invalid_content");
    let err = decode_err(
        br#"{"message_type": "finding", "from_agent": "a", "content": {"finding": "f"}}"#,
    );
    assert_eq!(err.code(), "invalid_content");
    assert!(err.to_string().contains("confidence"), "{err}");
}

#[test]
fn unknown_fields_are_ignored() {
    let env = Envelope::decode(
        br#"{"message_type": "finding", "from_agent": "a", "trace_hint": 1,
             "content": {"finding": "f", "confidence": 0.5, "new_field": {"x": 1}}}"#,
        MAX,
    )
    .unwrap();
    assert_eq!(env.content_as::<Finding>().unwrap().finding, "f");
    // Empty content is fine for free-form alerts.
    let alert = Envelope::decode(br#"{"message_type": "alert", "from_agent": "a"}"#, MAX).unwrap();
    assert_eq!(alert.content, json!({}));
    assert_eq!(alert.priority, Priority::Normal);
}

// ---- round-trip property over every message type and priority -------------

fn sample_content(t: MessageType) -> Value {
    let position = json!({"statement": "25% margin", "metric": "operating_margin", "value": 0.25});
    match t {
        MessageType::Finding => {
            json!({"finding": "f", "confidence": 0.5, "key": "AAPL~capex", "item": "AAPL"})
        }
        MessageType::FindingWithPrecedent => json!({"finding": "f", "confidence": 1.0,
            "historical_context": {"similar_patterns": [{"company": "MSFT", "year": 2016, "outcome": "ok"}]}}),
        MessageType::Request => json!({"query": "q", "parameters": [1, 2]}),
        MessageType::Challenge => {
            json!({"challenge_id": "CH-2", "challenger": "a", "challenged": "b",
            "disputed_finding": "d", "challenge_basis": "b", "escalation_timer": 60,
            "priority": "valuation", "challenger_position": position})
        }
        MessageType::Confirmation => json!({"finding": "f", "agrees": false}),
        MessageType::Alert => {
            json!({"event_type": "threshold_breach", "vix": 40, "nested": {"a": [1]}})
        }
        MessageType::PauseRequest => {
            json!({"stock_id": "BRK.B", "reason": "r", "trigger_source": "human"})
        }
        MessageType::PauseComplete => {
            json!({"stock_id": "BRK.B", "paused_at": "2025-01-01T00:00:00.123456789Z"})
        }
        MessageType::ResumeCommand => {
            json!({"stock_id": "BRK.B", "resume_plan": {"restart": ["x"]}})
        }
        MessageType::BatchPauseRequest => {
            json!({"stock_ids": ["A"], "reason": "r", "batch_id": "b"})
        }
        MessageType::AgentFailureEvent => json!({"stock_ticker": "A", "agent_type": "financial",
            "error_type": "timeout", "error_message": "m"}),
        MessageType::CorrelationDetected => json!({"correlation_id": "c", "stock_tickers": ["A"],
            "root_cause": "r", "signature": "s", "batch_triggered": false}),
        MessageType::BatchTrigger => {
            json!({"stock_ids": ["A"], "root_cause": "r", "correlation_id": "c"})
        }
        MessageType::TaskDispatch => json!({"task_id": "w/s", "workflow_id": "w", "item": "A",
            "pipeline": "p", "stage": "s", "agent_type": "a", "attempt": 3, "shard": 1,
            "params": {"k": "v"}, "dispatched_at": "2025-01-01T00:00:00Z"}),
        MessageType::TaskEvent => json!({"task_id": "w/s", "workflow_id": "w", "stage": "s",
            "agent_type": "a", "attempt": 1, "status": "failed", "worker_id": "w1",
            "error": {"class": "permanent", "error_type": "bad_input", "message": "m"},
            "at": "2025-01-01T00:00:00Z"}),
        MessageType::DebateAck => json!({"debate_id": "D"}),
        MessageType::DebateEvidence => {
            json!({"debate_id": "D", "position": position, "revised": true})
        }
        MessageType::DebateVerdict => json!({"debate_id": "D", "accepted": true}),
        MessageType::DebateEscalation => {
            json!({"debate_id": "D", "from_level": 4, "to_level": 5, "reason": "r"})
        }
        MessageType::DebateResolution => {
            json!({"debate_id": "D", "level": 2, "method": "credibility",
            "winner": "a", "confidence": 0.8, "details": {"gap": 0.31}})
        }
    }
}

#[test]
fn every_type_and_priority_round_trips() {
    let mut n = 0;
    for (i, t) in MessageType::ALL.into_iter().enumerate() {
        let content = Content::parse(t, &sample_content(t)).unwrap();
        assert_eq!(content.message_type(), t);
        let rewritten = serde_json::to_value(&content).unwrap();
        assert_eq!(Content::parse(t, &rewritten).unwrap(), content, "{t}");
        for (j, p) in Priority::ALL.into_iter().enumerate() {
            let mut env =
                Envelope::new(t, format!("agent-{i}"), rewritten.clone()).with_priority(p);
            if (i + j) % 2 == 0 {
                env = env
                    .to("BRK.B desk")
                    .with_correlation_id(format!("corr-{j}"));
            }
            env.requires_response = j % 3 == 0;
            let back = envelope_round_trip(&env);
            assert_eq!(back.typed_content().unwrap(), content);
            let wire: Value = serde_json::from_slice(&env.to_bytes()).unwrap();
            assert_eq!(wire["message_type"], t.as_str());
            assert_eq!(wire["priority"], p.as_str());
            assert_eq!(wire.get("to_agent").is_some(), env.to_agent.is_some());
            n += 1;
        }
    }
    assert_eq!(n, MessageType::ALL.len() * Priority::ALL.len());
}

fn assert_typed_round_trip<T: MessageContent + PartialEq + std::fmt::Debug + DeserializeOwned>(
    v: Value,
) {
    let typed: T = serde_json::from_value(v).unwrap();
    content_round_trip(&typed);
}

#[test]
fn typed_constructors_set_the_message_type() {
    assert_typed_round_trip::<Finding>(sample_content(MessageType::Finding));
    assert_typed_round_trip::<Alert>(sample_content(MessageType::Alert));
    assert_typed_round_trip::<DebateResolution>(sample_content(MessageType::DebateResolution));
    let env = Envelope::with_content("financial", &Finding::new("capex up", 0.9)).unwrap();
    assert_eq!(env.message_type, MessageType::Finding);
    assert_eq!(env.priority, Priority::Normal);
}

// ---- docs/PROTOCOL.md stays honest -----------------------------------------

#[test]
fn protocol_doc_examples_decode() {
    let path = format!("{}/../docs/PROTOCOL.md", env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(&path).unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```json") => current = Some(String::new()),
            (Some(b), "```") => {
                blocks.push(std::mem::take(b));
                current = None;
            }
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            _ => {}
        }
    }
    let (mut envelopes, mut tasks, mut events) = (0, 0, 0);
    let mut seen = std::collections::BTreeSet::new();
    for b in &blocks {
        let v: Value = serde_json::from_str(b).unwrap_or_else(|e| panic!("{e}: {b}"));
        if v.get("message_type").is_some() {
            let env = Envelope::decode(b.as_bytes(), MAX).unwrap_or_else(|e| panic!("{e}: {b}"));
            seen.insert(env.message_type);
            envelopes += 1;
        } else if v.get("dispatched_at").is_some() {
            decode_json::<TaskDispatch>(b.as_bytes(), MAX).unwrap();
            tasks += 1;
        } else if v.get("status").is_some() && v.get("task_id").is_some() {
            decode_json::<TaskEvent>(b.as_bytes(), MAX).unwrap();
            events += 1;
        }
    }
    // Every envelope type except the bare-body task types has an example.
    let documented: Vec<_> = MessageType::ALL
        .into_iter()
        .filter(|t| !matches!(t, MessageType::TaskDispatch | MessageType::TaskEvent))
        .collect();
    let missing: Vec<_> = documented.iter().filter(|t| !seen.contains(t)).collect();
    assert!(missing.is_empty(), "no example for {missing:?}");
    assert!(envelopes >= documented.len() && tasks >= 1 && events >= 1);
}
