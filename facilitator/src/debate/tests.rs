//! Unit tests of the debate state machine.

use caucus_shared::messages::{
    Challenge, DebateEvidence, DebateVerdict, Position, ResolutionMethod,
};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;

use super::*;
use crate::credibility::{assess_pair, score, CredibilityParams, CredibilityQuery, TrackRecord};
use crate::impact::{self, AssumptionChange, ImpactParams};
use crate::side::Side;

const SNAP: &str = "snap_42";

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 11, 16, 10, 30, 0).unwrap()
}

fn at(secs: u64) -> DateTime<Utc> {
    t0() + chrono::Duration::seconds(secs as i64)
}

fn timeouts() -> Timeouts {
    Timeouts::default()
}

fn margin(statement: &str, v: f64) -> Position {
    Position {
        statement: statement.into(),
        metric: Some("operating_margin".into()),
        value: Some(json!(v)),
        confidence: None,
        evidence: vec![format!("model: {statement}")],
    }
}

/// The seed's challenge format, parsed as-is, plus comparable positions.
fn challenge(priority: &str) -> Challenge {
    serde_json::from_value(json!({
        "challenge_id": "CH-001",
        "challenger": "strategy_analyst",
        "challenged": "financial_analyst",
        "disputed_finding": "Operating margin assumption",
        "challenge_basis": "Management guidance implies higher margins",
        "required_evidence": ["Historical margin data", "Peer comparison"],
        "escalation_timer": 3600,
        "priority": priority,
        "provisional_resolution": null,
        "challenger_position": {"statement": "30% operating margin", "metric": "operating_margin", "value": 0.30},
        "challenged_position": {"statement": "25% operating margin", "metric": "operating_margin", "value": 0.25}
    }))
    .unwrap()
}

fn snapshot() -> Snapshot {
    Snapshot {
        snapshot_id: SNAP.into(),
        taken_at: t0(),
        flushed: vec!["strategy_analyst".into(), "financial_analyst".into()],
        unresponsive: vec![],
    }
}

/// A debate opened from the seed's challenge at `t0` (also used by other
/// modules' tests).
pub(crate) fn open(priority: &str) -> Debate {
    let ext = ChallengeExtensions {
        downstream_dependencies: vec!["dcf_valuation".into(), "risk_assessment".into()],
        ..Default::default()
    };
    Debate::open(challenge(priority), ext, snapshot(), t0(), &timeouts()).unwrap()
}

fn evidence(pos: Option<Position>) -> DebateEvidence {
    DebateEvidence {
        debate_id: "CH-001".into(),
        evidence: vec!["10-K page 45".into()],
        position: pos,
        revised: false,
        limitations: vec![],
        snapshot_id: Some(SNAP.into()),
    }
}

fn verdict(accepted: bool) -> DebateVerdict {
    DebateVerdict {
        debate_id: "CH-001".into(),
        accepted,
        reason: Some("checked".into()),
        snapshot_id: Some(SNAP.into()),
    }
}

fn records(agent: &str, right: usize, wrong: usize) -> Vec<TrackRecord> {
    (0..right + wrong)
        .map(|i| TrackRecord {
            agent: agent.into(),
            outcome: if i < right { 1.0 } else { 0.0 },
            at: t0(),
            context: Default::default(),
            regime: None,
            overridden: false,
        })
        .collect()
}

fn assessment(
    challenger: (usize, usize),
    challenged: (usize, usize),
) -> crate::credibility::L2Assessment {
    let p = CredibilityParams::default();
    let q = CredibilityQuery::default();
    let a = score(
        "strategy_analyst",
        &records("strategy_analyst", challenger.0, challenger.1),
        &q,
        t0(),
        &p,
    )
    .unwrap();
    let b = score(
        "financial_analyst",
        &records("financial_analyst", challenged.0, challenged.1),
        &q,
        t0(),
        &p,
    )
    .unwrap();
    assess_pair(a, b, &p)
}

fn rejected_to_l2(priority: &str) -> Debate {
    let mut d = open(priority);
    d.ack("financial_analyst", Some(SNAP), at(60)).unwrap();
    d.add_evidence("financial_analyst", &evidence(None), at(120), &timeouts())
        .unwrap();
    let fx = d
        .verdict("strategy_analyst", &verdict(false), at(180), &timeouts())
        .unwrap();
    assert!(
        matches!(&fx[..], [Effect::Escalated(e)] if e.from_level == 1 && e.to_level == 2 && e.reason == "evidence_rejected")
    );
    assert_eq!((d.level, d.state), (2, DebateState::Mediating));
    d
}

fn resolved(fx: &[Effect]) -> &ResolutionRecord {
    fx.iter()
        .find_map(|e| match e {
            Effect::Resolved(r) => Some(r.as_ref()),
            _ => None,
        })
        .expect("a resolution effect")
}

#[test]
fn level1_accepted_evidence_resolves_with_documentation() {
    let mut d = open("supporting");
    assert_eq!((d.level, d.state), (1, DebateState::AwaitingAck));
    assert_eq!(d.deadline, Some(at(15 * 60)));
    assert!(d
        .ack("financial_analyst", Some(SNAP), at(60))
        .unwrap()
        .is_empty());
    assert_eq!(d.deadline, Some(at(3600)));
    d.add_evidence(
        "financial_analyst",
        &evidence(Some(margin("26% operating margin", 0.26))),
        at(600),
        &timeouts(),
    )
    .unwrap();
    assert_eq!(d.state, DebateState::AwaitingVerdict);
    let fx = d
        .verdict("strategy_analyst", &verdict(true), at(700), &timeouts())
        .unwrap();
    let r = resolved(&fx);
    assert_eq!((r.level, r.method), (1, ResolutionMethod::AgentDirect));
    assert!(r.binding && !r.provisional);
    assert_eq!(r.winner.as_deref(), Some("financial_analyst"));
    assert_eq!(
        r.final_position.as_ref().unwrap().statement,
        "26% operating margin"
    );
    assert!(r.evidence_considered.contains(&"10-K page 45".to_string()));
    assert!(r
        .evidence_considered
        .iter()
        .any(|e| e.starts_with("challenge basis")));
    assert_eq!(r.override_window.status, OverrideStatus::NotApplicable);
    assert_eq!(r.snapshot_id, SNAP);
    assert!(r.confidence > 0.0 && !r.impact.is_empty());
    assert_eq!(d.state, DebateState::Resolved);
    let wire = r.to_wire();
    assert_eq!(wire.level, 1);
    assert_eq!(wire.snapshot_id.as_deref(), Some(SNAP));
}

#[test]
fn ack_timeout_escalates_to_level2_only_when_due() {
    let mut d = open("valuation");
    assert!(d.tick(at(15 * 60 - 1), &timeouts()).is_empty());
    let fx = d.tick(at(15 * 60), &timeouts());
    assert!(
        matches!(&fx[..], [Effect::Escalated(e)] if e.reason == "ack_timeout" && e.to_level == 2)
    );
    assert_eq!(d.deadline, Some(at(15 * 60 + 3600)));
    assert!(!d.mediation_overdue(at(15 * 60 + 3599)));
    assert!(d.mediation_overdue(at(15 * 60 + 3600)));
}

#[test]
fn evidence_timeout_and_the_challenge_timer() {
    let mut d = open("valuation");
    d.ack("financial_analyst", Some(SNAP), at(10)).unwrap();
    let fx = d.tick(at(3600), &timeouts());
    assert!(matches!(&fx[..], [Effect::Escalated(e)] if e.reason == "evidence_timeout"));
    // A shorter escalation_timer shortens the evidence window (and the ack one).
    let mut c = challenge("valuation");
    c.escalation_timer = 300;
    let d = Debate::open(c, Default::default(), snapshot(), t0(), &timeouts()).unwrap();
    assert_eq!(d.evidence_due, at(300));
    assert_eq!(d.deadline, Some(at(300)));
}

#[test]
fn messages_must_cite_the_snapshot_and_come_from_the_right_agent() {
    let mut d = open("valuation");
    let e = d.ack("financial_analyst", None, at(1)).unwrap_err();
    assert_eq!(e.code(), "snapshot_missing");
    let e = d
        .ack("financial_analyst", Some("snap_41"), at(1))
        .unwrap_err();
    assert_eq!(e.code(), "snapshot_mismatch");
    assert!(
        e.to_string().contains("cites snapshot `snap_41`") && e.to_string().contains(SNAP),
        "{e}"
    );
    let e = d.ack("strategy_analyst", Some(SNAP), at(1)).unwrap_err();
    assert_eq!(e.code(), "not_allowed");
    let e = d
        .add_evidence("macro_analyst", &evidence(None), at(1), &timeouts())
        .unwrap_err();
    assert!(e.to_string().contains("takes no part"), "{e}");
    let e = d
        .verdict("strategy_analyst", &verdict(false), at(1), &timeouts())
        .unwrap_err();
    assert_eq!(e.code(), "wrong_state");
    let e = d
        .verdict("financial_analyst", &verdict(true), at(1), &timeouts())
        .unwrap_err();
    assert_eq!(e.code(), "not_allowed");
    assert_eq!(d.state, DebateState::AwaitingAck);
}

#[test]
fn level2_resolves_a_clear_gap_for_non_critical_debates() {
    let mut d = rejected_to_l2("valuation");
    let a = assessment((95, 5), (30, 70));
    assert!(!d.needs_expert(&a));
    let fx = d
        .mediate(at(200), &timeouts(), a, &ExpertSlot::Full)
        .unwrap();
    let r = resolved(&fx);
    assert_eq!(
        (r.level, r.method, r.label.as_str()),
        (2, ResolutionMethod::Credibility, "facilitator-resolved")
    );
    assert!(r.binding && !r.provisional);
    assert_eq!(r.winner.as_deref(), Some("strategy_analyst"));
    assert_eq!(
        r.final_position.as_ref().unwrap().statement,
        "30% operating margin"
    );
    let cred = r.credibility.as_ref().unwrap();
    assert!(cred.clear && cred.challenger.as_ref().unwrap().interval.half_width > 0.0);
    assert!((r.confidence - cred.challenger.as_ref().unwrap().score).abs() < 1e-12);
}

#[test]
fn critical_path_debates_go_to_a_person_even_with_a_clear_gap() {
    let mut d = rejected_to_l2("critical-path");
    let a = assessment((95, 5), (30, 70));
    assert!(d.needs_expert(&a));
    let fx = d
        .mediate(
            at(200),
            &timeouts(),
            a,
            &ExpertSlot::Claimed("alice".into()),
        )
        .unwrap();
    assert!(
        matches!(&fx[..], [Effect::Escalated(e)] if e.to_level == 3 && e.expert.as_deref() == Some("alice"))
    );
    assert_eq!((d.level, d.state), (3, DebateState::AwaitingHuman));
    assert_eq!(d.deadline, Some(at(200 + 6 * 3600)));
}

#[test]
fn human_timeout_applies_the_conservative_default_provisionally() {
    let mut d = rejected_to_l2("valuation");
    d.mediate(
        at(200),
        &timeouts(),
        assessment((10, 5), (9, 6)),
        &ExpertSlot::Claimed("alice".into()),
    )
    .unwrap();
    assert!(d.tick(at(200 + 6 * 3600 - 1), &timeouts()).is_empty());
    let fx = d.tick(at(200 + 6 * 3600), &timeouts());
    assert!(fx.contains(&Effect::ReleaseExpert {
        expert: "alice".into()
    }));
    assert!(fx.iter().any(|e| matches!(e, Effect::Escalated(x) if x.from_level == 3 && x.to_level == 4 && x.reason == "human_timeout")));
    let r = resolved(&fx);
    assert_eq!(
        (r.level, r.method),
        (4, ResolutionMethod::ConservativeDefault)
    );
    assert_eq!(r.label, "provisional - conservative default");
    assert!(r.provisional && !r.binding);
    assert_eq!(
        r.final_position.as_ref().unwrap().statement,
        "25% operating margin"
    );
    assert_eq!(r.winner.as_deref(), Some("financial_analyst"));
    let p = r.provisional_details.as_ref().unwrap();
    assert_eq!(p.rule, "lowest:operating_margin");
    assert_eq!(p.alternatives[0].statement, "30% operating margin");
    assert_eq!(p.review_deadline, at(200 + 6 * 3600 + 24 * 3600));
    assert_eq!(
        p.downstream_dependencies,
        vec!["dcf_valuation", "risk_assessment"]
    );
    assert_eq!(r.override_window.status, OverrideStatus::Open);
    assert_eq!(
        (d.level, d.state, d.expert.clone()),
        (4, DebateState::Provisional, None)
    );
    // Nothing more fires while it waits for the gate.
    assert!(d.tick(at(10 * 24 * 3600), &timeouts()).is_empty());
}

#[test]
fn overflow_handling_by_priority() {
    let unclear = || assessment((10, 5), (9, 6));
    let mut d = rejected_to_l2("critical-path");
    let fx = d
        .mediate(at(200), &timeouts(), unclear(), &ExpertSlot::Full)
        .unwrap();
    let r = resolved(&fx);
    assert_eq!(
        (r.level, r.method),
        (4, ResolutionMethod::ConservativeDefault)
    );
    assert_eq!(
        r.provisional_details.as_ref().unwrap().trigger,
        "expert_queue_full"
    );

    for p in ["valuation", "supporting"] {
        let mut d = rejected_to_l2(p);
        let fx = d
            .mediate(at(200), &timeouts(), unclear(), &ExpertSlot::Full)
            .unwrap();
        let r = resolved(&fx);
        assert_eq!(r.method, ResolutionMethod::DeferredToGate, "{p}");
        assert!(r.provisional);
        assert_eq!(d.state, DebateState::Provisional);
    }

    let mut d = rejected_to_l2("critical-path");
    let fx = d
        .mediate(
            at(200),
            &timeouts(),
            assessment((95, 5), (30, 70)),
            &ExpertSlot::Full,
        )
        .unwrap();
    let r = resolved(&fx);
    assert_eq!(r.method, ResolutionMethod::Credibility);
    assert!(
        r.rationale.contains("every expert queue was full"),
        "{}",
        r.rationale
    );
}

#[test]
fn unavailable_expert_and_human_decisions() {
    let mut d = rejected_to_l2("valuation");
    d.mediate(
        at(200),
        &timeouts(),
        assessment((10, 5), (9, 6)),
        &ExpertSlot::Claimed("bob".into()),
    )
    .unwrap();
    let mut human = d.clone();
    let fx = d
        .decide(
            at(300),
            &timeouts(),
            &HumanDecision {
                expert: "bob".into(),
                side: None,
                position: None,
                rationale: String::new(),
                unavailable: true,
            },
        )
        .unwrap();
    assert!(fx.contains(&Effect::ReleaseExpert {
        expert: "bob".into()
    }));
    assert_eq!(
        resolved(&fx).provisional_details.as_ref().unwrap().trigger,
        "expert_unavailable"
    );

    let e = human
        .decide(
            at(300),
            &timeouts(),
            &HumanDecision {
                expert: "bob".into(),
                side: None,
                position: None,
                rationale: "x".into(),
                unavailable: false,
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("`side` or a `position`"), "{e}");
    let fx = human
        .decide(
            at(300),
            &timeouts(),
            &HumanDecision {
                expert: "bob".into(),
                side: Some(Side::Challenger),
                position: None,
                rationale: "guidance".into(),
                unavailable: false,
            },
        )
        .unwrap();
    let r = resolved(&fx);
    assert_eq!((r.level, r.method), (3, ResolutionMethod::Human));
    assert_eq!(r.decided_by.as_deref(), Some("bob"));
    assert_eq!(r.winner.as_deref(), Some("strategy_analyst"));
    assert!(r.binding);
}

fn provisional() -> Debate {
    let mut d = rejected_to_l2("critical-path");
    d.mediate(
        at(200),
        &timeouts(),
        assessment((10, 5), (9, 6)),
        &ExpertSlot::Full,
    )
    .unwrap();
    assert_eq!(d.state, DebateState::Provisional);
    d
}

#[test]
fn gate_confirm_makes_the_default_final() {
    let mut d = provisional();
    let fx = d
        .gate_review(
            at(900),
            &GateAction::Confirm {
                reviewer: "gate4".into(),
            },
            None,
        )
        .unwrap();
    let r = resolved(&fx);
    assert_eq!((r.level, r.method), (5, ResolutionMethod::GateConfirm));
    assert!(r.binding && !r.provisional);
    assert_eq!(
        r.final_position.as_ref().unwrap().statement,
        "25% operating margin"
    );
    assert_eq!(
        d.superseded[0].override_window.status,
        OverrideStatus::Closed
    );
    assert_eq!(d.state, DebateState::Resolved);
    let e = d
        .gate_review(
            at(901),
            &GateAction::Confirm {
                reviewer: "gate4".into(),
            },
            None,
        )
        .unwrap_err();
    assert_eq!(e.code(), "wrong_state");
}

#[test]
fn gate_override_needs_a_rationale_and_carries_the_impact() {
    let mut d = provisional();
    let human = margin("28% operating margin (management guidance)", 0.28);
    let bad = GateAction::Override {
        reviewer: "gate4".into(),
        side: None,
        position: Some(human.clone()),
        rationale: " ".into(),
    };
    assert!(d
        .gate_review(at(900), &bad, None)
        .unwrap_err()
        .to_string()
        .contains("rationale"));
    let change = AssumptionChange {
        metric: "operating_margin".into(),
        old_value: 0.25,
        new_value: 0.28,
    };
    let analyses = vec![impact::Analysis {
        analysis_id: "dcf_valuation".into(),
        kind: impact::AnalysisKind::Valuation,
        output_metric: "target_price".into(),
        current_result: Some(85.0),
        rerun_minutes: 5.0,
        inputs: vec![],
        depends_on: vec![],
    }];
    let report = impact::calculate(&change, &analyses, &ImpactParams::default());
    let plan = impact::plan_reruns(&report, &analyses);
    let ok = GateAction::Override {
        reviewer: "gate4".into(),
        side: None,
        position: Some(human.clone()),
        rationale: "Use 28% based on management guidance".into(),
    };
    let fx = d
        .gate_review(at(900), &ok, Some(&OverrideImpact { report, plan }))
        .unwrap();
    let r = resolved(&fx);
    assert_eq!((r.level, r.method), (5, ResolutionMethod::GateOverride));
    assert_eq!(r.final_position.as_ref(), Some(&human));
    assert_eq!(
        r.winner, None,
        "the human's own position is neither agent's"
    );
    let i = r.impact_report.as_ref().unwrap();
    assert!(i.report.impacts[0].requires_rerun);
    assert!(r.impact.contains("1 re-runs required"), "{}", r.impact);
}

#[test]
fn gate_redebate_opens_a_new_debate() {
    let mut d = provisional();
    let fx = d
        .gate_review(
            at(900),
            &GateAction::Redebate {
                reviewer: "gate4".into(),
                context: "Q3 guidance raised".into(),
            },
            None,
        )
        .unwrap();
    assert_eq!(resolved(&fx).method, ResolutionMethod::GateRedebate);
    let req = fx
        .iter()
        .find_map(|e| match e {
            Effect::Redebate(r) => Some(r.as_ref().clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(req.challenge.debate_id.as_deref(), Some("CH-001-r1"));
    assert!(req
        .challenge
        .counter_evidence
        .iter()
        .any(|c| c.contains("Q3 guidance raised")));
    assert_eq!(req.generation, 1);
    let mut again = Debate::open(
        req.challenge,
        req.extensions,
        snapshot(),
        at(901),
        &timeouts(),
    )
    .unwrap();
    again.generation = 1;
    let mut again = {
        again.redebate_of = Some("CH-001".into());
        again
    };
    // Drive the re-debate to provisional and re-debate it again: ids stay flat.
    again.ack("financial_analyst", Some(SNAP), at(902)).unwrap();
    again
        .add_evidence("financial_analyst", &evidence(None), at(903), &timeouts())
        .unwrap();
    let mut v = verdict(false);
    v.debate_id = "CH-001-r1".into();
    again
        .verdict("strategy_analyst", &v, at(904), &timeouts())
        .unwrap();
    again
        .mediate(
            at(905),
            &timeouts(),
            assessment((10, 5), (9, 6)),
            &ExpertSlot::Full,
        )
        .unwrap();
    let fx = again
        .gate_review(
            at(906),
            &GateAction::Redebate {
                reviewer: "g".into(),
                context: "more".into(),
            },
            None,
        )
        .unwrap();
    let next = fx
        .iter()
        .find_map(|e| match e {
            Effect::Redebate(r) => Some(r.challenge.debate_id.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(next.as_deref(), Some("CH-001-r2"));
}

#[test]
fn stored_form_round_trips_and_bad_ids_are_refused() {
    let d = provisional();
    let text = serde_json::to_string(&d).unwrap();
    let back: Debate = serde_json::from_str(&text).unwrap();
    // Floats may differ in the last bit after a JSON round trip; the
    // structure must not.
    assert_eq!(
        (back.level, back.state, &back.history, &back.challenge),
        (d.level, d.state, &d.history, &d.challenge)
    );
    assert_eq!(
        back.resolution.as_ref().map(|r| &r.provisional_details),
        d.resolution.as_ref().map(|r| &r.provisional_details)
    );
    let mut c = challenge("valuation");
    c.debate_id = Some("bad id.x".into());
    let e = Debate::open(c, Default::default(), snapshot(), t0(), &timeouts()).unwrap_err();
    assert!(e.to_string().contains("not allowed"), "{e}");
    let mut c = challenge("valuation");
    c.challenged = c.challenger.clone();
    assert_eq!(
        Debate::open(c, Default::default(), snapshot(), t0(), &timeouts())
            .unwrap_err()
            .code(),
        "invalid_challenge"
    );
}

/// A level-1 debate resolved at `at(secs)` with the challenged agent's
/// evidence standing.
fn resolved_debate(id: &str, secs: u64) -> Debate {
    let mut d = open("supporting");
    d.debate_id = id.into();
    d.ack("financial_analyst", Some(SNAP), at(secs)).unwrap();
    d.add_evidence(
        "financial_analyst",
        &evidence(Some(margin("26% operating margin", 0.26))),
        at(secs),
        &timeouts(),
    )
    .unwrap();
    d.verdict("strategy_analyst", &verdict(true), at(secs), &timeouts())
        .unwrap();
    assert_eq!(d.state, DebateState::Resolved);
    d
}

#[test]
fn precedents_are_similar_debates_resolved_before_the_snapshot() {
    let mut new = open("valuation");
    new.debate_id = "NEW".into();
    new.snapshot.taken_at = at(10_000);
    new.challenge.item = Some("AAPL".into());

    let same = resolved_debate("SAME", 100);
    let mut later = resolved_debate("LATER", 20_000);
    later.debate_id = "LATER".into();
    let mut other_metric = resolved_debate("OTHER", 200);
    for p in [
        &mut other_metric.challenger_position,
        &mut other_metric.challenged_position,
    ] {
        p.as_mut().unwrap().metric = Some("beta".into());
    }
    other_metric.challenge.challenger = "macro".into();
    let mut same_item = resolved_debate("ITEM", 300);
    same_item.challenge.item = Some("AAPL".into());
    let open_one = open("supporting");

    let past = vec![
        same.clone(),
        later,
        other_metric,
        same_item,
        open_one,
        new.clone(),
    ];
    let found = precedents::find(&new, &past);
    let ids: Vec<&str> = found.iter().map(|p| p.debate_id.as_str()).collect();
    assert_eq!(
        ids,
        ["ITEM", "SAME"],
        "closest first; never after the snapshot, never unresolved, never itself, never dissimilar"
    );
    assert_eq!(found[0].similarity, 0.8);
    assert_eq!(found[0].matched, ["metric", "agents", "item"]);
    assert_eq!(found[1].similarity, 0.7);
    assert_eq!(found[1].outcome, "26% operating margin");
    assert_eq!(found[1].winner.as_deref(), Some("financial_analyst"));
    assert_eq!(found[1].level, 1);
    assert!(!found[1].overridden);

    let many: Vec<Debate> = (0..9)
        .map(|i| resolved_debate(&format!("P{i}"), 100 + i))
        .collect();
    let found = precedents::find(&new, &many);
    assert_eq!(found.len(), precedents::MAX_PRECEDENTS);
    assert_eq!(
        found[0].debate_id, "P8",
        "equally similar: most recent first"
    );
}

#[test]
fn agreed_and_human_outcomes_feed_the_track_records_and_the_machines_own_do_not() {
    // Level 1: the challenger accepts the challenged agent's evidence.
    let d = resolved_debate("L1", 100);
    let r = d.resolution.clone().unwrap();
    let recs = outcomes::track_records(&d, &r, "BULL_LOW_RATES");
    let by = |a: &str| recs.iter().find(|t| t.agent == a).unwrap().clone();
    assert_eq!(recs.len(), 2);
    assert_eq!(by("financial_analyst").outcome, 1.0);
    assert_eq!(by("strategy_analyst").outcome, 0.0);
    assert_eq!(
        by("financial_analyst").context.metric.as_deref(),
        Some("operating_margin")
    );
    assert_eq!(
        by("financial_analyst").regime.as_deref(),
        Some("BULL_LOW_RATES")
    );
    assert!(recs.iter().all(|t| !t.overridden && t.at == r.resolved_at));

    // Level 4 (provisional) says nothing; its confirmation does.
    let mut d = provisional();
    let r = d.resolution.clone().unwrap();
    assert!(outcomes::track_records(&d, &r, "").is_empty());
    let fx = d
        .gate_review(
            at(900),
            &GateAction::Confirm {
                reviewer: "gate4".into(),
            },
            None,
        )
        .unwrap();
    let recs = outcomes::track_records(&d, resolved(&fx), "");
    let by = |a: &str| recs.iter().find(|t| t.agent == a).unwrap().clone();
    assert_eq!(by("financial_analyst").outcome, 1.0, "25% stood");
    assert_eq!(by("strategy_analyst").outcome, 0.0);

    // A person's own 28 %: the challenger's 30 % was closer than 25 %, and
    // the provisionally applied 25 % was overridden.
    let mut d = provisional();
    let fx = d
        .gate_review(
            at(900),
            &GateAction::Override {
                reviewer: "gate4".into(),
                side: None,
                position: Some(margin("28% operating margin", 0.28)),
                rationale: "guidance".into(),
            },
            None,
        )
        .unwrap();
    let recs = outcomes::track_records(&d, resolved(&fx), "");
    let by = |a: &str| recs.iter().find(|t| t.agent == a).unwrap().clone();
    assert_eq!(by("strategy_analyst").outcome, 1.0);
    assert_eq!(by("financial_analyst").outcome, 0.0);
    assert!(by("financial_analyst").overridden);
    assert!(!by("strategy_analyst").overridden);

    // Level 2 is the facilitator's own judgment: not fed back.
    assert!(!outcomes::counts(ResolutionMethod::Credibility));
    assert!(!outcomes::counts(ResolutionMethod::ConservativeDefault));
    assert!(!outcomes::counts(ResolutionMethod::DeferredToGate));
    assert!(!outcomes::counts(ResolutionMethod::GateRedebate));
}

#[test]
fn the_precedent_index_follows_the_stored_versions() {
    let idx = precedents::PrecedentIndex::default();
    let mut new = open("valuation");
    new.debate_id = "NEW".into();
    new.snapshot.taken_at = at(10_000);
    // Open, then resolved: indexed only once resolved.
    let mut d = open("supporting");
    d.debate_id = "P1".into();
    idx.observe(&d);
    assert!(idx.is_empty(), "an open debate is no precedent");
    let d = resolved_debate("P1", 100);
    idx.observe(&d);
    idx.observe(&d);
    assert_eq!(idx.len(), 1, "one entry per debate");
    assert_eq!(idx.find(&new)[0].debate_id, "P1");
    assert_eq!(
        idx.find(&new),
        precedents::find(&new, std::slice::from_ref(&d)),
        "the index and the plain search agree"
    );
    idx.remove("P1");
    assert!(idx.find(&new).is_empty());
}

#[test]
fn debates_over_synthetic_data_feed_no_track_record() {
    let mut d = resolved_debate("L1", 100);
    let r = d.resolution.clone().unwrap();
    assert_eq!(outcomes::track_records(&d, &r, "").len(), 2);
    d.challenge.synthetic = true;
    assert!(outcomes::track_records(&d, &r, "").is_empty());
}

/// Replies carry stored debates as the shared `DebateRecord`: every stored
/// shape (open, provisional with its assessment, overridden with an impact
/// report and a superseded resolution, resolved with precedents) must
/// decode as it and re-encode to the same JSON, so the two cannot drift.
#[test]
fn stored_debates_are_the_shared_debate_record() {
    use caucus_shared::api::facilitator::DebateRecord;
    let mut overridden = provisional();
    overridden
        .gate_review(
            at(900),
            &GateAction::Override {
                reviewer: "gate4".into(),
                side: Some(Side::Challenged),
                position: None,
                rationale: "guidance".into(),
            },
            None,
        )
        .unwrap();
    let mut with_precedents = open("valuation");
    with_precedents.snapshot.taken_at = at(10_000);
    with_precedents.precedents =
        precedents::find(&with_precedents, &[resolved_debate("SAME", 100)]);
    assert!(!with_precedents.precedents.is_empty());
    for d in [
        open("supporting"),
        provisional(),
        overridden,
        with_precedents,
    ] {
        let stored = serde_json::to_value(&d).unwrap();
        let view: DebateRecord = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(&view).unwrap(),
            stored,
            "{}",
            d.debate_id
        );
        let converted = DebateRecord::from(d);
        assert_eq!(serde_json::to_value(&converted).unwrap(), stored);
    }
}
