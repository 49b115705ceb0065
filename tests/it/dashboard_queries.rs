//! Every query of the Grafana dashboard (deploy/grafana/dashboards/
//! caucus.json) returns data from a live stack (issue 12 item 5): a
//! coordinator, a facilitator, a correlator and a worker per agent type, each
//! serving /metrics, scraped every second by Debian's real `prometheus`
//! (2.42) while a batch runs that holds a debate, a correlated failure
//! incident and a dead letter. Then each `expr` is evaluated through
//! /api/v1/query and must return a non-empty result, and every alert rule of
//! deploy/prometheus/alerts.yml is loaded and evaluates without error.

mod prometheus;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use caucus_harness::{free_port, Service, Stack};
use serde_json::{json, Value};

use crate::common::{coordinator, eventually, pipeline, quota_handler, worker, Api};
use prometheus::Prometheus;

/// What Grafana puts in for its range variables when it sends a query;
/// five minutes covers the whole test from the first scrape.
const GRAFANA_VARIABLES: [(&str, &str); 2] = [("$__rate_interval", "5m"), ("$__range", "5m")];

/// Longest wait for every query to have data (debates and correlations end
/// some seconds after their workflows).
const DATA_WAIT: Duration = Duration::from_secs(90);

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

/// Every `expr` string anywhere in the dashboard JSON, with Grafana's
/// variables replaced.
fn dashboard_exprs() -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("expr", Value::String(e)) => out.push(e.clone()),
                        _ => walk(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let path = repo_file("deploy/grafana/dashboards/caucus.json");
    let text = std::fs::read_to_string(&path).expect("read the dashboard");
    let dash: Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut exprs = Vec::new();
    walk(&dash, &mut exprs);
    assert!(exprs.len() >= 10, "too few queries in {}", path.display());
    exprs
        .into_iter()
        .map(|e| {
            GRAFANA_VARIABLES
                .iter()
                .fold(e, |e, (var, value)| e.replace(var, value))
        })
        .collect()
}

/// Names of the alerts in the rules file (`- alert: Name` lines).
fn alert_names(rules: &Path) -> Vec<String> {
    std::fs::read_to_string(rules)
        .expect("read alerts.yml")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(|n| n.trim().to_string())
        .collect()
}

/// One caucus process and the address its /metrics is on.
struct Scraped {
    name: String,
    addr: String,
    _service: Service,
}

fn metrics_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// Prometheus config: every process as a target of job `caucus` with its
/// name as `service` (as the compose profile labels them), 1 s intervals,
/// and the project's alert rules.
fn prometheus_config(targets: &[Scraped], rules: &Path) -> String {
    let mut cfg = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
         rule_files:\n  - {}\n\
         scrape_configs:\n  - job_name: caucus\n    static_configs:\n",
        rules.display()
    );
    for t in targets {
        cfg.push_str(&format!(
            "      - targets: [\"{}\"]\n        labels: {{service: \"{}\"}}\n",
            t.addr, t.name
        ));
    }
    cfg
}

/// The built-in stock-analysis shape: its margin disagreement opens a debate.
fn stock_pipeline() -> Value {
    pipeline(
        "stock-dashboard",
        json!([
            {"name": "screening", "agent": "screening", "expected_duration": 2.0},
            {"name": "business", "agent": "business", "expected_duration": 2.0, "depends_on": ["screening"]},
            {"name": "financial", "agent": "financial", "expected_duration": 2.0, "depends_on": ["business"]},
            {"name": "strategy", "agent": "strategy", "expected_duration": 2.0, "depends_on": ["screening"]},
            {"name": "valuation", "agent": "valuation", "expected_duration": 1.0, "depends_on": ["financial", "strategy"],
             "params": {"impact": {"kind": "valuation", "output_metric": "target_price", "result": "/target_price",
                                   "inputs": ["operating_margin"], "used": "/operating_margin_used"}}},
            {"name": "report", "agent": "report", "expected_duration": 1.0, "depends_on": ["valuation"]}
        ]),
    )
}

/// Starts every process with metrics on; returns them with their addresses.
fn start_processes(stack: &Stack, quota_dir: &Path) -> Vec<Scraped> {
    let mut out = Vec::new();
    let addr = metrics_addr();
    let c = coordinator(stack, &[("CAUCUS_TELEMETRY_METRICS_ADDR", &addr)]);
    out.push(Scraped {
        name: "coordinator".into(),
        addr,
        _service: c,
    });
    let addr = metrics_addr();
    // The agent debate test's time-outs: built-in agents answer in time on a
    // loaded machine.
    let f = crate::facilitator_common::facilitator(
        stack,
        &[
            ("CAUCUS_TELEMETRY_METRICS_ADDR", &addr),
            ("CAUCUS_FACILITATOR_ACK_TIMEOUT", "10s"),
            ("CAUCUS_FACILITATOR_EVIDENCE_TIMEOUT", "20s"),
            ("CAUCUS_FACILITATOR_VERDICT_GRACE", "10s"),
            ("CAUCUS_FACILITATOR_HUMAN_TIMEOUT", "2s"),
            ("CAUCUS_FACILITATOR_FLUSH_TIMEOUT", "2s"),
        ],
    );
    out.push(Scraped {
        name: "facilitator".into(),
        addr,
        _service: f,
    });
    let addr = metrics_addr();
    let k = stack
        .service("caucus-correlator")
        .env("CAUCUS_CORRELATOR_LEADER_LEASE", "1s")
        .env("CAUCUS_SHUTDOWN_GRACE", "5s")
        .env("CAUCUS_TELEMETRY_METRICS_ADDR", &addr)
        .start();
    out.push(Scraped {
        name: "correlator".into(),
        addr,
        _service: k,
    });
    let quota = format!("exec:{}", quota_handler(quota_dir));
    let workers = [
        ("screening", "builtin"),
        ("business", "builtin"),
        ("financial", "builtin"),
        ("strategy", "builtin"),
        ("valuation", "builtin"),
        ("report", "builtin"),
        ("pricing", quota.as_str()),
    ];
    for (agent, handler) in workers {
        let addr = metrics_addr();
        let w = worker(
            stack,
            agent,
            2,
            handler,
            &[("CAUCUS_TELEMETRY_METRICS_ADDR", &addr)],
        );
        out.push(Scraped {
            name: format!("worker-{agent}"),
            addr,
            _service: w,
        });
    }
    out
}

/// Polls until Prometheus reports every target up.
fn wait_targets_up(prom: &Prometheus, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let data = prom.api("targets");
        let active = data["activeTargets"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let up = active.iter().filter(|t| t["health"] == "up").count();
        if active.len() == n && up == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not every target is up ({up} of {n}): {data:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The batch: a stock-analysis run whose margin disagreement opens a
/// debate, five `pricing` tasks failing with a Koyfin quota error (one
/// correlated incident), and one finding that is not JSON (a dead letter).
async fn run_batch(stack: &Stack) {
    let api = Api::connect(stack).await;
    let stock = api.submit(&["NVDA", "AAPL"], stock_pipeline(), 10).await;
    let failing = pipeline(
        "pricing-quota",
        json!([{"name": "pricing", "agent": "pricing", "expected_duration": 1.0}]),
    );
    api.submit(&["AAPL", "MSFT", "GOOGL", "AMZN", "TSLA"], failing, 10)
        .await;
    // Raw bytes, not an envelope: the coordinator's findings consumer
    // dead-letters it.
    let js = async_nats::jetstream::new(api.nats.clone());
    js.publish("caucus.findings.AAPL", "finding: capex up, see 10-K".into())
        .await
        .expect("publish")
        .await
        .expect("stored");
    api.wait_completed(&stock, Duration::from_secs(120)).await;
    // The incident itself, so an empty correlation panel means a missing
    // metric, not a missing incident.
    eventually(
        "the correlator to correlate the quota failures",
        Duration::from_secs(60),
        || async {
            let v = api
                .call("correlator", "correlations", json!({}))
                .await
                .ok()?;
            (!v["correlations"].as_array()?.is_empty()).then_some(())
        },
    )
    .await;
}

/// Evaluates every query until each has data or the deadline passes;
/// returns the ones still empty.
fn empty_queries(prom: &Prometheus, exprs: &[String]) -> Vec<String> {
    let deadline = Instant::now() + DATA_WAIT;
    let mut empty: Vec<String> = exprs.to_vec();
    loop {
        empty.retain(|e| prom.query(e).is_empty());
        if empty.is_empty() || Instant::now() >= deadline {
            return empty;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The value of a one-series instant query (NaN when there is none).
fn scalar(prom: &Prometheus, expr: &str) -> f64 {
    prom.query(expr)
        .first()
        .and_then(|s| s["value"][1].as_str())
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// A query, what its value must satisfy, and what that means.
type Check = (&'static str, fn(f64) -> bool, &'static str);

/// The data behind the panels is the batch's: one leader, the dead letter
/// on the findings family, the incident, a debate, every stock task
/// completed (2 items × 6 stages), and one bottleneck.
fn batch_shows(prom: &Prometheus) {
    let checks: [Check; 5] = [
        ("sum(caucus_coordinator_leader)", |v| v == 1.0, "one leader"),
        (
            "sum(caucus_dlq_messages_total{subject=\"caucus.findings\"})",
            |v| v >= 1.0,
            "the finding that is not JSON dead-lettered",
        ),
        (
            "sum(caucus_correlations_total)",
            |v| v >= 1.0,
            "the incident",
        ),
        ("sum(caucus_debates_total)", |v| v >= 1.0, "a debate ended"),
        (
            "sum(caucus_tasks_completed_total{outcome=\"completed\"})",
            |v| v >= 12.0,
            "12 stock tasks completed",
        ),
    ];
    // Polled: the last events may be one scrape away.
    let deadline = Instant::now() + Duration::from_secs(15);
    for (expr, holds, what) in checks {
        loop {
            let v = scalar(prom, expr);
            if holds(v) {
                break;
            }
            assert!(Instant::now() < deadline, "{what}: {expr} = {v}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    let bottleneck = prom.query("topk(1, max by (agent_type) (caucus_task_oldest_wait_seconds))");
    assert_eq!(bottleneck.len(), 1, "one live bottleneck: {bottleneck:?}");
}

/// Polls until every rule of the loaded group was evaluated, and returns
/// the rules as /api/v1/rules lists them.
fn evaluated_rules(prom: &Prometheus, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let data = prom.api("rules");
        let rules: Vec<Value> = data["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        let evaluated = rules.iter().filter(|r| r["health"] != "unknown").count();
        if rules.len() == n && evaluated == n {
            return rules;
        }
        assert!(
            Instant::now() < deadline,
            "rules not all loaded and evaluated ({evaluated} of {n}): {data:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_returns_data_from_a_live_stack() {
    let bin = prometheus::binary();
    let rules_file = repo_file("deploy/prometheus/alerts.yml")
        .canonicalize()
        .expect("deploy/prometheus/alerts.yml");
    if let Some(promtool) = prometheus::promtool(&bin) {
        let out = std::process::Command::new(promtool)
            .args(["check", "rules"])
            .arg(&rules_file)
            .output()
            .expect("run promtool");
        assert!(
            out.status.success(),
            "promtool check rules: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let exprs = dashboard_exprs();
    let alerts = alert_names(&rules_file);
    assert!(!alerts.is_empty(), "no alerts in {}", rules_file.display());

    let stack = Stack::start();
    let quota_dir = tempfile::tempdir().unwrap();
    let named = ["AAPL", "MSFT", "GOOGL", "AMZN", "TSLA"];
    std::fs::write(quota_dir.path().join("named"), named.join("\n") + "\n").unwrap();
    std::fs::write(quota_dir.path().join("broken"), "").unwrap();
    let procs = start_processes(&stack, quota_dir.path());
    let prom = Prometheus::start(&bin, &prometheus_config(&procs, &rules_file));
    // Scraped before the batch, so rates see its increments.
    wait_targets_up(&prom, procs.len());

    run_batch(&stack).await;

    let empty = empty_queries(&prom, &exprs);
    let known: Vec<String> = prom
        .api("label/__name__/values")
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str())
        .filter(|n| n.starts_with("caucus_"))
        .map(str::to_string)
        .collect();
    assert!(
        empty.is_empty(),
        "{} of {} dashboard queries returned no data:\n  {}\nmetric names Prometheus has: {known:?}",
        empty.len(),
        exprs.len(),
        empty.join("\n  ")
    );
    batch_shows(&prom);

    let rules = evaluated_rules(&prom, alerts.len());
    for name in &alerts {
        let r = rules
            .iter()
            .find(|r| r["name"] == name.as_str())
            .unwrap_or_else(|| panic!("alert {name} not loaded: {rules:#?}"));
        assert_eq!(r["health"], "ok", "alert {name} does not evaluate: {r:#}");
    }
    // With a leader running, the no-leader alert must not be firing.
    let no_leader = rules.iter().find(|r| r["name"] == "CaucusNoLeader");
    if let Some(r) = no_leader {
        assert_eq!(r["state"], "inactive", "{r:#}\n{}", prom.log_text());
    }
}
