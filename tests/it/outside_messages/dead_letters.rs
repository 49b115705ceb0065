//! Findings that cannot be served are dead-lettered with their reason, and
//! do not stall the ones behind them.

use std::time::Duration;

use caucus_harness::Stack;
use caucus_shared::inbound::InputFinding;

use super::support::{
    coordinator_reading, dead_letters, findings_handled, findings_of, submit_held,
    valuation_pipeline, Outside, Recorder, SEED_FINDING,
};
use crate::common::{coordinator, eventually, worker, Api};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_findings_are_dead_lettered_and_do_not_stall_the_next() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[("CAUCUS_MAX_BODY_BYTES", "8192")]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;

    let subject = "caucus.findings.AAPL";
    outside
        .publish(subject, "finding: capex up, see 10-K".as_bytes())
        .await;
    let oversize = SEED_FINDING.replace("10-K p.47", &"x".repeat(10_000));
    outside.publish(subject, oversize).await;
    let nobody = SEED_FINDING.replace("valuation_agent", "nobody_agent");
    outside.publish(subject, nobody).await;
    let valid = r#"{"message_type":"finding","from_agent":"supply_chain_service","to_agent":"valuation","priority":"normal","content":{"finding":"Supplier lead times shortened","confidence":0.6,"evidence":["survey"]}}"#;
    outside.publish(subject, valid.as_bytes()).await;

    let dl = eventually(
        "three dead letters from caucus.findings.AAPL",
        Duration::from_secs(15),
        || async {
            let dl = dead_letters(&api.nats).await;
            (dl.len() >= 3).then_some(dl)
        },
    )
    .await;
    for code in ["malformed_json", "too_large", "unaddressable"] {
        let d = dl
            .iter()
            .find(|d| d.code.as_deref() == Some(code))
            .unwrap_or_else(|| panic!("no dead letter with Caucus-Dlq-Code {code}: {dl:#?}"));
        assert_eq!(d.subject, "caucus.dlq.caucus.findings.AAPL", "{d:#?}");
        assert!(
            d.error.as_deref().is_some_and(|e| !e.is_empty()),
            "a dead letter says why in Caucus-Dlq-Error: {d:#?}"
        );
    }
    let unaddressable = dl
        .iter()
        .find(|d| d.code.as_deref() == Some("unaddressable"))
        .expect("checked above");
    assert!(
        unaddressable.payload.contains("nobody_agent"),
        "the unaddressable dead letter is the nobody_agent finding: {unaddressable:#?}"
    );
    assert_eq!(dl.len(), 3, "only the three bad ones: {dl:#?}");

    // The valid finding behind them still reaches a task.
    findings_handled(&api).await;
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;
    let d = rec.dispatch_of(&wf, "valuation").await;
    let got = findings_of(&d);
    assert_eq!(
        got.iter().map(InputFinding::text).collect::<Vec<_>>(),
        vec!["Supplier lead times shortened"],
        "only the valid finding reaches the valuation task: {:?}",
        d.inputs
    );
}
