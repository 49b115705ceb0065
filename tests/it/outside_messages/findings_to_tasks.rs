//! Findings reach the tasks they are addressed to: the seed's finding end
//! to end, with an exec agent and with the built-in agents, addressing and
//! bounds, and a coordinator that takes over.

use std::time::Duration;

use caucus_harness::Stack;
use caucus_shared::inbound::InputFinding;
use serde_json::json;

use super::support::{
    assert_no_dead_letters, coordinator_reading, findings_handled, findings_of, handled, package,
    poll, submit_held, valuation_pipeline, wait_gate, Outside, Recorder, SEED_FINDING, SEED_TEXT,
};
use crate::common::{coordinator, eventually, stream_messages, worker, Api};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_finding_reaches_the_valuation_task_its_sender_and_the_gate() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    // Published as soon as the coordinator says it is ready, while its
    // term may still be starting: the finding must be held once either way.
    outside
        .publish("caucus.findings.AAPL", SEED_FINDING.as_bytes())
        .await;
    let published = chrono::Utc::now();
    findings_handled(&api).await;
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;

    // (a) The valuation task received it in inputs.findings.
    let d = rec.dispatch_of(&wf, "valuation").await;
    let got = findings_of(&d);
    let seed: Vec<&InputFinding> = got
        .iter()
        .filter(|f| f.from_agent == "financial_analyst")
        .collect();
    assert_eq!(
        seed.len(),
        1,
        "the valuation dispatch should carry the seed's finding once in inputs.findings; inputs: {:?}",
        d.inputs
    );
    let f = seed[0];
    assert!(!f.id.is_empty(), "the finding has an id: {f:?}");
    assert_eq!(f.to_agent, "valuation_agent", "to_agent as sent: {f:?}");
    assert_eq!(
        f.priority,
        caucus_shared::envelope::Priority::High,
        "priority: {f:?}"
    );
    assert!(f.requires_response, "requires_response: {f:?}");
    assert_eq!(f.text(), SEED_TEXT, "content.finding: {f:?}");
    assert_eq!(f.content["confidence"], 0.85, "content as sent: {f:?}");
    assert_eq!(
        f.content["evidence"],
        json!(["10-K p.47"]),
        "evidence: {f:?}"
    );
    assert_eq!(f.impact(), Some("Adjust FCF projections"), "impact: {f:?}");
    let skew = chrono::Duration::seconds(5);
    assert!(
        f.stored_at <= d.dispatched_at && f.stored_at > published - skew,
        "stored_at {} should be the JetStream time of the publish (~{published}) and before the dispatch at {}",
        f.stored_at,
        d.dispatched_at
    );

    // (b) Its sender gets a confirmation on caucus.msg.financial_analyst.
    let id = f.id.clone();
    let confirmation = eventually(
        "a confirmation of the seed's finding on caucus.msg.financial_analyst",
        Duration::from_secs(15),
        || async {
            stream_messages(&api.nats, "CAUCUS_MESSAGES", "caucus.msg.financial_analyst")
                .await
                .into_iter()
                .find(|m| {
                    m.body["message_type"] == "confirmation" && m.body["correlation_id"] == id
                })
        },
    )
    .await;
    let c = &confirmation.body;
    assert_eq!(
        c["from_agent"], "valuation",
        "confirmed by the agent type: {c}"
    );
    assert_eq!(c["content"]["in_reply_to"], json!(id), "in_reply_to: {c}");
    assert_eq!(
        c["content"]["used"], true,
        "the agent's `responses` said used: {c}"
    );
    assert_eq!(
        c["content"]["note"], "raised capex in the FCF projection",
        "the agent's note: {c}"
    );
    assert_eq!(
        confirmation.msg_id.as_deref(),
        Some(format!("confirm:{id}:valuation").as_str()),
        "the confirmation's Nats-Msg-Id de-duplicates re-runs"
    );
    // The worker confirms before it publishes `completed`: wait for the
    // output, or the check below would pass on a record without one.
    let out = poll(
        "the valuation's output in the workflow record",
        Duration::from_secs(20),
        || async {
            let out = api.status(std::slice::from_ref(&wf)).await[0]["tasks"]["valuation"]
                ["output"]
                .clone();
            if out.is_null() {
                Err("no output yet".to_string())
            } else {
                Ok(out)
            }
        },
    )
    .await;
    assert!(
        out.get("responses").is_none(),
        "the worker lifts `responses` out of the output: {out}"
    );

    // The coordinator reads the confirmation (it answers the awaited
    // response); nothing on the way was dead-lettered.
    handled(&api, "coordinator-messages", "CAUCUS_MESSAGES").await;
    assert_no_dead_letters(&api, "when the seed's finding is delivered and confirmed").await;

    // (c) The gate's package lists it as an outside finding for valuation,
    // answered and used.
    wait_gate(&api, &wf, "review").await;
    let listed = poll(
        "the seed's finding listed as answered in the decision package",
        Duration::from_secs(15),
        || async {
            let pkg = package(&api, &wf).await;
            let f = pkg["findings"]
                .as_array()
                .and_then(|fs| fs.iter().find(|f| f["finding"] == SEED_TEXT))
                .ok_or_else(|| format!("not listed; findings: {}", pkg["findings"]))?;
            if f["answered"] == true {
                Ok(f.clone())
            } else {
                Err(format!("listed but not answered: {f}"))
            }
        },
    )
    .await;
    assert_eq!(listed["source"], "outside", "{listed}");
    assert_eq!(listed["from_agent"], "financial_analyst", "{listed}");
    assert_eq!(listed["to_agent"], "valuation_agent", "{listed}");
    assert_eq!(listed["priority"], "high", "{listed}");
    assert_eq!(listed["confidence"], 0.85, "{listed}");
    assert_eq!(listed["evidence"], json!(["10-K p.47"]), "{listed}");
    assert_eq!(
        listed["late"], false,
        "it came before the analysis: {listed}"
    );
    assert_eq!(listed["requires_response"], true, "{listed}");
    assert_eq!(listed["used"], true, "{listed}");
    assert_eq!(
        listed["finding_id"],
        json!(id),
        "the package names the finding by the id the task and the confirmation used: {listed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_valuation_applies_the_seeds_finding_and_says_how() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _w = worker(
        &stack,
        "screening,business,financial,strategy,valuation,report",
        2,
        "builtin",
        &[],
    );
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    outside
        .publish("caucus.findings.AAPL", SEED_FINDING.as_bytes())
        .await;
    findings_handled(&api).await;
    let wf = submit_held(&api, "AAPL", json!("stock-analysis")).await;

    let conf = poll(
        "valuation's confirmation of the seed's finding on caucus.msg.financial_analyst",
        Duration::from_secs(20),
        || async {
            let msgs =
                stream_messages(&api.nats, "CAUCUS_MESSAGES", "caucus.msg.financial_analyst").await;
            let seen: Vec<String> = msgs.iter().map(|m| m.body.to_string()).collect();
            msgs.into_iter()
                .find(|m| {
                    m.body["message_type"] == "confirmation" && m.body["from_agent"] == "valuation"
                })
                .ok_or_else(|| format!("messages {seen:?}"))
        },
    )
    .await;
    let c = &conf.body["content"];
    assert_eq!(c["used"], true, "the built-in valuation applied it: {c}");
    assert!(
        c["note"].as_str().is_some_and(|n| n.contains("capex")),
        "the note says how it was applied: {c}"
    );
    let id = conf.body["correlation_id"].clone();
    let ids = vec![wf.clone()];
    // The worker confirms before it publishes `completed`: the record may
    // not hold the output yet when the confirmation is seen.
    let out = poll(
        "the valuation's output in the workflow record",
        Duration::from_secs(20),
        || async {
            let out = api.status(&ids).await[0]["tasks"]["valuation"]["output"].clone();
            if out.is_null() {
                Err("no output yet".to_string())
            } else {
                Ok(out)
            }
        },
    )
    .await;
    let applied = out["applied_findings"]
        .as_array()
        .unwrap_or_else(|| panic!("the valuation output lists applied_findings: {out}"));
    assert!(
        applied.iter().any(|a| a["finding_id"] == id),
        "applied_findings names the finding {id}: {out}"
    );

    wait_gate(&api, &wf, "review").await;
    let listed = poll(
        "the seed's finding listed as answered and used in the decision package",
        Duration::from_secs(15),
        || async {
            let pkg = package(&api, &wf).await;
            let f = pkg["findings"]
                .as_array()
                .and_then(|fs| fs.iter().find(|f| f["finding"] == SEED_TEXT))
                .ok_or_else(|| format!("not listed; findings: {}", pkg["findings"]))?;
            if f["answered"] == true {
                Ok(f.clone())
            } else {
                Err(format!("listed but not answered: {f}"))
            }
        },
    )
    .await;
    assert_eq!(listed["used"], true, "{listed}");
    assert_eq!(listed["source"], "outside", "{listed}");
    assert_eq!(listed["finding_id"], id, "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_gets_the_newest_findings_addressed_to_its_type_oldest_first() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[("CAUCUS_COORDINATOR_FINDINGS_PER_TASK", "3")]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    // Every spelling of valuation, and `all`, addresses the valuation task;
    // strategy's finding and the one without to_agent do not; the oldest
    // of the four for valuation is left out (three per task).
    for (to, text) in [
        (Some("valuation"), "first, left out"),
        (Some("VALUATION_AGENT"), "second"),
        (Some("strategy_agent"), "for strategy"),
        (None, "for whoever reads"),
        (Some("valuation_analyst"), "third"),
        (Some("all"), "fourth"),
    ] {
        let to = to
            .map(|t| format!(r#""to_agent":"{t}","#))
            .unwrap_or_default();
        let body = format!(
            r#"{{"message_type":"finding","from_agent":"desk",{to}"priority":"normal","content":{{"finding":"{text}","confidence":0.5,"evidence":[]}}}}"#
        );
        outside.publish("caucus.findings.AAPL", body).await;
    }
    outside
        .publish(
            "caucus.findings.MSFT",
            r#"{"message_type":"finding","from_agent":"desk","to_agent":"valuation","priority":"normal","content":{"finding":"about another item","confidence":0.5,"evidence":[]}}"#
                .as_bytes(),
        )
        .await;
    findings_handled(&api).await;
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;
    let d = rec.dispatch_of(&wf, "valuation").await;
    assert_eq!(
        findings_of(&d)
            .iter()
            .map(InputFinding::text)
            .collect::<Vec<_>>(),
        vec!["second", "third", "fourth"],
        "the newest three addressed to valuation about AAPL, oldest first: {:?}",
        d.inputs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_findings_stay_within_the_byte_bound_newest_kept() {
    let stack = Stack::start();
    let limit = 1200;
    let _c = coordinator(
        &stack,
        &[(
            "CAUCUS_COORDINATOR_FINDINGS_BYTES_PER_TASK",
            &limit.to_string(),
        )],
    );
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    // Four findings of about 450 bytes each: not all fit in 1200.
    let pad = "e".repeat(300);
    for n in 1..=4 {
        let body = format!(
            r#"{{"message_type":"finding","from_agent":"desk","to_agent":"valuation","priority":"normal","content":{{"finding":"number {n}","confidence":0.5,"evidence":["{pad}"]}}}}"#
        );
        outside.publish("caucus.findings.AAPL", body).await;
    }
    findings_handled(&api).await;
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;
    let d = rec.dispatch_of(&wf, "valuation").await;
    let got = findings_of(&d);
    let size = serde_json::to_vec(&d.inputs["findings"])
        .expect("serialises")
        .len();
    let texts: Vec<&str> = got.iter().map(InputFinding::text).collect();
    assert!(
        size <= limit,
        "inputs.findings is {size} bytes, over the {limit} byte bound: {texts:?}"
    );
    assert!(
        !texts.is_empty() && texts.last() == Some(&"number 4"),
        "the newest finding is kept (older ones are left out first): {texts:?}"
    );
    assert!(
        !texts.contains(&"number 1"),
        "the oldest is left out: {texts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_that_takes_over_hands_out_the_finding_once() {
    let stack = Stack::start();
    let mut first = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    outside
        .publish("caucus.findings.AAPL", SEED_FINDING.as_bytes())
        .await;
    findings_handled(&api).await;
    // The finding was held in the first coordinator's memory only: the
    // next one reads it back from the stream when its term begins.
    first.kill();
    let _second = coordinator(&stack, &[]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;
    let d = rec.dispatch_of(&wf, "valuation").await;
    let got = findings_of(&d);
    assert_eq!(
        got.iter().map(InputFinding::text).collect::<Vec<_>>(),
        vec![SEED_TEXT],
        "the new coordinator hands the seed's finding to the valuation task, once: {:?}",
        d.inputs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_senders_id_with_any_characters_is_kept_and_answered() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    let id = "10-K/p.47 #1:capex.é";
    let body = SEED_FINDING.replacen('{', &format!(r#"{{"id":"{id}","#), 1);
    outside.publish("caucus.findings.AAPL", body).await;
    findings_handled(&api).await;
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;
    let d = rec.dispatch_of(&wf, "valuation").await;
    let got = findings_of(&d);
    assert_eq!(
        got.iter().map(|f| f.id.as_str()).collect::<Vec<_>>(),
        vec![id],
        "the task gets the finding under the sender's id: {:?}",
        d.inputs
    );
    wait_gate(&api, &wf, "review").await;
    let listed = poll(
        "the finding listed as answered under the sender's id",
        Duration::from_secs(15),
        || async {
            let pkg = package(&api, &wf).await;
            let f = pkg["findings"]
                .as_array()
                .and_then(|fs| fs.iter().find(|f| f["finding_id"] == id))
                .ok_or_else(|| format!("not listed by id; findings: {}", pkg["findings"]))?;
            if f["answered"] == true {
                Ok(f.clone())
            } else {
                Err(format!("listed but not answered: {f}"))
            }
        },
    )
    .await;
    assert_eq!(listed["used"], true, "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finding_about_an_item_with_a_dot_reaches_its_task() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    // `BRK.B` as one subject token: the dot is written ~2E (PROTOCOL.md).
    outside
        .publish("caucus.findings.BRK~2EB", SEED_FINDING.as_bytes())
        .await;
    findings_handled(&api).await;
    let wf = submit_held(&api, "BRK.B", valuation_pipeline()).await;
    let d = rec.dispatch_of(&wf, "valuation").await;
    assert_eq!(
        findings_of(&d)
            .iter()
            .map(InputFinding::text)
            .collect::<Vec<_>>(),
        vec![SEED_TEXT],
        "the BRK.B task gets the finding published on caucus.findings.BRK~2EB: {:?}",
        d.inputs
    );
}
