//! `facilitator.gate_review` with `dry_run` on real servers: an override's
//! impact report before committing. The dry run returns the report the
//! commit then records, and changes nothing: the stored debate is the same
//! field for field, no resolution is published, and the override stays
//! possible. Other actions refuse `dry_run`, and a dry run is refused
//! where the commit would be.

use std::time::Duration;

use crate::facilitator_common::*;
use caucus_harness::Stack;
use serde_json::{json, Value};

const S: &str = "strategy_analyst";
const F: &str = "financial_analyst";
const WAIT: Duration = Duration::from_secs(20);

/// The seed's downstream analyses of an operating-margin assumption.
fn analyses() -> Value {
    json!([
        {"analysis_id": "dcf_valuation", "kind": "valuation", "output_metric": "target_price", "current_result": 85.0, "rerun_minutes": 5},
        {"analysis_id": "sensitivity_analysis", "kind": "sensitivity", "output_metric": "target_price", "current_result": 85.0, "rerun_minutes": 10, "depends_on": ["dcf_valuation"]},
        {"analysis_id": "risk_assessment", "kind": "risk_assessment", "output_metric": "confidence_score", "current_result": 0.6, "rerun_minutes": 3},
        {"analysis_id": "peer_comparison", "kind": "other", "output_metric": "context", "rerun_minutes": 2}
    ])
}

/// The seed's override: 28 % instead of the conservative 25 %.
fn override_review(dry_run: bool) -> Value {
    let mut r = json!({
        "debate_id": "CH-DRY", "action": "override", "reviewer": "gate4",
        "rationale": "Use 28% based on management guidance",
        "position": {"statement": "28% operating margin", "metric": "operating_margin", "value": 0.28},
        "analyses": analyses()
    });
    if dry_run {
        r["dry_run"] = json!(true);
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_reports_the_impact_the_override_then_records_and_changes_nothing() {
    let stack = Stack::start();
    let _f = facilitator(&stack, &[("CAUCUS_FACILITATOR_HUMAN_TIMEOUT", "700ms")]);
    let c = Client::connect(&stack).await;
    let _s = Agent::start(&c, S, Flush::Now).await;
    let _a = Agent::start(&c, F, Flush::Now).await;
    open(&c, "CH-DRY", "valuation", S, F).await;
    let before = c
        .wait_debate("CH-DRY", "the provisional decision", WAIT, |d| {
            d["state"] == "provisional"
        })
        .await;
    // The provisional decision is published after it is stored.
    let published = poll("the provisional resolution event", WAIT, || async {
        let e = c.events("CH-DRY", "resolution").await;
        (!e.is_empty()).then_some(e.len())
    })
    .await;

    // A dry run of anything but an override is refused, naming dry_run.
    for action in [
        json!({"action": "confirm", "reviewer": "gate4"}),
        json!({"action": "redebate", "reviewer": "gate4", "context": "Q3 is out"}),
    ] {
        let mut req = action.clone();
        req["debate_id"] = json!("CH-DRY");
        req["dry_run"] = json!(true);
        let e = c.call("gate_review", req).await.unwrap_err();
        assert_eq!(e.code, "bad_request", "{action}: {e:?}");
        assert!(e.message.contains("dry_run"), "{e:?}");
    }
    // A dry run is refused where the commit would be: no rationale.
    let mut bad = override_review(true);
    bad["rationale"] = json!(" ");
    let e = c.call("gate_review", bad).await.unwrap_err();
    assert!(e.message.contains("rationale"), "{e:?}");

    // The dry run: the seed's impact report …
    let dry = c.call("gate_review", override_review(true)).await.unwrap();
    let impact = dry["impact"].clone();
    let dcf = impact["report"]["impacts"]
        .as_array()
        .expect("impacts")
        .iter()
        .find(|i| i["analysis_id"] == "dcf_valuation")
        .expect("dcf_valuation")
        .clone();
    assert_eq!(dcf["old_value"], 85.0, "{dcf}");
    assert_eq!(dcf["estimated_new_value"], 95.2, "{dcf}");
    assert_eq!(dcf["requires_rerun"], true, "{dcf}");
    assert_eq!(impact["report"]["total_rerun_minutes"], 15.0, "{impact}");
    assert_eq!(impact["plan"]["blocking"], true, "{impact}");
    // … about the debate as it stands: still provisional, nobody decided.
    assert_eq!(dry["debate"]["state"], "provisional", "{dry}");
    assert_eq!(dry["resolution"]["provisional"], true, "{dry}");
    assert!(dry["resolution"]["decided_by"].is_null(), "{dry}");
    assert!(dry["redebate_id"].is_null(), "{dry}");

    // Nothing changed: the stored debate, its events, the queue of
    // provisional decisions.
    assert_eq!(c.debate("CH-DRY").await, before);
    assert_eq!(c.events("CH-DRY", "resolution").await.len(), published);
    let prov = c.call("provisional", json!({})).await.unwrap();
    assert_eq!(prov["count"], 1, "{prov}");

    // The commit reports and records the very same impact.
    let done = c.call("gate_review", override_review(false)).await.unwrap();
    assert_eq!(done["resolution"]["method"], "gate_override", "{done}");
    assert_eq!(done["resolution"]["decided_by"], "gate4", "{done}");
    assert_eq!(done["impact"], impact);
    let after = c.debate("CH-DRY").await;
    assert_eq!(after["state"], "resolved", "{after}");
    assert_eq!(after["resolution"]["impact_report"], impact);
    let events = poll("the override's resolution event", WAIT, || async {
        let e = c.events("CH-DRY", "resolution").await;
        (e.len() > published).then_some(e)
    })
    .await;
    assert_eq!(events.len(), published + 1, "one resolution published");
    assert_eq!(c.call("provisional", json!({})).await.unwrap()["count"], 0);

    // Once resolved, a dry run is refused like the override itself.
    let e = c
        .call("gate_review", override_review(true))
        .await
        .unwrap_err();
    assert_eq!(e.code, "wrong_state", "{e:?}");
}
