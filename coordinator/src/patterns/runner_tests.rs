//! The patterns over an in-memory caller: counts, orders, contexts,
//! consensus exits and failure isolation.

use std::sync::{Arc, Mutex};

use serde_json::json;

use caucus_shared::clock::{ManualClock, SharedClock};

use super::result::{AgentResult, PatternTask};
use super::runner::{run, AgentCaller, StopReason};
use super::spec::{Pattern, PatternSpec};

type Reply = Box<dyn Fn(&str, &PatternTask) -> Result<String, String> + Send + Sync>;

/// Answers from a closure and remembers every task it was given.
struct FnCaller {
    reply: Reply,
    seen: Mutex<Vec<(String, PatternTask)>>,
}

impl FnCaller {
    fn new(
        f: impl Fn(&str, &PatternTask) -> Result<String, String> + Send + Sync + 'static,
    ) -> Self {
        FnCaller {
            reply: Box::new(f),
            seen: Mutex::new(Vec::new()),
        }
    }

    fn seen(&self) -> Vec<(String, PatternTask)> {
        self.seen.lock().unwrap().clone()
    }
}

impl AgentCaller for FnCaller {
    fn call(
        &self,
        agent_type: &str,
        task: PatternTask,
    ) -> impl std::future::Future<Output = AgentResult> + Send {
        self.seen
            .lock()
            .unwrap()
            .push((agent_type.to_string(), task.clone()));
        let r = match (self.reply)(agent_type, &task) {
            Ok(text) => AgentResult::ok(agent_type, &task, text),
            Err(e) => AgentResult::failed(agent_type, &task, "exit_status", e),
        };
        async move {
            // Let the other calls of the round interleave.
            tokio::task::yield_now().await;
            r
        }
    }
}

fn clock() -> SharedClock {
    Arc::new(ManualClock::at_epoch())
}

fn agents(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn order(results: &[&AgentResult]) -> Vec<(u32, String, String)> {
    results
        .iter()
        .map(|r| (r.round, r.phase.clone(), r.label.clone()))
        .collect()
}

#[tokio::test]
async fn parallel_gives_every_agent_the_same_task_and_isolates_failures() {
    let c = FnCaller::new(|a, t| {
        if a == "b" {
            Err("boom".into())
        } else {
            Ok(format!("{a}: {}", t.description))
        }
    });
    let spec = PatternSpec::new(Pattern::Parallel, agents(&["a", "b", "c"]), "design an API");
    let o = run(&c, &spec, clock(), None).await;
    let res = o.results();
    assert_eq!(res.len(), 3);
    assert_eq!(
        res.iter().map(|r| r.success).collect::<Vec<_>>(),
        [true, false, true]
    );
    assert_eq!(res[0].output.as_deref(), Some("a: design an API"));
    assert_eq!(res[1].error.as_deref(), Some("boom"));
    assert!(c
        .seen()
        .iter()
        .all(|(_, t)| t.description == "design an API"));
}

#[tokio::test]
async fn pipeline_passes_truncated_outputs_and_can_stop_on_failure() {
    let long = "x".repeat(1500);
    let c = FnCaller::new(move |a, t| match a {
        "planner" => Ok(long.clone()),
        "coder" => {
            assert_eq!(
                t.context["planner_output"].as_str().unwrap().len(),
                1000,
                "passed on cut to the output limit"
            );
            Ok("code".into())
        }
        "broken" => Err("crash".into()),
        _ => Ok(format!("saw {}", t.context.len())),
    });
    let spec = PatternSpec::new(
        Pattern::Pipeline {
            pass_context: true,
            stop_on_failure: false,
        },
        agents(&["planner", "coder", "broken", "reviewer"]),
        "implement auth",
    );
    let o = run(&c, &spec, clock(), None).await;
    assert_eq!(o.results().len(), 4);
    assert_eq!(
        o.rounds.iter().map(|r| r.round).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    let seen = c.seen();
    let last = &seen[3].1.context;
    assert!(last.contains_key("planner_output") && last.contains_key("coder_output"));
    assert!(
        !last.contains_key("broken_output"),
        "failed steps add nothing"
    );
    assert_eq!(last["pipeline_step"], json!(4));
    // Stored outputs are cut to the output limit too.
    assert_eq!(o.rounds[0].results[0].output.as_ref().unwrap().len(), 1000);
    assert!(o.rounds[0].results[0].truncated);

    let stop = PatternSpec::new(
        Pattern::Pipeline {
            pass_context: false,
            stop_on_failure: true,
        },
        agents(&["reviewer", "broken", "reviewer"]),
        "t",
    );
    let c2 = FnCaller::new(|a, t| {
        assert!(
            !t.context.contains_key("reviewer#1_output"),
            "no context passed"
        );
        if a == "broken" {
            Err("crash".into())
        } else {
            Ok("ok".into())
        }
    });
    let o = run(&c2, &stop, clock(), None).await;
    assert_eq!(o.results().len(), 2);
    assert_eq!(o.stopped, Some(StopReason::StopOnFailure));
}

#[tokio::test]
async fn debate_of_three_agents_over_three_rounds_gives_nine_in_round_order() {
    let c = FnCaller::new(|a, t| Ok(format!("{a} r{} {}", t.round, "y".repeat(600))));
    let spec = PatternSpec::new(
        Pattern::Debate { rounds: 3 },
        agents(&["optimist", "pessimist", "pragmatist"]),
        "migrate to microservices?",
    );
    let o = run(&c, &spec, clock(), None).await;
    let res = o.results();
    assert_eq!(res.len(), 9);
    let labels = ["optimist", "pessimist", "pragmatist"];
    let want: Vec<(u32, String, String)> = (1..=3)
        .flat_map(|r| {
            labels
                .iter()
                .map(move |l| (r, "debate".to_string(), l.to_string()))
        })
        .collect();
    assert_eq!(order(&res), want);
    for (_, t) in c.seen() {
        assert_eq!(
            t.description,
            format!("Round {}/3: migrate to microservices?", t.round)
        );
        assert_eq!(t.context["debate_round"], json!(t.round));
        assert_eq!(t.context["total_rounds"], json!(3));
        if t.round == 1 {
            assert!(!t.context.contains_key("previous_responses"));
        } else {
            let prev = t.context["previous_responses"].as_object().unwrap();
            assert_eq!(prev.len(), 3);
            let p = prev["pessimist"].as_str().unwrap();
            assert_eq!(p.chars().count(), 500, "cut to the context limit");
            assert!(p.starts_with(&format!("pessimist r{}", t.round - 1)));
        }
    }
}

#[tokio::test]
async fn an_agent_crashing_mid_round_fails_alone_and_rejoins_the_next_round() {
    let c = FnCaller::new(|a, t| {
        if a == "flaky" && t.round == 2 {
            Err("exited with 1".into())
        } else {
            Ok(format!("{a} says {}", t.round))
        }
    });
    let spec = PatternSpec::new(
        Pattern::Debate { rounds: 3 },
        agents(&["steady", "flaky", "calm"]),
        "t",
    );
    let o = run(&c, &spec, clock(), None).await;
    let r2 = &o.rounds[1].results;
    assert_eq!(
        r2.iter().map(|r| r.success).collect::<Vec<_>>(),
        [true, false, true]
    );
    assert!(o.rounds[2].results.iter().all(|r| r.success));
    // Round 3 still sees flaky's round-1 answer (its latest success).
    let seen = c.seen();
    let (_, t) = seen
        .iter()
        .find(|(a, t)| a == "calm" && t.round == 3)
        .unwrap();
    assert_eq!(
        t.context["previous_responses"]["flaky"],
        json!("flaky says 1")
    );
}

#[tokio::test]
async fn hierarchical_plans_works_and_synthesises_in_five_results() {
    let c = FnCaller::new(|a, t| match t.phase.as_str() {
        "plan" => Ok("PLAN: split by layer".into()),
        "work" => {
            assert_eq!(t.context["plan"], json!("PLAN: split by layer"));
            if a == "db" {
                Err("db down".into())
            } else {
                Ok(format!("{a} done"))
            }
        }
        "synthesize" => {
            let outs = t.context["worker_outputs"].as_object().unwrap();
            assert_eq!(outs.len(), 2);
            assert_eq!(t.context["failed_workers"], json!(["db"]));
            Ok("final".into())
        }
        p => panic!("unexpected phase {p}"),
    });
    let spec = PatternSpec::new(
        Pattern::Hierarchical { leader: 0 },
        agents(&["architect", "frontend", "backend", "db"]),
        "notifications",
    );
    let o = run(&c, &spec, clock(), None).await;
    let res = o.results();
    assert_eq!(res.len(), 5);
    assert_eq!(
        order(&res),
        vec![
            (1, "plan".into(), "architect".into()),
            (2, "work".into(), "frontend".into()),
            (2, "work".into(), "backend".into()),
            (2, "work".into(), "db".into()),
            (3, "synthesize".into(), "architect".into()),
        ]
    );
    assert!(!res[3].success && res[4].success);
    let plan_ctx = &c.seen()[0].1.context;
    assert_eq!(plan_ctx["worker_count"], json!(3));
    assert_eq!(plan_ctx["role"], json!("leader"));
}

#[tokio::test]
async fn consensus_exits_early_when_everyone_agrees_in_round_one() {
    let c = FnCaller::new(|_, t| {
        assert!(t
            .description
            .contains("clearly state 'I AGREE' at the start"));
        Ok("I AGREE. The query binds its parameters, so it is safe.".into())
    });
    let spec = PatternSpec::new(
        Pattern::Consensus {
            max_rounds: 3,
            agreement_threshold: 0.8,
        },
        agents(&["v1", "v2", "v3"]),
        "Is this SQL query safe?",
    );
    let o = run(&c, &spec, clock(), None).await;
    assert_eq!(o.rounds.len(), 1);
    assert_eq!(o.results().len(), 3);
    assert_eq!(o.consensus_reached, Some(true));
    assert_eq!(o.stopped, Some(StopReason::ConsensusReached));
    let s = o.rounds[0].consensus.as_ref().unwrap();
    assert_eq!((s.explicit, s.similarity, s.combined), (1.0, 1.0, 1.0));
}

#[tokio::test]
async fn consensus_runs_to_max_rounds_without_agreement() {
    let c = FnCaller::new(|a, t| {
        Ok(match a {
            "v1" => "I AGREE, it is safe".to_string(),
            "v2" => format!("I don't agree: round {} shows concatenation", t.round),
            _ => "I DISAGREE because input reaches the WHERE clause".to_string(),
        })
    });
    let spec = PatternSpec::new(
        Pattern::Consensus {
            max_rounds: 3,
            agreement_threshold: 0.8,
        },
        agents(&["v1", "v2", "v3"]),
        "Is this SQL query safe?",
    );
    let o = run(&c, &spec, clock(), None).await;
    assert_eq!(o.rounds.len(), 3);
    assert_eq!(o.results().len(), 9);
    assert_eq!(o.consensus_reached, Some(false));
    assert_eq!(o.stopped, None);
    for r in &o.rounds {
        let s = r.consensus.as_ref().unwrap();
        assert_eq!((s.agreed, s.disagreed), (1, 2));
        assert!(!s.reached);
        use super::consensus::Stance::*;
        assert_eq!(
            r.results.iter().map(|x| x.stance).collect::<Vec<_>>(),
            [Some(Agree), Some(Disagree), Some(Disagree)]
        );
    }
    let seen = c.seen();
    let (_, t) = seen.iter().find(|(_, t)| t.round == 2).unwrap();
    assert_eq!(t.context["consensus_round"], json!(2));
    assert_eq!(t.context["max_rounds"], json!(3));
    assert_eq!(
        t.context["previous_responses"].as_object().unwrap().len(),
        3
    );
}

#[tokio::test]
async fn consensus_reached_in_a_later_round() {
    let c = FnCaller::new(|a, t| {
        Ok(if t.round >= 2 || a == "v1" {
            "I AGREE it is safe".into()
        } else {
            "I DISAGREE it is unsafe".into()
        })
    });
    let spec = PatternSpec::new(
        Pattern::Consensus {
            max_rounds: 3,
            agreement_threshold: 0.8,
        },
        agents(&["v1", "v2"]),
        "q",
    );
    let o = run(&c, &spec, clock(), None).await;
    assert_eq!(o.rounds.len(), 2);
    assert_eq!(o.consensus_reached, Some(true));
}

#[tokio::test]
async fn peer_review_is_work_circular_review_revise_three_n() {
    let c = FnCaller::new(|a, t| {
        Ok(match t.phase.as_str() {
            "work" => format!("work of {a}"),
            "review" => {
                format!("{a} on {}", t.context["work"].as_str().unwrap())
            }
            "revise" => format!(
                "{a} revised using [{}]",
                t.context["feedback"].as_str().unwrap_or("none")
            ),
            p => panic!("phase {p}"),
        })
    });
    let spec = PatternSpec::new(
        Pattern::PeerReview,
        agents(&["a", "b", "c"]),
        "implement an LRU cache",
    );
    let o = run(&c, &spec, clock(), None).await;
    let res = o.results();
    assert_eq!(res.len(), 9);
    let phases: Vec<&str> = res.iter().map(|r| r.phase.as_str()).collect();
    assert_eq!(
        phases,
        ["work", "work", "work", "review", "review", "review", "revise", "revise", "revise"]
    );
    // i reviews i+1 (circular); i revises with feedback from i-1.
    assert_eq!(res[3].output.as_deref(), Some("a on work of b"));
    assert_eq!(res[5].output.as_deref(), Some("c on work of a"));
    assert_eq!(
        res[6].output.as_deref(),
        Some("a revised using [c on work of a]")
    );
    let seen = c.seen();
    let (_, t) = seen
        .iter()
        .find(|(a, t)| a == "b" && t.phase == "review")
        .unwrap();
    assert_eq!(t.context["reviewing"], json!("c"));
    let (_, t) = seen
        .iter()
        .find(|(a, t)| a == "b" && t.phase == "revise")
        .unwrap();
    assert_eq!(t.context["feedback_from"], json!("a"));
}

#[tokio::test]
async fn peer_review_with_a_crash_still_gives_three_n() {
    let c = FnCaller::new(|a, t| match (a, t.phase.as_str()) {
        ("b", "work") => Err("crashed".into()),
        ("c", "review") => Err("crashed".into()),
        _ => Ok(format!("{a} {}", t.phase)),
    });
    let spec = PatternSpec::new(Pattern::PeerReview, agents(&["a", "b", "c"]), "t");
    let o = run(&c, &spec, clock(), None).await;
    let res = o.results();
    assert_eq!(res.len(), 9);
    let ok: Vec<bool> = res.iter().map(|r| r.success).collect();
    // b's work failed: a has nothing to review and b nothing to revise;
    // c's review failed: a revises without feedback.
    assert_eq!(
        ok,
        [true, false, true, false, true, false, true, false, true]
    );
    assert_eq!(res[3].error_type.as_deref(), Some("skipped"));
    assert_eq!(res[7].error_type.as_deref(), Some("skipped"));
    let seen = c.seen();
    assert!(!seen.iter().any(|(a, t)| a == "a" && t.phase == "review"));
    let (_, t) = seen
        .iter()
        .find(|(a, t)| a == "a" && t.phase == "revise")
        .unwrap();
    assert_eq!(t.context["feedback_error"], json!("c's review failed"));
}

#[tokio::test]
async fn every_round_reaches_the_sink_as_it_ends() {
    let c = FnCaller::new(|_, _| Ok("ok".into()));
    let spec = PatternSpec::new(Pattern::Debate { rounds: 2 }, agents(&["a", "b"]), "t");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let o = run(&c, &spec, clock(), Some(tx)).await;
    let mut got = Vec::new();
    while let Ok(r) = rx.try_recv() {
        got.push(r);
    }
    assert_eq!(got, o.rounds);
}
