//! A finding that arrives after the analysis it concerns.

use std::time::Duration;

use caucus_harness::Stack;
use serde_json::{json, Value};

use super::support::{
    coordinator_reading, findings_handled, package, submit_held, valuation_pipeline, wait_gate,
    Outside, Recorder,
};
use crate::common::{coordinator, eventually, stream_messages, worker, Api};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_critical_finding_after_the_valuation_flags_the_workflow_at_its_gate() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;
    wait_gate(&api, &wf, "review").await;

    // A normal-priority finding after the analysis is late too, but does
    // not flag the workflow; the critical one after it does.
    let minor = r#"{"id":"late-minor-1","message_type":"finding","from_agent":"financial_analyst","to_agent":"valuation","priority":"normal","content":{"finding":"Footnote wording changed","confidence":0.5,"evidence":["10-K p.80"]}}"#;
    outside
        .publish("caucus.findings.AAPL", minor.as_bytes())
        .await;
    let late = r#"{"id":"late-capex-1","message_type":"finding","from_agent":"financial_analyst","to_agent":"valuation_agent","priority":"critical","content":{"finding":"Capex guidance withdrawn","confidence":0.9,"evidence":["8-K item 7.01"],"impact":"Re-run the DCF"}}"#;
    outside
        .publish("caucus.findings.AAPL", late.as_bytes())
        .await;

    let ids = vec![wf.clone()];
    let flag = eventually(
        "a late_finding flag on the workflow waiting at its gate",
        Duration::from_secs(15),
        || async {
            let w = api.status(&ids).await.pop()?;
            w["flags"]
                .as_array()?
                .iter()
                .find(|f| f["kind"] == "late_finding")
                .cloned()
        },
    )
    .await;
    let detail = &flag["detail"];
    assert_eq!(detail["id"], "late-capex-1", "{flag}");
    assert_eq!(detail["from_agent"], "financial_analyst", "{flag}");
    assert_eq!(detail["to_agent"], "valuation_agent", "{flag}");
    assert_eq!(detail["priority"], "critical", "{flag}");
    assert_eq!(detail["finding"], "Capex guidance withdrawn", "{flag}");
    assert_eq!(detail["impact"], "Re-run the DCF", "{flag}");
    assert_eq!(
        detail["stages"],
        json!(["valuation"]),
        "it arrived after the valuation stage: {flag}"
    );
    findings_handled(&api).await;
    let w = api.status(&ids).await.pop().expect("status");
    assert_eq!(w["reevaluate"], true, "{w}");
    let late_flags: Vec<&Value> = w["flags"]
        .as_array()
        .map(|fs| fs.iter().filter(|f| f["kind"] == "late_finding").collect())
        .unwrap_or_default();
    assert_eq!(
        late_flags.len(),
        1,
        "only the critical finding flags the workflow (normal priority does not): {w}"
    );
    assert_eq!(w["state"], "running", "still waiting at its gate: {w}");

    let pkg = package(&api, &wf).await;
    let listed = pkg["late_findings"]
        .as_array()
        .unwrap_or_else(|| panic!("the package has no late_findings list: {pkg}"));
    let l = listed
        .iter()
        .find(|l| l["id"] == "late-capex-1")
        .unwrap_or_else(|| panic!("the late finding is not under late_findings: {pkg}"));
    assert_eq!(l["stages"], json!(["valuation"]), "{l}");
    assert!(
        l["rerun"].as_str().is_some_and(|r| r.contains(&wf)),
        "the package says how to re-run the stages from this gate: {l}"
    );
    let f = pkg["findings"]
        .as_array()
        .and_then(|fs| {
            fs.iter()
                .find(|f| f["finding"] == "Capex guidance withdrawn")
        })
        .unwrap_or_else(|| panic!("the late finding is not in the package's findings: {pkg}"));
    assert_eq!(f["late"], true, "{f}");
    assert_eq!(f["source"], "outside", "{f}");
    assert_eq!(
        f["rerun_stages"],
        json!(["valuation"]),
        "re-running valuation applies it: {f}"
    );
    let minor = pkg["findings"]
        .as_array()
        .and_then(|fs| {
            fs.iter()
                .find(|f| f["finding"] == "Footnote wording changed")
        })
        .unwrap_or_else(|| {
            panic!("the normal late finding is not in the package's findings: {pkg}")
        });
    assert_eq!(
        minor["late"], true,
        "it arrived after the analysis: {minor}"
    );
    assert!(
        minor["answered"].is_null() && minor["requires_response"] == false,
        "no response was asked, so none is awaited: {minor}"
    );
    assert!(
        !listed.iter().any(|l| l["id"] == "late-minor-1"),
        "late_findings holds only the findings that flagged the workflow: {pkg}"
    );
    assert_eq!(
        pkg["can_approve"], true,
        "a late finding does not block approval: {pkg}"
    );
    // People hear of it: an alert card naming the finding and the workflow.
    let card = eventually(
        "an alert card about the late finding",
        Duration::from_secs(10),
        || async {
            stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>")
                .await
                .into_iter()
                .find(|a| a.body["content"]["detail"]["id"] == "late-capex-1")
        },
    )
    .await;
    let c = &card.body["content"];
    assert_eq!(c["kind"], "late_finding", "{c}");
    assert!(
        c["workflows"]
            .as_array()
            .is_some_and(|ws| ws.iter().any(|w| w["workflow_id"] == json!(wf))),
        "the card names the flagged workflow {wf}: {c}"
    );
}

/// The late-finding cards about `id` so far.
async fn late_cards(api: &Api, id: &str) -> Vec<Value> {
    stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>")
        .await
        .into_iter()
        .filter(|a| a.body["content"]["detail"]["id"] == id)
        .map(|a| a.body)
        .collect()
}

/// A critical finding to valuation with `id`, as an outside service sends it.
fn critical(id: &str, text: &str) -> String {
    format!(
        r#"{{"id":"{id}","message_type":"finding","from_agent":"financial_analyst","to_agent":"valuation_agent","priority":"critical","content":{{"finding":"{text}","confidence":0.9,"evidence":["8-K"]}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_keeps_the_late_flag_and_does_not_repeat_its_card() {
    let stack = Stack::start();
    let mut first = coordinator(&stack, &[]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;
    wait_gate(&api, &wf, "review").await;
    outside
        .publish(
            "caucus.findings.AAPL",
            critical("late-a", "Capex guidance withdrawn"),
        )
        .await;
    eventually("the card of late-a", Duration::from_secs(15), || async {
        (!late_cards(&api, "late-a").await.is_empty()).then_some(())
    })
    .await;
    findings_handled(&api).await;

    first.kill();
    let _second = coordinator(&stack, &[]);
    // The sentinel: a second late finding, read by the new coordinator
    // after it has read the stream's history back.
    outside
        .publish(
            "caucus.findings.AAPL",
            critical("late-b", "Dividend suspended"),
        )
        .await;
    eventually("the card of late-b", Duration::from_secs(20), || async {
        (!late_cards(&api, "late-b").await.is_empty()).then_some(())
    })
    .await;
    let again = late_cards(&api, "late-a").await;
    assert_eq!(
        again.len(),
        1,
        "the coordinator that took over does not send late-a's card again: {again:#?}"
    );
    let w = api
        .status(std::slice::from_ref(&wf))
        .await
        .pop()
        .expect("status");
    let ids: Vec<&Value> = w["flags"]
        .as_array()
        .map(|fs| {
            fs.iter()
                .filter(|f| f["kind"] == "late_finding")
                .map(|f| &f["detail"]["id"])
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        ids,
        vec![&json!("late-a"), &json!("late-b")],
        "both late findings flag the workflow, once each: {w}"
    );
}
