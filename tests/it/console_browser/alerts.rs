//! A batch paused and resumed from /alerts: three items fail valuation
//! with a Koyfin quota error, the correlator names the root cause and
//! pauses them as one batch; the page shows the incident. Once the vendor
//! is back the person resumes the batch; while the resumed workflows still
//! run they pause it again (the items stop before their last stage), then
//! resume it for good, and every workflow completes without re-running
//! what it had finished.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use caucus_harness::Stack;
use serde_json::json;

use super::browser::Browser;
use super::stack::{login, Console, PASSWORD, PERSON};
use crate::common::{
    call, coordinator, eventually, one_correlation, pipeline, quota_handler, starts, worker, Api,
};

/// The items the quota error hits (the correlator's default threshold).
const NAMED: [&str; 3] = ["AAPL", "MSFT", "GOOGL"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_paused_and_resumed_from_the_alerts_page() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _k = stack
        .service("caucus-correlator")
        .env("CAUCUS_CORRELATOR_LEADER_LEASE", "1s")
        .env("CAUCUS_SHUTDOWN_GRACE", "5s")
        .start();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("named"), NAMED.join("\n") + "\n").expect("named");
    std::fs::write(dir.path().join("broken"), "").expect("broken");
    let _s = worker(&stack, "screening,publish", 4, "noop", &[]);
    let handler = format!("exec:{}", quota_handler(dir.path()));
    let _v = worker(&stack, "valuation", 3, &handler, &[]);
    // Long enough for the person to pause the resumed batch while its
    // reports are still being written.
    let _r = worker(&stack, "report", 3, "sleep:6000", &[]);
    let console = Console::start(&stack, &[]);
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "mini-stock",
        json!([
            {"name": "screening", "agent": "screening", "expected_duration": 1.0},
            {"name": "valuation", "agent": "valuation", "expected_duration": 1.0,
             "depends_on": ["screening"]},
            {"name": "report", "agent": "report", "expected_duration": 1.0, "depends_on": ["valuation"]},
            {"name": "publish", "agent": "publish", "expected_duration": 1.0, "depends_on": ["report"]}
        ]),
    );
    let ids = api.submit(&NAMED, p, 20).await;
    let by_item: BTreeMap<&str, String> = NAMED.iter().copied().zip(ids.iter().cloned()).collect();

    // The correlator's incident and its batch, all three paused.
    let rec = one_correlation(&api, NAMED.len()).await;
    let batch = rec["batch_id"].as_str().expect("batch_id").to_string();
    eventually(
        "the batch to hold three paused items",
        Duration::from_secs(30),
        || async {
            let s = call(&api, "batch_status", json!({"batch_id": batch}))
                .await
                .ok()?;
            (s["total"] == 3 && s["paused"] == 3).then_some(())
        },
    )
    .await;

    let b = Browser::open(&console.url).await;
    login(&b, PERSON, PASSWORD).await;
    b.goto("/alerts").await;
    let article = format!("section#correlations article[data-batch-id='{batch}']");
    let text = b
        .wait_text(&article, "the incident with its root cause", |t| {
            t.contains("Koyfin API quota exceeded")
        })
        .await;
    for item in NAMED {
        assert!(text.contains(item), "{item} in {text}");
    }
    b.wait_text(
        &format!("{article} .batch-state"),
        "the batch paused",
        |t| t == "paused",
    )
    .await;
    b.wait_css("section#alerts article.alert").await;
    b.screenshot("alerts").await;

    // The vendor is back: resume the batch from the page.
    std::fs::remove_file(dir.path().join("broken")).expect("fix the vendor");
    let resume = b
        .wait_css(&format!("{article} form.batch-resume button"))
        .await;
    let at = b.submit(&resume).await;
    assert!(at.starts_with("/alerts"), "back on /alerts: {at}");
    b.wait_css("p.flash").await;
    let running = eventually("the reports to run", Duration::from_secs(20), || async {
        let w = api.status(&ids).await;
        w.iter()
            .all(|w| w["tasks"]["report"]["state"] == "running")
            .then_some(w)
    })
    .await;
    assert!(
        running.iter().all(|w| w["state"] == "running"),
        "resumed: {running:?}"
    );

    // Pause it again while the reports are being written: they finish,
    // nothing after them starts.
    b.goto("/alerts").await;
    let pause = b
        .wait_css(&format!("{article} form.batch-pause button"))
        .await;
    let at = b.submit(&pause).await;
    assert!(at.starts_with("/alerts"), "back on /alerts: {at}");
    let said = b.wait_css("p.flash").await.text().await.unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(20);
    let paused = loop {
        let w = api.status(&ids).await;
        if w.iter().all(|w| w["state"] == "paused") {
            break w;
        }
        if Instant::now() > deadline {
            let st = call(&api, "batch_status", json!({"batch_id": batch})).await;
            let states: Vec<String> = w
                .iter()
                .map(|w| format!("{} {}", w["item"].as_str().unwrap_or("?"), w["state"]))
                .collect();
            panic!(
                "'Pause batch' on /alerts (the page said {said:?}) left the resumed \
                 workflows unpaused ({states:?}); batch {batch}: {st:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for w in &paused {
        assert_eq!(w["tasks"]["report"]["state"], "completed", "{w}");
        assert_eq!(w["tasks"]["publish"]["state"], "ready", "held: {w}");
    }
    b.screenshot("alerts-paused").await;

    // And resume it for good.
    b.goto("/alerts").await;
    let resume = b
        .wait_css(&format!("{article} form.batch-resume button"))
        .await;
    b.submit(&resume).await;
    api.wait_completed(&ids, Duration::from_secs(30)).await;
    let s = starts(&api).await;
    for item in NAMED {
        let id = &by_item[item];
        let n = |t: &str| s.get(&format!("{id}/{t}")).copied().unwrap_or(0);
        assert_eq!(n("screening"), 1, "{item}: not re-run");
        assert_eq!(n("valuation"), 2, "{item}: failed once, ran once more");
        assert_eq!(n("report"), 1, "{item}: finished before the pause");
        assert_eq!(n("publish"), 1, "{item}");
    }
    b.close().await;
}
