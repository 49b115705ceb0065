//! `caucus submit --watch` at a human gate (issue 16, item 4) and
//! `caucus status <unknown id>`, against a real coordinator and worker.

use crate::common::{caucus, coordinator, worker};
use caucus_harness::Stack;

#[test]
fn watch_stops_at_a_human_gate_with_the_commands_and_exit_code_4() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    // Approval asks the facilitator whether provisional decisions wait.
    let _f = stack
        .service("caucus-facilitator")
        .env("CAUCUS_NATS_STREAM_MAX_BYTES", "67108864")
        .start();
    let _w = worker(&stack, "gated", 2, "noop", &[]);
    let dir = tempfile::tempdir().unwrap();
    let spec = crate::common::gated_spec(dir.path(), 2);

    let (code, out, err) = caucus(
        &stack,
        &["submit", "ZED", "YAK", "--file", &spec, "--watch"],
    );
    assert_eq!(code, 4, "{out}\n{err}");
    assert!(
        out.contains("2 workflow(s) wait for a person at a gate"),
        "{out}"
    );
    assert!(out.contains("caucus gate approve"), "{out}");
    assert!(out.contains("exit code 4"), "{out}");
    // Not a terminal: no redraw, a line per change of the finished count
    // and the final lines, not one line per poll.
    assert!(!out.contains("\x1b["), "{out}");
    assert!(out.lines().count() < 20, "{out}");

    // Approving both lets a second watch finish with exit 0.
    for item in ["ZED", "YAK"] {
        let (code, out, err) = caucus(
            &stack,
            &["gate", "approve", item, "--rationale", "looks right"],
        );
        assert_eq!(code, 0, "{out}\n{err}");
    }
    let (code, out, err) = caucus(
        &stack,
        &[
            "submit",
            "ZED",
            "--file",
            &spec,
            "--watch",
            "--auto-approve-gates",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("completed"), "{out}");

    // JSON: the waiting workflows are named.
    let (code, out, err) = caucus(
        &stack,
        &["--json", "submit", "QUX", "--file", &spec, "--watch"],
    );
    assert_eq!(code, 4, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["waiting_at_gates"][0]["item"], "QUX", "{out}");
    assert_eq!(v["waiting_at_gates"][0]["gates"][0], "signoff", "{out}");
}

#[test]
fn status_of_an_unknown_workflow_says_so_and_fails() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let (code, out, err) = caucus(&stack, &["status", "no-such-workflow"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("no workflow no-such-workflow"), "{err}");
    assert!(!out.contains("no workflows"), "{out}");
    // Listing with nothing held is not an error.
    let (code, out, _) = caucus(&stack, &["status"]);
    assert_eq!(code, 0);
    assert!(out.contains("no workflows"), "{out}");
}
