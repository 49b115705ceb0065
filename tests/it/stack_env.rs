//! `scripts/stack env` is a complete environment (issue 16, item 2): after
//! `eval "$(scripts/stack env)"` the README's `caucus …` and
//! `caucus-worker …` commands run the stack's own binaries, as written.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::coordinator;
use caucus_harness::{bin_path, Stack};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repository root")
        .to_path_buf()
}

/// Runs `script` in bash with a minimal PATH (no caucus binary on it) and
/// `CAUCUS_STATE` = `state`, from the repository root.
fn bash(state: &Path, script: &str) -> (i32, String, String) {
    let out = Command::new("bash")
        .args(["-c", script])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", state)
        .env("CAUCUS_STATE", state)
        .current_dir(repo_root())
        .output()
        .expect("run bash");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_stack_env_puts_the_stacks_binaries_first_on_path() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let bins = bin_path("caucus").parent().expect("bin dir").to_path_buf();
    let state = tempfile::tempdir().expect("tempdir");
    // What `scripts/stack up` writes.
    std::fs::write(
        state.path().join("stack.env"),
        format!(
            "CAUCUS_NATS_URL={}\nCAUCUS_REDIS_URL={}\nCAUCUS_STACK_BIN_DIR={}\n",
            stack.nats.url(),
            stack.redis.url(),
            bins.display()
        ),
    )
    .unwrap();
    let (code, out, err) = bash(
        state.path(),
        "set -e\n\
         eval \"$(scripts/stack env)\"\n\
         command -v caucus\n\
         command -v caucus-worker\n\
         caucus-worker --agent valuation --slots 2 --handler builtin --dump-config >/dev/null\n\
         caucus plan AAPL MSFT\n\
         caucus workers\n\
         caucus health coordinator\n",
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(bins.join("caucus").to_str().unwrap()),
        "{out}"
    );
    assert_eq!(
        lines.next(),
        Some(bins.join("caucus-worker").to_str().unwrap()),
        "{out}"
    );
    assert!(out.contains("makespan: 9 time units"), "{out}");
    assert!(out.contains("live bottleneck"), "{out}");

    // Without a running stack there is nothing to eval: a clear error.
    let empty = tempfile::tempdir().expect("tempdir");
    let (code, _, err) = bash(empty.path(), "scripts/stack env");
    assert_ne!(code, 0);
    assert!(err.contains("scripts/stack up"), "{err}");
}
