//! Requests become work and are answered; outside alerts become cards;
//! messages stored before any coordinator ran are still served.

use std::time::Duration;

use caucus_harness::Stack;

use super::support::{
    assert_no_dead_letters, coordinator_reading, findings_handled, log_tail, poll, Outside,
    Recorder, SEED_FINDING,
};
use crate::common::{coordinator, eventually, stream_messages, worker, Api};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_becomes_work_and_is_answered_with_a_finding_and_a_confirmation() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    let req_id = "risk-req-aapl-1";
    let query = "Fair value of AAPL if capex rises 10%?";
    let deadline = (chrono::Utc::now() + chrono::Duration::seconds(60))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let body = format!(
        r#"{{"id":"{req_id}","message_type":"request","from_agent":"risk_service","to_agent":"valuation","priority":"high","content":{{"query":"{query}","item":"AAPL","deadline":"{deadline}"}}}}"#
    );
    outside.publish("caucus.msg.valuation", body).await;

    // The work: a valuation task on AAPL about the query.
    let d = eventually(
        "a valuation task on AAPL for the request",
        Duration::from_secs(20),
        || async {
            rec.dispatches()
                .into_iter()
                .find(|d| d.item == "AAPL" && d.agent_type == "valuation")
        },
    )
    .await;
    let text = serde_json::to_string(&d).expect("dispatch serialises");
    assert!(
        text.contains(query),
        "the task should carry the request's query: {text}"
    );

    // The answer: a finding to the requester, correlated by the request id.
    let answer = eventually(
        "a finding on caucus.findings.AAPL with correlation_id = the request id",
        Duration::from_secs(20),
        || async {
            stream_messages(&api.nats, "CAUCUS_FINDINGS", "caucus.findings.AAPL")
                .await
                .into_iter()
                .find(|m| m.body["correlation_id"] == req_id)
        },
    )
    .await;
    let a = &answer.body;
    assert_eq!(a["message_type"], "finding", "{a}");
    assert_eq!(
        a["to_agent"], "risk_service",
        "addressed to the requester: {a}"
    );

    // And a confirmation on the requester's subject.
    let conf = eventually(
        "a confirmation on caucus.msg.risk_service with correlation_id = the request id",
        Duration::from_secs(20),
        || async {
            stream_messages(&api.nats, "CAUCUS_MESSAGES", "caucus.msg.risk_service")
                .await
                .into_iter()
                .find(|m| {
                    m.body["message_type"] == "confirmation" && m.body["correlation_id"] == req_id
                })
        },
    )
    .await;
    assert_eq!(conf.body["to_agent"], "risk_service", "{}", conf.body);
    // The answer is for an outside requester, not an agent type: it must
    // not be dead-lettered as unaddressable once the coordinator reads it.
    findings_handled(&api).await;
    assert_no_dead_letters(&api, "for a request and its answer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outside_services_alert_becomes_an_alert_card_by_priority() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    let halt = r#"{"message_type":"alert","from_agent":"exchange_feed","to_agent":"valuation","priority":"critical","content":{"event_type":"trading_halt","recommended_actions":["hold valuations of AAPL"]}}"#;
    outside
        .publish("caucus.msg.valuation", halt.as_bytes())
        .await;
    let guidance = r#"{"message_type":"alert","from_agent":"news_service","priority":"high","content":{"event_type":"guidance_cut"}}"#;
    outside
        .publish("caucus.findings.AAPL", guidance.as_bytes())
        .await;

    for (event, subject) in [
        ("trading_halt", "caucus.alerts.critical"),
        ("guidance_cut", "caucus.alerts.warning"),
    ] {
        let card = poll(
            &format!("an alert card for the outside {event} alert"),
            Duration::from_secs(15),
            || async {
                let cards = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>").await;
                let seen: Vec<String> = cards.iter().map(|a| a.body.to_string()).collect();
                cards
                    .into_iter()
                    .find(|a| a.body.to_string().contains(event))
                    .ok_or_else(|| format!("cards {seen:?}"))
            },
        )
        .await;
        assert_eq!(card.subject, subject, "severity by priority: {}", card.body);
    }
    assert_no_dead_letters(&api, "for outside alerts").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_stored_before_the_coordinator_leads_are_still_served() {
    let stack = Stack::start();
    // `caucus init` sets up the streams and consumers; no coordinator runs
    // yet (not deployed yet, or between two leaders).
    let (code, out, err) = crate::common::caucus(&stack, &["init"]);
    assert_eq!(code, 0, "caucus init: {out}{err}");
    let outside = Outside::connect(&stack).await;
    let body = SEED_FINDING.replace("valuation_agent", "strategy_agent");
    outside.publish("caucus.findings.AAPL", body).await;
    let halt = r#"{"message_type":"alert","from_agent":"exchange_feed","to_agent":"valuation","priority":"critical","content":{"event_type":"trading_halt"}}"#;
    outside
        .publish("caucus.msg.valuation", halt.as_bytes())
        .await;

    let coord = coordinator(
        &stack,
        &[("CAUCUS_COORDINATOR_RESPONSE_TIMEOUT__HIGH", "2s")],
    );
    let api = Api::connect(&stack).await;
    for (what, event) in [
        (
            "the overdue card of the finding stored before",
            "response_overdue",
        ),
        ("the card of the alert stored before", "trading_halt"),
    ] {
        poll(what, Duration::from_secs(15), || async {
            let cards = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>").await;
            let seen: Vec<String> = cards.iter().map(|a| a.body.to_string()).collect();
            cards
                .into_iter()
                .find(|a| a.body["content"]["event_type"] == event)
                .map(|_| ())
                .ok_or_else(|| {
                    format!("cards {seen:?}; coordinator log:\n{}", log_tail(&coord, 15))
                })
        })
        .await;
    }
}
