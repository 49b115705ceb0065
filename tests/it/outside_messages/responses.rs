//! Messages sent with `requires_response`: an answer, or an alert card when
//! none comes in time.

use std::time::{Duration, Instant};

use caucus_harness::Stack;
use serde_json::{json, Value};

use super::support::{
    assert_no_dead_letters, coordinator_reading, findings_handled, handled, log_tail, poll,
    submit_held, valuation_pipeline, wait_gate, Outside, Recorder, SEED_FINDING,
};
use crate::common::{call, coordinator, eventually, stream_messages, worker, Api};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finding_nobody_answers_raises_a_response_overdue_card() {
    let stack = Stack::start();
    let coord = coordinator(
        &stack,
        &[("CAUCUS_COORDINATOR_RESPONSE_TIMEOUT__HIGH", "3s")],
    );
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;

    // The seed's finding to valuation is answered in time: no card for it.
    outside
        .publish("caucus.findings.AAPL", SEED_FINDING.as_bytes())
        .await;
    findings_handled(&api).await;
    submit_held(&api, "AAPL", valuation_pipeline()).await;
    eventually(
        "valuation's confirmation of the seed's finding",
        Duration::from_secs(15),
        || async {
            stream_messages(&api.nats, "CAUCUS_MESSAGES", "caucus.msg.financial_analyst")
                .await
                .into_iter()
                .find(|m| m.body["message_type"] == "confirmation")
        },
    )
    .await;
    handled(&api, "coordinator-messages", "CAUCUS_MESSAGES").await;

    // The same to strategy, an agent type of the built-in stock-analysis
    // pipeline that no worker runs: nobody answers. Sent after the first
    // was answered, so its card comes after the first one's would have.
    let body = SEED_FINDING.replace("valuation_agent", "strategy_agent");
    let sent = Instant::now();
    outside.publish("caucus.findings.AAPL", body).await;

    let card = poll(
        "a response_overdue alert card on caucus.alerts.> for the finding to strategy_agent",
        Duration::from_secs(15),
        || async {
            let cards = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>").await;
            let seen: Vec<String> = cards.iter().map(|a| a.body.to_string()).collect();
            cards
                .into_iter()
                .find(|a| a.body["content"]["event_type"] == "response_overdue")
                .ok_or_else(|| {
                    format!("cards {seen:?}; coordinator log:\n{}", log_tail(&coord, 40))
                })
        },
    )
    .await;
    let waited = sent.elapsed();
    let c = &card.body["content"];
    assert_eq!(
        c["from_agent"], "financial_analyst",
        "names the sender: {c}"
    );
    assert_eq!(c["to_agent"], "strategy_agent", "names the addressee: {c}");
    assert_eq!(c["item"], "AAPL", "names the item: {c}");
    assert!(
        waited >= Duration::from_millis(2500),
        "the card came after {waited:?}, before the 3 s response time-out: {c}"
    );
    let cards: Vec<Value> = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>")
        .await
        .into_iter()
        .filter(|a| a.body["content"]["event_type"] == "response_overdue")
        .map(|a| a.body)
        .collect();
    assert_eq!(
        cards.len(),
        1,
        "one card, for the unanswered finding only (the answered one to valuation has none): {cards:#?}"
    );
    assert_no_dead_letters(&api, "for findings to known agent types").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awaited_response_is_still_awaited_after_a_takeover() {
    let stack = Stack::start();
    let env = [("CAUCUS_COORDINATOR_RESPONSE_TIMEOUT__HIGH", "3s")];
    let mut first = coordinator(&stack, &env);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    let body = SEED_FINDING.replace("valuation_agent", "strategy_agent");
    outside.publish("caucus.findings.AAPL", body).await;
    findings_handled(&api).await;
    // The first coordinator registered the wait, then dies before it is due.
    first.kill();
    let second = coordinator(&stack, &env);
    let cards = poll(
        "the response_overdue card from the coordinator that took over",
        Duration::from_secs(20),
        || async {
            let cards: Vec<Value> = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>")
                .await
                .into_iter()
                .filter(|a| a.body["content"]["event_type"] == "response_overdue")
                .map(|a| a.body)
                .collect();
            if cards.is_empty() {
                Err(format!(
                    "no card; coordinator log:\n{}",
                    log_tail(&second, 15)
                ))
            } else {
                Ok(cards)
            }
        },
    )
    .await;
    assert_eq!(cards.len(), 1, "one card: {cards:#?}");
    assert_eq!(
        cards[0]["content"]["to_agent"], "strategy_agent",
        "{}",
        cards[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_request_raises_no_overdue_card() {
    let stack = Stack::start();
    let _c = coordinator(
        &stack,
        &[("CAUCUS_COORDINATOR_RESPONSE_TIMEOUT__HIGH", "3s")],
    );
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    let req = r#"{"id":"risk-req-answered","message_type":"request","from_agent":"risk_service","to_agent":"valuation","priority":"high","content":{"query":"Fair value of AAPL?","item":"AAPL"},"requires_response":true}"#;
    outside
        .publish("caucus.msg.valuation", req.as_bytes())
        .await;
    eventually(
        "the coordinator's confirmation of the request on caucus.msg.risk_service",
        Duration::from_secs(15),
        || async {
            stream_messages(&api.nats, "CAUCUS_MESSAGES", "caucus.msg.risk_service")
                .await
                .into_iter()
                .find(|m| {
                    m.body["message_type"] == "confirmation"
                        && m.body["correlation_id"] == "risk-req-answered"
                })
        },
    )
    .await;
    handled(&api, "coordinator-messages", "CAUCUS_MESSAGES").await;
    // The sentinel: a finding nobody answers, sent after the request was
    // answered; its card comes after the request's would have.
    let body = SEED_FINDING.replace("valuation_agent", "strategy_agent");
    outside.publish("caucus.findings.AAPL", body).await;
    let cards = poll(
        "the sentinel finding's response_overdue card",
        Duration::from_secs(15),
        || async {
            let cards: Vec<Value> = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>")
                .await
                .into_iter()
                .filter(|a| a.body["content"]["event_type"] == "response_overdue")
                .map(|a| a.body)
                .collect();
            if cards
                .iter()
                .any(|c| c["content"]["to_agent"] == "strategy_agent")
            {
                Ok(cards)
            } else {
                Err(format!("cards so far: {cards:?}"))
            }
        },
    )
    .await;
    assert_eq!(
        cards.len(),
        1,
        "the request was answered by the coordinator's confirmation: no card for it: {cards:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_does_not_double_the_confirmation() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    outside
        .publish("caucus.findings.AAPL", SEED_FINDING.as_bytes())
        .await;
    findings_handled(&api).await;
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;
    wait_gate(&api, &wf, "review").await;
    // A person sends the valuation back: it runs again with the same
    // finding and answers it again.
    call(
        &api,
        "gate_decide",
        json!({"workflow_id": wf, "action": "send_back", "reviewer": "ana",
               "rationale": "redo", "send_back_to": ["valuation"]}),
    )
    .await
    .expect("send back");
    rec.dispatch_of_attempt(&wf, "valuation", 2).await;
    wait_gate(&api, &wf, "review").await;
    let confirmations: Vec<Value> =
        stream_messages(&api.nats, "CAUCUS_MESSAGES", "caucus.msg.financial_analyst")
            .await
            .into_iter()
            .filter(|m| m.body["message_type"] == "confirmation")
            .map(|m| m.body)
            .collect();
    assert_eq!(
        confirmations.len(),
        1,
        "the re-run's confirmation has the same Nats-Msg-Id and is stored once: {confirmations:#?}"
    );
}
