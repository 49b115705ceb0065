//! The `caucus` CLI against a real coordinator and workers.

use crate::common::{caucus, coordinator, worker};
use caucus_harness::Stack;

#[test]
fn plan_shows_the_seed_makespans() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let (code, out, err) = caucus(&stack, &["plan", "AAPL", "MSFT"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("makespan: 9 time units"), "{out}");
    assert!(
        out.contains("screening → business → financial → valuation → report"),
        "{out}"
    );
    assert!(
        out.contains("bottleneck: valuation (capacity 1): makespan 9 → 8"),
        "{out}"
    );
    let (code, out, _) = caucus(
        &stack,
        &["plan", "AAPL", "MSFT", "--capacity", "valuation=2"],
    );
    assert_eq!(code, 0);
    assert!(out.contains("makespan: 8 time units"), "{out}");
    let (code, out, _) = caucus(&stack, &["--json", "plan", "AAPL", "MSFT"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["makespan"], 9.0);
    assert_eq!(v["bottleneck"]["agent_type"], "valuation");
    // Errors are specific and the exit code says so.
    let (code, _, err) = caucus(&stack, &["plan", "AAPL", "--pipeline", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("unknown pipeline `nope`"), "{err}");
    // A typo in a TOML file is reported as TOML, with its line and column.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "name = \"p\"\n[[stages]]\nname = \"one\"\nagnet = \"a\"\n",
    )
    .unwrap();
    let (code, _, err) = caucus(&stack, &["plan", "AAPL", "--file", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("bad.toml: invalid pipeline spec (TOML): line 4, column 1: ")
            && err.contains("agnet"),
        "{err}"
    );
}

#[test]
fn submit_watch_status_workers_and_result() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let agents = "screening,business,financial,strategy,valuation,report";
    let _w = worker(&stack, agents, 2, "builtin", &[]);
    let (code, out, err) = caucus(
        &stack,
        &[
            "submit",
            "AAPL",
            "BRK.B",
            "--time-unit-ms",
            "10",
            "--watch",
            "--auto-approve-gates",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("submitted 2 workflow(s) to stock-analysis"),
        "{out}"
    );
    assert!(out.contains("completed"), "{out}");
    let (code, out, _) = caucus(&stack, &["status", "--state", "completed"]);
    assert_eq!(code, 0);
    assert!(out.contains("AAPL") && out.contains("BRK.B"), "{out}");
    let (code, out, _) = caucus(&stack, &["workers"]);
    assert_eq!(code, 0);
    assert!(out.contains("valuation"), "{out}");
    assert!(out.contains("live bottleneck"), "{out}");
    let (code, out, err) = caucus(&stack, &["result", "BRK.B"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("BRK.B") && out.to_lowercase().contains("target price"),
        "{out}"
    );
    let (code, _, err) = caucus(&stack, &["result", "NOPE"]);
    assert_eq!(code, 1);
    assert!(err.contains("no workflow"), "{err}");
    let (code, _, _) = caucus(&stack, &["health", "coordinator"]);
    assert_eq!(code, 0);
}

#[test]
fn health_of_a_missing_service_fails_clearly() {
    let stack = Stack::start();
    let (code, _, err) = caucus(&stack, &["health", "facilitator"]);
    assert_eq!(code, 1);
    assert!(err.contains("facilitator"), "{err}");
}

#[test]
fn gate_and_debates_commands() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _f = stack
        .service("caucus-facilitator")
        .env("CAUCUS_FACILITATOR_EXPERTS", "alice,bob")
        .env("CAUCUS_NATS_STREAM_MAX_BYTES", "67108864")
        .start();
    let _w = worker(&stack, "gated", 1, "noop", &[]);
    let dir = tempfile::tempdir().unwrap();
    let spec = crate::common::gated_spec(dir.path(), 1);
    let (code, out, err) = caucus(&stack, &["submit", "ZED", "--file", &spec]);
    assert_eq!(code, 0, "{out}{err}");
    let listed = caucus_harness::wait_until(
        "the gate to open",
        std::time::Duration::from_secs(20),
        || {
            let (_, out, _) = caucus(&stack, &["gate", "list"]);
            out.contains("signoff").then_some(out)
        },
    );
    assert!(listed.contains("1 open gate(s)"), "{listed}");
    assert!(listed.contains("ZED"), "{listed}");
    let (code, out, err) = caucus(&stack, &["gate", "show", "ZED"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Gate `signoff` of ZED"), "{out}");
    assert!(
        out.contains("0 provisional decisions require review"),
        "{out}"
    );
    assert!(out.contains("Ready to approve."), "{out}");
    let (code, _, err) = caucus(&stack, &["gate", "reject", "ZED"]);
    assert_ne!(code, 0);
    assert!(err.contains("rationale"), "{err}");
    // Decisions read as sentences; `--json` gives the reply.
    let (code, out, err) = caucus(
        &stack,
        &[
            "gate",
            "send-back",
            "ZED",
            "--reviewer",
            "ana",
            "--rationale",
            "check again",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("sent back gate signoff of ZED (")
            && out.contains(") by ana: \"check again\"\n"),
        "{out}"
    );
    assert!(out.contains("running again: work"), "{out}");
    assert!(!out.contains('{'), "{out}");
    caucus_harness::wait_until(
        "the gate to open again",
        std::time::Duration::from_secs(20),
        || {
            let (_, out, _) = caucus(&stack, &["gate", "list"]);
            out.contains("signoff").then_some(())
        },
    );
    let (code, out, err) = caucus(
        &stack,
        &[
            "--json",
            "gate",
            "approve",
            "ZED",
            "--reviewer",
            "ana",
            "--rationale",
            "ok",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("\"decided_by\": \"ana\""), "{out}");
    let (code, out, err) = caucus(&stack, &["debates"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 debate(s)"), "{out}");
    assert!(out.contains("experts: alice 0/3, bob 0/3"), "{out}");
    let (code, _, err) = caucus(&stack, &["debate", "NOPE"]);
    assert_ne!(code, 0);
    assert!(err.contains("not_found"), "{err}");
}
