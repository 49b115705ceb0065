//! Every gate just below and just above its thresholds.

use serde_json::{json, Value};

use super::gates::{Gate, GateDecision, StreamResult, Verdict};
use super::Phase;

fn gate(phase: Phase, params: Value) -> Gate {
    Gate::from_params(phase, "s", &params).unwrap()
}

fn streams(counts: &[Option<usize>]) -> Vec<StreamResult> {
    // Ten domains round-robin: diverse, nobody dominates.
    counts
        .iter()
        .enumerate()
        .map(|(i, c)| StreamResult {
            stream: i as u32 + 1,
            outcome: match c {
                Some(n) => Ok((0..*n).map(|j| format!("d{}", (i * 3 + j) % 10)).collect()),
                None => Err("discovery_failed".into()),
            },
        })
        .collect()
}

fn discovery(counts: &[Option<usize>]) -> GateDecision {
    match gate(Phase::Discovering, Value::Null) {
        Gate::Discovery(g) => g.evaluate(&streams(counts)),
        _ => unreachable!(),
    }
}

#[test]
fn sources_per_stream_just_below_and_at_five() {
    let d = discovery(&[Some(5), Some(5), Some(5)]);
    assert_eq!(d.verdict, Verdict::Pass, "{d:?}");
    // One stream at 4: it does not count, the other two carry on.
    let d = discovery(&[Some(5), Some(4), Some(5)]);
    assert_eq!(d.verdict, Verdict::PassWithFallback);
    assert!(
        d.reasons[0].contains("stream-2 4 sources < 5"),
        "{:?}",
        d.reasons
    );
    // Every stream at 4: nothing successful.
    let d = discovery(&[Some(4), Some(4)]);
    assert_eq!(d.verdict, Verdict::Fail);
    assert!(d.escalate);
}

#[test]
fn successful_streams_just_below_and_at_two() {
    let d = discovery(&[Some(6), None, None, None, None]);
    assert_eq!(d.verdict, Verdict::Fail);
    assert!(d.escalate, "total discovery failure needs a person");
    assert!(d.reasons[0].starts_with("1 of 5 streams successful, at least 2 required"));
    let d = discovery(&[Some(6), Some(6), None, None, None]);
    assert_eq!(d.verdict, Verdict::PassWithFallback);
    assert_eq!(d.metrics["successful_streams"], 2.0);
    let d = discovery(&[None, None, None, None, None]);
    assert_eq!(d.verdict, Verdict::Fail);
    let g = gate(Phase::Discovering, json!({"min_successful_streams": 1}));
    let Gate::Discovery(g) = g else {
        unreachable!()
    };
    assert!(g.evaluate(&streams(&[Some(6), None])).verdict.passed());
}

fn with_domains(domains: &[&str]) -> Vec<StreamResult> {
    let half = domains.len() / 2;
    vec![
        StreamResult {
            stream: 1,
            outcome: Ok(domains[..half].iter().map(|d| d.to_string()).collect()),
        },
        StreamResult {
            stream: 2,
            outcome: Ok(domains[half..].iter().map(|d| d.to_string()).collect()),
        },
    ]
}

#[test]
fn diversity_just_below_and_above_half() {
    let Gate::Discovery(g) = gate(
        Phase::Discovering,
        json!({"min_sources_per_stream": 1, "max_source_share": 1.0}),
    ) else {
        unreachable!()
    };
    // Two domains half and half: Simpson 1 - 2 × 0.25 = 0.5, not above 0.5.
    let d = g.evaluate(&with_domains(&["a", "b", "a", "b"]));
    assert_eq!(d.metrics["diversity"], 0.5);
    assert_eq!(d.verdict, Verdict::Fail, "{d:?}");
    assert!(d.escalate);
    // Three domains 2/1/1: 1 - (0.25 + 0.0625 × 2) = 0.625.
    let d = g.evaluate(&with_domains(&["a", "b", "a", "c"]));
    assert_eq!(d.verdict, Verdict::Pass, "{d:?}");
}

#[test]
fn single_source_dominance_just_above_and_at_half() {
    let Gate::Discovery(g) = gate(
        Phase::Discovering,
        json!({"min_sources_per_stream": 1, "min_diversity": 0.0}),
    ) else {
        unreachable!()
    };
    // 6 of 10 from one domain: 60 % > 50 %.
    let mut d = vec!["x"; 6];
    d.extend(["a", "b", "c", "e"]);
    let r = g.evaluate(&with_domains(&d));
    assert_eq!(r.verdict, Verdict::Fail);
    assert!(r.reasons[0].contains("x provides 60 %"), "{:?}", r.reasons);
    // 5 of 10: exactly half is allowed.
    let mut d = vec!["x"; 5];
    d.extend(["a", "b", "c", "e", "f"]);
    assert_eq!(g.evaluate(&with_domains(&d)).verdict, Verdict::Pass);
}

fn validation(n: usize, valid: usize, cred: f64, cross: usize, contra: usize) -> Value {
    let sources: Vec<Value> = (0..n)
        .map(|i| {
            json!({"validated": i < valid, "credibility": cred,
                   "cross_referenced": i < cross, "contradicted": i < contra})
        })
        .collect();
    json!({ "sources": sources })
}

fn validate(out: Value) -> GateDecision {
    gate(Phase::Validating, Value::Null).evaluate_output(&out)
}

#[test]
fn validated_ratio_just_below_and_at_sixty_percent() {
    // 59 of 100 validated: below 60 %.
    let d = validate(validation(100, 59, 80.0, 100, 0));
    assert_eq!(d.verdict, Verdict::Fail);
    assert!(!d.escalate);
    assert!(d.reasons[0].contains("59.0 % of sources validated"));
    let d = validate(validation(100, 60, 80.0, 100, 0));
    assert_eq!(d.verdict, Verdict::Pass, "{d:?}");
    assert_eq!(validate(json!({"sources": []})).verdict, Verdict::Fail);
}

#[test]
fn secondary_validation_metrics_fall_back_to_partial_results() {
    // Credibility 60 is not above 60; 60.5 is.
    let d = validate(validation(10, 10, 60.0, 10, 0));
    assert_eq!(d.verdict, Verdict::PassWithFallback);
    assert!(d.reasons[0].contains("accepting partial validation"));
    assert_eq!(
        validate(validation(10, 10, 60.5, 10, 0)).verdict,
        Verdict::Pass
    );
    // Cross-references: 5 of 10 is not above 50 %; 6 is.
    assert_eq!(
        validate(validation(10, 10, 80.0, 5, 0)).verdict,
        Verdict::PassWithFallback
    );
    assert_eq!(
        validate(validation(10, 10, 80.0, 6, 0)).verdict,
        Verdict::Pass
    );
    // Contradictions: 3 of 10 is not below 30 %; 2 is.
    assert_eq!(
        validate(validation(10, 10, 80.0, 10, 3)).verdict,
        Verdict::PassWithFallback
    );
    assert_eq!(
        validate(validation(10, 10, 80.0, 10, 2)).verdict,
        Verdict::Pass
    );
    // The validator says it checked only part of them.
    let mut out = validation(10, 10, 80.0, 10, 0);
    out["partial"] = json!(true);
    assert_eq!(validate(out).verdict, Verdict::PassWithFallback);
}

#[test]
fn contradictions_above_forty_percent_escalate() {
    let d = validate(validation(10, 10, 80.0, 10, 4));
    assert_eq!(
        d.verdict,
        Verdict::PassWithFallback,
        "40 % is not above 40 %"
    );
    let d = validate(validation(100, 100, 80.0, 100, 41));
    assert_eq!(d.verdict, Verdict::Fail);
    assert!(d.escalate);
}

fn analysis(patterns: usize, insights: usize, evidence: bool) -> Value {
    json!({
        "patterns": (0..patterns).map(|i| json!({"name": i})).collect::<Vec<_>>(),
        "insights": (0..insights).map(|_| json!({"confidence": 0.7,
            "evidence": if evidence { json!(["s1"]) } else { json!([]) }})).collect::<Vec<_>>(),
    })
}

#[test]
fn patterns_and_insights_just_below_and_at_their_minimum() {
    let g = gate(Phase::Analyzing, Value::Null);
    let d = g.evaluate_output(&analysis(2, 5, true));
    assert_eq!(d.verdict, Verdict::Fail);
    assert!(d.reasons[0].contains("2 patterns identified, at least 3"));
    let d = g.evaluate_output(&analysis(3, 4, true));
    assert_eq!(d.verdict, Verdict::Fail);
    assert!(d.reasons[0].contains("4 key insights, at least 5"));
    assert_eq!(
        g.evaluate_output(&analysis(3, 5, true)).verdict,
        Verdict::Pass
    );
    // Evidence chains missing: the basic analysis is used.
    let d = g.evaluate_output(&analysis(3, 5, false));
    assert_eq!(d.verdict, Verdict::PassWithFallback);
    assert!(d.reasons[0].contains("basic analysis"));
}

#[test]
fn synthesis_needs_every_section() {
    let g = gate(Phase::Synthesizing, Value::Null);
    let full = json!({"sections": {"executive_summary": "s", "findings": "f",
        "recommendations": ["r"], "citations": ["c"]}});
    assert_eq!(g.evaluate_output(&full).verdict, Verdict::Pass);
    let mut partial = full.clone();
    partial["sections"]["recommendations"] = json!([]);
    partial["sections"]["executive_summary"] = json!("  ");
    let d = g.evaluate_output(&partial);
    assert_eq!(d.verdict, Verdict::Fail);
    assert!(
        d.reasons[0].contains("executive_summary, recommendations"),
        "{:?}",
        d.reasons
    );
}

#[test]
fn consolidation_needs_merged_sources() {
    let g = gate(Phase::Consolidating, Value::Null);
    assert_eq!(
        g.evaluate_output(&json!({"sources": []})).verdict,
        Verdict::Fail
    );
    assert_eq!(
        g.evaluate_output(&json!({"sources": [{}]})).verdict,
        Verdict::Pass
    );
}

#[test]
fn bad_thresholds_are_named() {
    let e = Gate::from_params(
        Phase::Validating,
        "validate",
        &json!({"min_validated_ratio": 1.5}),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "stage `validate`: parameter `min_validated_ratio` is 1.5; it must be in 0..=1"
    );
    let e =
        Gate::from_params(Phase::Analyzing, "a", &json!({"min_patterns": "three"})).unwrap_err();
    assert!(e.to_string().contains("must be a number"), "{e}");
    let e = Gate::from_params(Phase::Analyzing, "a", &json!({"min_patterns": 2.5})).unwrap_err();
    assert!(e.to_string().contains("whole number"), "{e}");
}
