//! `caucus run <pattern> --agents … --task …`: starts a coordination
//! pattern, prints each round as it finishes, and exits 0 when every agent
//! call succeeded (1 otherwise).

use std::time::Duration;

use caucus_shared::api::client::decode_reply;
use caucus_shared::api::coordinator::patterns::{
    ParamsInput, PatternRun, PatternStatus, PatternStatusRequest, RoundRecord, RunPattern,
    RunRequest, RunState, Stance, StopReason,
};
use caucus_shared::api::Operation;

use super::Client;

/// How often the run record is polled.
const POLL_EVERY: Duration = Duration::from_millis(200);

/// Flags of `caucus run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// parallel, pipeline, debate, hierarchical, consensus or peer_review.
    pub pattern: String,
    /// Agent types in order, comma separated (repeats allowed).
    #[arg(long, short = 'a', required = true, value_delimiter = ',')]
    pub agents: Vec<String>,
    /// The task every agent works on.
    #[arg(long, short = 't')]
    pub task: String,
    /// Debate: rounds (default 2).
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Consensus: rounds at most (default 3).
    #[arg(long)]
    pub max_rounds: Option<u32>,
    /// Consensus: combined score needed, 0..=1 (default 0.8).
    #[arg(long)]
    pub threshold: Option<f64>,
    /// Hierarchical: the leader's agent type (default the first agent).
    #[arg(long)]
    pub leader: Option<String>,
    /// Pipeline: do not pass earlier outputs on.
    #[arg(long)]
    pub no_pass_context: bool,
    /// Pipeline: stop at the first failed step.
    #[arg(long)]
    pub stop_on_failure: bool,
    /// Characters of shared context per response (default 500).
    #[arg(long)]
    pub context_truncation: Option<usize>,
    /// Characters of each stored output (default 1000).
    #[arg(long)]
    pub output_truncation: Option<usize>,
    /// Per-agent-call time limit in ms (default: coordinator config).
    #[arg(long)]
    pub call_timeout_ms: Option<u64>,
    /// The item the dispatched tasks name.
    #[arg(long)]
    pub item: Option<String>,
}

impl RunArgs {
    /// The `coordinator.run_pattern` request (waiting for the end).
    pub fn request(&self) -> RunRequest {
        RunRequest {
            pattern: self.pattern.clone(),
            agents: self.agents.clone(),
            task: self.task.clone(),
            params: ParamsInput {
                pass_context: self.no_pass_context.then_some(false),
                stop_on_failure: self.stop_on_failure.then_some(true),
                rounds: self.rounds,
                leader: self.leader.clone(),
                max_rounds: self.max_rounds,
                agreement_threshold: self.threshold,
                context_truncation: self.context_truncation,
                output_truncation: self.output_truncation,
            },
            item: self.item.clone(),
            call_timeout_ms: self.call_timeout_ms,
            wait: true,
        }
    }
}

pub async fn run(client: &Client, args: &RunArgs, as_json: bool) -> anyhow::Result<i32> {
    let req = RunRequest {
        wait: false,
        ..args.request()
    };
    let started = client.op_ok::<RunPattern>(&req).await?;
    let run_id = started.run.run_id;
    if !as_json {
        println!(
            "{} run {run_id} over {}",
            started.run.pattern,
            args.agents.join(", ")
        );
    }
    let status = PatternStatusRequest { run_id };
    let mut printed = 0usize;
    let (fin, raw) = loop {
        // The reply as it came is what `--json` prints.
        let raw = client
            .call_ok(
                PatternStatus::SERVICE,
                PatternStatus::NAME,
                serde_json::to_value(&status)?,
            )
            .await?;
        let v = decode_reply::<PatternStatus>(raw.clone()).map_err(|e| {
            anyhow::anyhow!("coordinator.pattern_status: {} ({})", e.message, e.code)
        })?;
        if !as_json {
            for r in v.run.rounds.iter().skip(printed) {
                print!("{}", render_round(r));
            }
            printed = v.run.rounds.len();
        }
        if v.run.state != RunState::Running {
            break (v, raw);
        }
        tokio::time::sleep(POLL_EVERY).await;
    };
    if as_json {
        println!("{}", serde_json::to_string_pretty(&raw)?);
    } else {
        print!("{}", render_end(&fin.run));
    }
    Ok(
        if fin.run.state == RunState::Completed && fin.run.summary.failed == 0 {
            0
        } else {
            1
        },
    )
}

/// One round as text: a header, then one line per agent.
pub fn render_round(r: &RoundRecord) -> String {
    let mut out = format!("round {} ({})\n", r.round, r.phase);
    for a in &r.results {
        let label = &a.label;
        let line = if a.success {
            let text = a.output.as_deref().unwrap_or("");
            let first: String = text
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(100)
                .collect();
            let stance = a
                .stance
                .map(|s| format!(" [{}]", stance(s)))
                .unwrap_or_default();
            format!("  ok   {label:<16}{stance} {first}\n")
        } else {
            format!(
                "  FAIL {label:<16} {} ({})\n",
                a.error.as_deref().unwrap_or(""),
                a.error_type.as_deref().unwrap_or("?")
            )
        };
        out.push_str(&line);
    }
    if let Some(c) = &r.consensus {
        out.push_str(&format!(
            "  consensus: explicit {:.2}, similarity {:.2}, combined {:.2} vs {:.2}: {}\n",
            c.explicit,
            c.similarity,
            c.combined,
            c.threshold,
            if c.reached { "reached" } else { "not reached" }
        ));
    }
    out
}

fn stance(s: Stance) -> &'static str {
    match s {
        Stance::Agree => "agree",
        Stance::Disagree => "disagree",
    }
}

fn stop_reason(s: StopReason) -> &'static str {
    match s {
        StopReason::ConsensusReached => "consensus_reached",
        StopReason::StopOnFailure => "stop_on_failure",
    }
}

fn run_state(s: RunState) -> &'static str {
    match s {
        RunState::Running => "running",
        RunState::Completed => "completed",
        RunState::Failed => "failed",
    }
}

/// The closing summary line(s).
pub fn render_end(v: &PatternRun) -> String {
    let s = &v.summary;
    let mut out = format!(
        "{}: {} result(s), {} ok, {} failed",
        run_state(v.state),
        s.results,
        s.succeeded,
        s.failed
    );
    if let Some(r) = v.consensus_reached {
        out.push_str(if r {
            "; consensus reached"
        } else {
            "; no consensus"
        });
    }
    if let Some(st) = v.stopped {
        out.push_str(&format!("; stopped early ({})", stop_reason(st)));
    }
    if let Some(e) = &v.error {
        out.push_str(&format!("; {e}"));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn flags_become_the_request() {
        let t = T::try_parse_from([
            "t",
            "consensus",
            "--agents",
            "v1,v2,v3",
            "--task",
            "safe?",
            "--max-rounds",
            "2",
            "--threshold",
            "0.9",
        ])
        .unwrap();
        assert_eq!(
            serde_json::to_value(t.run.request()).unwrap(),
            json!({"pattern": "consensus", "agents": ["v1", "v2", "v3"], "task": "safe?",
                   "params": {"max_rounds": 2, "agreement_threshold": 0.9}})
        );
    }

    #[test]
    fn rounds_render_failures_and_scores() {
        let r = json!({"round": 2, "phase": "consensus", "results": [
            {"label": "v1", "success": true, "output": "I AGREE\nmore", "stance": "agree",
             "agent": "v", "index": 0, "round": 2, "phase": "consensus", "duration_ms": 5},
            {"label": "v2", "success": false, "error": "exited with 3", "error_type": "exit_status",
             "agent": "v", "index": 1, "round": 2, "phase": "consensus", "duration_ms": 5}],
            "consensus": {"explicit": 0.5, "similarity": 1.0, "combined": 0.65, "threshold": 0.8, "reached": false,
                          "agreed": 1, "disagreed": 0, "no_stance": 0, "agents": 2},
            "started_at": "2026-11-25T12:00:00Z", "finished_at": "2026-11-25T12:00:01Z"});
        let s = render_round(&serde_json::from_value(r).unwrap());
        assert!(s.contains("round 2 (consensus)"));
        assert!(s.contains("ok   v1               [agree] I AGREE\n"), "{s}");
        assert!(s.contains("FAIL v2               exited with 3 (exit_status)"));
        assert!(s.contains("combined 0.65 vs 0.80: not reached"));
    }
}
