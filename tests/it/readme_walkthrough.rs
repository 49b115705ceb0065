//! The README's CLI walkthrough as a new user meets it (issue 16): a local
//! stack started by `scripts/stack` (in a state directory of its own, on
//! free ports, with the test build's binaries), two demo batches through
//! `scripts/stack demo`, then every command of the README's "The CLI"
//! block, as written, after `eval "$(scripts/stack env)"`. Each must exit
//! with the code the README gives it (0 unless its comment says
//! `(exit N)`) within 5 s and print what the README says it shows.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use caucus_harness::{bin_path, find_binary, free_port};

/// The longest a walkthrough command may take.
const COMMAND_LIMIT: Duration = Duration::from_secs(5);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repository root")
        .to_path_buf()
}

/// A `scripts/stack` of its own; `down` when dropped.
struct LocalStack {
    state: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl LocalStack {
    fn new() -> LocalStack {
        let state = tempfile::tempdir().expect("tempdir");
        let bins = bin_path("caucus").parent().expect("bin dir").to_path_buf();
        let nats = find_binary(
            "CAUCUS_NATS_SERVER",
            "nats-server",
            "scripts/install-servers",
        );
        let redis = find_binary(
            "CAUCUS_REDIS_SERVER",
            "redis-server",
            "scripts/install-servers",
        );
        let env = vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("HOME".into(), state.path().display().to_string()),
            ("CAUCUS_STATE".into(), state.path().display().to_string()),
            ("CAUCUS_BIN_DIR".into(), bins.display().to_string()),
            ("CAUCUS_NATS_SERVER".into(), nats.display().to_string()),
            ("CAUCUS_REDIS_SERVER".into(), redis.display().to_string()),
            ("CAUCUS_STACK_NATS_PORT".into(), free_port().to_string()),
            ("CAUCUS_STACK_REDIS_PORT".into(), free_port().to_string()),
        ];
        LocalStack { state, env }
    }

    /// Runs `script` in bash from the repository root with only this
    /// stack's environment.
    fn bash(&self, script: &str) -> Output {
        Command::new("bash")
            .args(["-c", script])
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(repo_root())
            .output()
            .expect("run bash")
    }
}

impl Drop for LocalStack {
    fn drop(&mut self) {
        let out = self.bash("scripts/stack down");
        if !out.status.success() {
            eprintln!(
                "scripts/stack down: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let _ = self.state.path();
    }
}

/// One command of a README block, with the exit code its comment gives.
#[derive(Debug)]
struct Line {
    command: String,
    comment: String,
    exit: i32,
}

/// The shell block after the heading `heading` (its first ```sh fence),
/// one [`Line`] per non-empty line.
fn readme_block(readme: &str, heading: &str, nth: usize) -> Vec<Line> {
    let from = readme.find(heading).expect("README heading");
    let rest = &readme[from..];
    let block = rest
        .split("```sh\n")
        .nth(nth + 1)
        .and_then(|b| b.split("```").next())
        .expect("a ```sh block");
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (command, comment) = match l.find("  #") {
                Some(i) => (l[..i].trim(), l[i + 3..].trim()),
                None => (l.trim(), ""),
            };
            let exit = comment
                .split("(exit ")
                .nth(1)
                .and_then(|r| r.split(')').next())
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0);
            Line {
                command: command.to_string(),
                comment: comment.to_string(),
                exit,
            }
        })
        .collect()
}

/// What the README says a command shows, as text its output must hold.
fn expected(command: &str) -> &'static [&'static str] {
    let table: &[(&str, &[&str])] = &[
        (
            "caucus plan AAPL MSFT --capacity",
            &["makespan: 8 time units"],
        ),
        (
            "caucus plan AAPL MSFT",
            &["makespan: 9 time units", "critical path", "bottleneck"],
        ),
        (
            "caucus submit AAPL MSFT --watch",
            &["AAPL", "MSFT", "completed"],
        ),
        (
            "caucus submit BRK.B --watch",
            &["wait for a person at a gate", "caucus gate approve"],
        ),
        ("caucus gate list", &["BRK.B"]),
        ("caucus gate show BRK.B", &["BRK.B", "Findings"]),
        ("caucus gate approve BRK.B", &["BRK.B", "figures tie out"]),
        (
            "printf",
            &["submitted 2 workflow(s)", "JPM", "nightly-2026-11-25"],
        ),
        ("caucus submission --key", &["2 workflow(s)"]),
        (
            "caucus status --state completed --limit 5",
            &["completed", "more workflows"],
        ),
        ("caucus status", &["completed"]),
        ("caucus debates", &["alice"]),
        ("caucus workers", &["valuation", "bottleneck"]),
        ("caucus result AAPL", &["AAPL"]),
        ("caucus health coordinator", &["ok"]),
        ("caucus broadcast", &["regime_change"]),
    ];
    table
        .iter()
        .find(|(prefix, _)| command.starts_with(prefix))
        .map(|(_, want)| *want)
        .unwrap_or(&[])
}

/// Runs one walkthrough command after the README's `eval` line and checks
/// its exit code, time and output.
fn run_line(stack: &LocalStack, eval: &str, line: &Line) -> String {
    let t0 = Instant::now();
    let out = stack.bash(&format!("set -o pipefail\n{eval}\n{}", line.command));
    let took = t0.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().unwrap_or(-1);
    assert_eq!(
        code, line.exit,
        "`{}` exited {code}, the README says {} ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        line.command, line.exit, line.comment
    );
    assert!(
        took < COMMAND_LIMIT,
        "`{}` took {took:?} (limit {COMMAND_LIMIT:?})\n{stdout}",
        line.command
    );
    for want in expected(&line.command) {
        assert!(
            stdout.contains(want),
            "`{}` ({}) does not show {want:?}:\n{stdout}\nstderr:\n{stderr}",
            line.command,
            line.comment
        );
    }
    stdout
}

/// The first JSON string value of `key` in `json`.
fn first_value(json: &str, key: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    fn find(v: &serde_json::Value, key: &str) -> Option<String> {
        match v {
            serde_json::Value::Object(m) => m
                .get(key)
                .and_then(|x| x.as_str().map(String::from))
                .or_else(|| m.values().find_map(|x| find(x, key))),
            serde_json::Value::Array(a) => a.iter().find_map(|x| find(x, key)),
            _ => None,
        }
    }
    find(&v, key)
}

#[test]
fn the_readme_cli_walkthrough_runs_as_written_after_two_demo_batches() {
    let stack = LocalStack::new();
    let demo = stack.bash("scripts/stack demo --unit-ms 100");
    let demo_out = String::from_utf8_lossy(&demo.stdout).into_owned();
    assert!(
        demo.status.success(),
        "scripts/stack demo failed:\n{demo_out}\n{}",
        String::from_utf8_lossy(&demo.stderr)
    );
    assert!(
        demo_out.contains("every announced step happened in both batches"),
        "{demo_out}"
    );
    assert!(
        stack
            .state
            .path()
            .join("reports")
            .join("BRK.B.md")
            .is_file(),
        "report named by the ticker as typed"
    );

    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let lines = readme_block(&readme, "### The CLI", 0);
    assert!(lines.len() >= 15, "{lines:?}");
    let eval = &lines[0].command;
    assert_eq!(eval, "eval \"$(scripts/stack env)\"");
    for line in &lines[1..] {
        run_line(&stack, eval, line);
    }

    // The block of commands that take an id from those lists: the ones
    // that only read, with ids the lists print.
    let ids = readme_block(&readme, "### The CLI", 1);
    let status = stack.bash(&format!(
        "{eval}\ncaucus status --state completed --limit 1 --json"
    ));
    let wf = first_value(&String::from_utf8_lossy(&status.stdout), "workflow_id")
        .expect("a completed workflow id");
    let debates = stack.bash(&format!("{eval}\ncaucus debates --json"));
    let debate =
        first_value(&String::from_utf8_lossy(&debates.stdout), "debate_id").expect("a debate id");
    let mut ran = 0;
    for line in ids.iter().filter(|l| {
        l.command.starts_with("caucus status --tasks") || l.command.starts_with("caucus debate ")
    }) {
        let filled = Line {
            command: line
                .command
                .replace("<workflow_id>", &wf)
                .replace("<debate_id>", &debate),
            comment: line.comment.clone(),
            exit: line.exit,
        };
        let out = run_line(&stack, eval, &filled);
        assert!(
            out.contains(&wf) || out.contains(&debate),
            "`{}` does not name what it shows:\n{out}",
            filled.command
        );
        ran += 1;
    }
    assert_eq!(ran, 2, "{ids:?}");
}

#[test]
fn readme_blocks_parse_with_their_exit_codes() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let lines = readme_block(&readme, "### The CLI", 0);
    let at_gate = lines
        .iter()
        .find(|l| l.command.starts_with("caucus submit BRK.B --watch"))
        .expect("the watch-at-a-gate line");
    assert_eq!(at_gate.exit, 4);
    assert!(lines.iter().filter(|l| l.exit != 0).count() == 1);
    assert!(lines.iter().all(|l| !l.command.contains('<')), "{lines:?}");
}
