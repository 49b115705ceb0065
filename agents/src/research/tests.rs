use std::collections::BTreeMap;

use chrono::{TimeZone, Utc};
use serde_json::{json, Value};

use caucus_shared::task::TaskDispatch;

use super::run;

fn task(
    agent: &str,
    shard: Option<u32>,
    inputs: BTreeMap<String, Value>,
    params: Value,
) -> TaskDispatch {
    TaskDispatch {
        schema_version: 1,
        task_id: "w/t".into(),
        workflow_id: "w".into(),
        item: "solid-state batteries".into(),
        pipeline: "deep-research".into(),
        stage: agent.into(),
        agent_type: agent.into(),
        attempt: 1,
        shard,
        inputs,
        params,
        expected_ms: 0,
        timeout_ms: 0,
        priority: 0.0,
        dispatched_at: Utc.with_ymd_and_hms(2026, 1, 1, 10, 0, 0).unwrap(),
        partition: None,
    }
}

fn chain(streams: u32, discover: Value) -> BTreeMap<&'static str, Value> {
    let outs: Vec<Value> = (0..streams)
        .map(|i| {
            run(&task(
                "research_discovery",
                Some(i),
                BTreeMap::new(),
                discover.clone(),
            ))
            .unwrap()
            .unwrap_or(Value::Null)
        })
        .collect();
    let mut out = BTreeMap::new();
    let mut prev = ("discover", Value::Array(outs));
    for (stage, agent) in [
        ("consolidate", "research_consolidation"),
        ("validate", "research_validation"),
        ("analyze", "research_analysis"),
        ("synthesize", "research_synthesis"),
    ] {
        let inputs = BTreeMap::from([(prev.0.to_string(), prev.1.clone())]);
        let o = run(&task(agent, None, inputs, Value::Null))
            .unwrap()
            .unwrap();
        out.insert(prev.0, prev.1);
        prev = (stage, o);
    }
    out.insert(prev.0, prev.1);
    out
}

#[test]
fn discovery_is_deterministic_and_writes_its_own_stream_only() {
    let t = task("research_discovery", Some(2), BTreeMap::new(), Value::Null);
    let a = run(&t).unwrap().unwrap();
    assert_eq!(a, run(&t).unwrap().unwrap());
    let n = a["sources"].as_array().unwrap().len();
    assert!((5..=8).contains(&n), "{n}");
    assert_eq!(a["stream"], 3);
    for w in a["writes"].as_array().unwrap() {
        assert!(
            w["key"].as_str().unwrap().starts_with("streams/stream-3/"),
            "{w}"
        );
    }
    let p = json!({"fail_streams": [3]});
    let e = run(&task("research_discovery", Some(2), BTreeMap::new(), p))
        .unwrap()
        .unwrap_err();
    assert_eq!(e.error_type, "discovery_failed");
    let p = json!({"stream_sources": {"3": 4}, "rogue_streams": [3]});
    let o = run(&task("research_discovery", Some(2), BTreeMap::new(), p))
        .unwrap()
        .unwrap();
    assert_eq!(o["sources"].as_array().unwrap().len(), 4);
    let keys: Vec<&str> = o["writes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"streams/stream-1/injected.md"), "{keys:?}");
    assert!(run(&task("valuation", None, BTreeMap::new(), Value::Null)).is_none());
}

#[test]
fn the_chain_meets_the_seed_gates_even_with_two_streams() {
    for streams in [5, 2] {
        let c = chain(streams, Value::Null);
        let merged = c["consolidate"]["sources"].as_array().unwrap().len();
        assert!(merged >= 10, "{merged}");
        let v = c["validate"]["sources"].as_array().unwrap();
        let valid = v.iter().filter(|s| s["validated"] == true).count();
        assert!(valid as f64 / v.len() as f64 >= 0.6);
        assert!(c["analyze"]["patterns"].as_array().unwrap().len() >= 3);
        assert!(c["analyze"]["insights"].as_array().unwrap().len() >= 5);
        let s = &c["synthesize"]["sections"];
        for k in [
            "executive_summary",
            "findings",
            "recommendations",
            "citations",
        ] {
            assert!(!s[k].is_null(), "{k}");
        }
        assert!(c["synthesize"]["markdown"]
            .as_str()
            .unwrap()
            .contains("## Citations"));
    }
}

#[test]
fn a_failed_stream_is_skipped_by_consolidation() {
    let outs = json!([{"stream": 1, "sources": [{"url": "u1"}, {"url": "u2"}]}, null, {"stream": 3, "sources": [{"url": "u1"}]}]);
    let inputs = BTreeMap::from([("discover".to_string(), outs)]);
    let o = run(&task("research_consolidation", None, inputs, Value::Null))
        .unwrap()
        .unwrap();
    assert_eq!(o["sources"].as_array().unwrap().len(), 2);
    assert_eq!(o["streams_missing"], json!([2]));
    assert_eq!(o["duplicates_removed"], 1);
    let e = run(&task(
        "research_validation",
        None,
        BTreeMap::new(),
        Value::Null,
    ))
    .unwrap()
    .unwrap_err();
    assert_eq!(e.error_type, "bad_input");
}
