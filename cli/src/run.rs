//! `caucus run <pattern> --agents … --task …`: starts a coordination
//! pattern, prints each round as it finishes, and exits 0 when every agent
//! call succeeded (1 otherwise).

use std::time::Duration;

use serde_json::{json, Map, Value};

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
    /// The `coordinator.run_pattern` body (without `wait`).
    pub fn request(&self) -> Value {
        let mut params = Map::new();
        let mut put = |k: &str, v: Value| {
            params.insert(k.to_string(), v);
        };
        if let Some(v) = self.rounds {
            put("rounds", json!(v));
        }
        if let Some(v) = self.max_rounds {
            put("max_rounds", json!(v));
        }
        if let Some(v) = self.threshold {
            put("agreement_threshold", json!(v));
        }
        if let Some(v) = &self.leader {
            put("leader", json!(v));
        }
        if self.no_pass_context {
            put("pass_context", json!(false));
        }
        if self.stop_on_failure {
            put("stop_on_failure", json!(true));
        }
        if let Some(v) = self.context_truncation {
            put("context_truncation", json!(v));
        }
        if let Some(v) = self.output_truncation {
            put("output_truncation", json!(v));
        }
        let mut body = json!({
            "pattern": self.pattern,
            "agents": self.agents,
            "task": self.task,
            "params": params,
        });
        if let Some(v) = self.call_timeout_ms {
            body["call_timeout_ms"] = json!(v);
        }
        if let Some(v) = &self.item {
            body["item"] = json!(v);
        }
        body
    }
}

pub async fn run(client: &Client, args: &RunArgs, as_json: bool) -> anyhow::Result<i32> {
    let mut body = args.request();
    body["wait"] = json!(false);
    let started = client.call_ok("coordinator", "run_pattern", body).await?;
    let run_id = started["run_id"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("coordinator.run_pattern: reply has no run_id"))?
        .to_string();
    if !as_json {
        println!(
            "{} run {run_id} over {}",
            started["pattern"].as_str().unwrap_or("?"),
            args.agents.join(", ")
        );
    }
    let mut printed = 0usize;
    let fin = loop {
        let v = client
            .call_ok("coordinator", "pattern_status", json!({ "run_id": run_id }))
            .await?;
        if !as_json {
            let rounds = v["rounds"].as_array().cloned().unwrap_or_default();
            for r in rounds.iter().skip(printed) {
                print!("{}", render_round(r));
            }
            printed = rounds.len();
        }
        if v["state"] != "running" {
            break v;
        }
        tokio::time::sleep(POLL_EVERY).await;
    };
    if as_json {
        println!("{}", serde_json::to_string_pretty(&fin)?);
    } else {
        print!("{}", render_end(&fin));
    }
    let failed = fin["summary"]["failed"].as_u64().unwrap_or(0);
    Ok(if fin["state"] == "completed" && failed == 0 {
        0
    } else {
        1
    })
}

/// One round as text: a header, then one line per agent.
pub fn render_round(r: &Value) -> String {
    let mut out = format!(
        "round {} ({})\n",
        r["round"],
        r["phase"].as_str().unwrap_or("?")
    );
    for a in r["results"].as_array().into_iter().flatten() {
        let label = a["label"].as_str().unwrap_or("?");
        let line = if a["success"] == true {
            let text = a["output"].as_str().unwrap_or("");
            let first: String = text
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(100)
                .collect();
            let stance = a["stance"]
                .as_str()
                .map(|s| format!(" [{s}]"))
                .unwrap_or_default();
            format!("  ok   {label:<16}{stance} {first}\n")
        } else {
            format!(
                "  FAIL {label:<16} {} ({})\n",
                a["error"].as_str().unwrap_or(""),
                a["error_type"].as_str().unwrap_or("?")
            )
        };
        out.push_str(&line);
    }
    if let Some(c) = r.get("consensus").filter(|c| c.is_object()) {
        out.push_str(&format!(
            "  consensus: explicit {:.2}, similarity {:.2}, combined {:.2} vs {:.2}: {}\n",
            c["explicit"].as_f64().unwrap_or(0.0),
            c["similarity"].as_f64().unwrap_or(0.0),
            c["combined"].as_f64().unwrap_or(0.0),
            c["threshold"].as_f64().unwrap_or(0.0),
            if c["reached"] == true {
                "reached"
            } else {
                "not reached"
            }
        ));
    }
    out
}

/// The closing summary line(s).
pub fn render_end(v: &Value) -> String {
    let s = &v["summary"];
    let mut out = format!(
        "{}: {} result(s), {} ok, {} failed",
        v["state"].as_str().unwrap_or("?"),
        s["results"],
        s["succeeded"],
        s["failed"]
    );
    if let Some(r) = v["consensus_reached"].as_bool() {
        out.push_str(if r {
            "; consensus reached"
        } else {
            "; no consensus"
        });
    }
    if let Some(st) = v["stopped"].as_str() {
        out.push_str(&format!("; stopped early ({st})"));
    }
    if let Some(e) = v["error"].as_str() {
        out.push_str(&format!("; {e}"));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

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
            t.run.request(),
            json!({"pattern": "consensus", "agents": ["v1", "v2", "v3"], "task": "safe?",
                   "params": {"max_rounds": 2, "agreement_threshold": 0.9}})
        );
    }

    #[test]
    fn rounds_render_failures_and_scores() {
        let r = json!({"round": 2, "phase": "consensus", "results": [
            {"label": "v1", "success": true, "output": "I AGREE\nmore", "stance": "agree"},
            {"label": "v2", "success": false, "error": "exited with 3", "error_type": "exit_status"}],
            "consensus": {"explicit": 0.5, "similarity": 1.0, "combined": 0.65, "threshold": 0.8, "reached": false}});
        let s = render_round(&r);
        assert!(s.contains("round 2 (consensus)"));
        assert!(s.contains("ok   v1               [agree] I AGREE\n"), "{s}");
        assert!(s.contains("FAIL v2               exited with 3 (exit_status)"));
        assert!(s.contains("combined 0.65 vs 0.80: not reached"));
    }
}
