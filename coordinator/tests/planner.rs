//! Planner behaviour: the DESIGN.md §4 test vectors and the scheduling rules.

use std::collections::BTreeMap;

use caucus_coordinator::pipeline::{builtin, PipelineError, PipelineSpec};
use caucus_coordinator::planner::{gantt, plan, plan_with_options, Plan, PlanOptions, PlannedTask};

fn items(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn no_overrides() -> BTreeMap<String, u32> {
    BTreeMap::new()
}

fn task<'a>(plan: &'a Plan, id: &str) -> &'a PlannedTask {
    plan.tasks
        .iter()
        .find(|t| t.task_id == id)
        .unwrap_or_else(|| panic!("no task {id}"))
}

fn stock_plan(overrides: &[(&str, u32)]) -> Plan {
    let spec = builtin("stock-analysis").unwrap();
    let overrides = overrides.iter().map(|(a, c)| (a.to_string(), *c)).collect();
    plan(&items(&["AAPL", "MSFT"]), &spec, &overrides).unwrap()
}

/// Capacity is never exceeded and every task starts after its dependencies.
fn assert_feasible(plan: &Plan, spec: &PipelineSpec) {
    let by_id: BTreeMap<&str, &PlannedTask> =
        plan.tasks.iter().map(|t| (t.task_id.as_str(), t)).collect();
    for t in &plan.tasks {
        let stage = spec.stage(&t.stage).unwrap();
        for dep in &stage.depends_on {
            for d in plan
                .tasks
                .iter()
                .filter(|d| d.item == t.item && &d.stage == dep)
            {
                assert!(
                    d.end <= t.start + 1e-9,
                    "{} starts before {} ends",
                    t.task_id,
                    d.task_id
                );
            }
        }
        assert!(t.start >= t.ready - 1e-9);
        if let (Some(agent), Some(slot)) = (&t.agent_type, t.slot) {
            assert!(slot < plan.capacities[agent], "{} slot {slot}", t.task_id);
            for o in plan.tasks.iter().filter(|o| {
                o.task_id != t.task_id
                    && o.agent_type.as_ref() == Some(agent)
                    && o.slot == Some(slot)
            }) {
                let overlap = t.start < o.end - 1e-9 && o.start < t.end - 1e-9;
                assert!(!overlap, "{} and {} share a lane", t.task_id, o.task_id);
            }
        }
    }
    assert_eq!(by_id.len(), plan.tasks.len(), "task ids are unique");
    let last = plan.tasks.iter().map(|t| t.end).fold(0.0, f64::max);
    assert_eq!(last, plan.makespan);
}

#[test]
fn stock_analysis_two_items_makespan_9_with_valuation_capacity_1() {
    let p = stock_plan(&[]);
    assert_eq!(p.makespan, 9.0);
    assert_eq!(
        p.critical_path,
        ["screening", "business", "financial", "valuation", "report"]
    );
    assert_eq!(
        p.critical_path_tasks,
        [
            "AAPL/screening",
            "AAPL/business",
            "AAPL/financial",
            "AAPL/valuation",
            "AAPL/report"
        ]
    );
    assert_eq!(p.critical_path_length, 8.0);
    assert_eq!(p.sequential_time, 20.0);
    assert!((p.parallelism_factor - 20.0 / 9.0).abs() < 1e-12);
    let b = p.bottleneck.as_ref().expect("a bottleneck");
    assert_eq!(b.agent_type, "valuation");
    assert_eq!(b.capacity, 1);
    assert_eq!(b.makespan_with_one_more_slot, 8.0);
    assert_eq!(b.gain, 1.0);
    assert_eq!(b.queueing_delay, 1.0);
    // 7 per item: six agent stages and the review gate.
    assert_eq!(p.tasks.len(), 14);
    // The seed's schedule: valuations run one after the other.
    assert_eq!(
        (
            task(&p, "AAPL/valuation").start,
            task(&p, "AAPL/valuation").end
        ),
        (6.0, 7.0)
    );
    assert_eq!(
        (
            task(&p, "MSFT/valuation").start,
            task(&p, "MSFT/valuation").end
        ),
        (7.0, 8.0)
    );
    assert_eq!(task(&p, "MSFT/report").end, 9.0);
    assert_eq!(task(&p, "MSFT/financial").start, 4.0);
    assert_eq!(task(&p, "MSFT/strategy").start, 2.0);
    assert!(task(&p, "AAPL/financial").on_critical_path);
    assert!(!task(&p, "AAPL/strategy").on_critical_path);
    assert_eq!(
        task(&p, "AAPL/valuation").agent_type.as_deref(),
        Some("valuation")
    );
    assert_eq!(p.utilization["valuation"].utilization, 2.0 / 9.0);
    assert_eq!(p.capacities["valuation"], 1);
    assert_eq!(
        p.topological_order,
        [
            "screening",
            "business",
            "financial",
            "strategy",
            "valuation",
            "review",
            "report"
        ]
    );
    assert_eq!(
        task(&p, "AAPL/review").start,
        7.0,
        "the gate opens after the valuation"
    );
    assert_eq!(
        task(&p, "AAPL/review").end,
        7.0,
        "gates take no planned time"
    );
    assert_feasible(&p, &builtin("stock-analysis").unwrap());
}

#[test]
fn stock_analysis_two_items_makespan_8_with_valuation_capacity_2() {
    let p = stock_plan(&[("valuation", 2)]);
    assert_eq!(p.makespan, 8.0);
    assert_eq!(p.capacities["valuation"], 2);
    assert_eq!(task(&p, "MSFT/valuation").start, 6.0);
    assert_eq!(task(&p, "MSFT/valuation").slot, Some(1));
    // Nothing queues and no extra slot helps: the plan is dependency-bound.
    assert_eq!(p.makespan, p.critical_path_length);
    assert!(p.bottleneck.is_none());
    assert_feasible(&p, &builtin("stock-analysis").unwrap());
}

#[test]
fn plan_roundtrips_through_json() {
    let p = stock_plan(&[]);
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["bottleneck"]["agent_type"], "valuation");
    assert!(json["tasks"][0].get("shard").is_none());
    let back: Plan = serde_json::from_value(json).unwrap();
    assert_eq!(back, p);
}

#[test]
fn planning_errors_are_specific() {
    let spec = builtin("stock-analysis").unwrap();
    let e = plan(&[], &spec, &no_overrides()).unwrap_err();
    assert_eq!(e, PipelineError::NoItems);
    let e = plan(&items(&["A", "A"]), &spec, &no_overrides()).unwrap_err();
    assert_eq!(e, PipelineError::DuplicateItem { item: "A".into() });
    let e = plan(&items(&[""]), &spec, &no_overrides()).unwrap_err();
    assert_eq!(e, PipelineError::EmptyItem);
    let zero = [("valuation".to_string(), 0)].into();
    let e = plan(&items(&["A"]), &spec, &zero).unwrap_err();
    assert_eq!(
        e,
        PipelineError::ZeroCapacity {
            agent: "valuation".into()
        }
    );
    let mut cyclic = spec.clone();
    cyclic.stages[0].depends_on = vec!["report".into()];
    let e = plan(&items(&["A"]), &cyclic, &no_overrides()).unwrap_err();
    assert_eq!(
        e.to_string(),
        // The shortest cycle through the earliest-declared stage is reported.
        "cycle: screening -> strategy -> valuation -> report -> screening"
    );
    let mut unknown = spec.clone();
    unknown.stages[1].agent = Some("analyst".into());
    let e = plan(&items(&["A"]), &unknown, &no_overrides()).unwrap_err();
    assert_eq!(
        e,
        PipelineError::UnknownAgent {
            stage: "business".into(),
            agent: "analyst".into()
        }
    );
    // An override makes the agent type known.
    let known = [("analyst".to_string(), 2)].into();
    let p = plan(&items(&["A"]), &unknown, &known).unwrap();
    assert_eq!(p.capacities["analyst"], 2);
    let mut huge = spec.clone();
    huge.stages[0].fan_out = Some(u32::MAX);
    let e = plan(&items(&["A", "B"]), &huge, &no_overrides()).unwrap_err();
    assert!(
        matches!(e, PipelineError::TooLarge { what: "tasks", count, .. } if count == 2 * (u64::from(u32::MAX) + 6)),
        "{e}"
    );
    let mut dense = spec.clone();
    dense.stages[0].fan_out = Some(5_000);
    dense.stages[1].fan_out = Some(5_000);
    let e = plan(&items(&["A", "B"]), &dense, &no_overrides()).unwrap_err();
    assert!(
        matches!(
            e,
            PipelineError::TooLarge {
                what: "task dependencies",
                ..
            }
        ),
        "{e}"
    );
    let mut bad_dep = spec;
    let report = bad_dep.stages.len() - 1;
    bad_dep.stages[report].depends_on = vec!["valuation".into(), "approval".into()];
    let e = plan(&items(&["A"]), &bad_dep, &no_overrides()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "stage `report` depends on unknown stage `approval`"
    );
}

fn spec(toml: &str) -> PipelineSpec {
    PipelineSpec::from_toml(toml).unwrap()
}

#[test]
fn longest_remaining_path_goes_first() {
    // One `x` slot, two ready tasks at t=0: `short` (remaining 1) is declared
    // first, `long` (remaining 1 + 5) must still start first.
    let s = spec(
        r#"
        name = "prio"
        capacities = { x = 1, y = 1 }
        [[stages]]
        name = "short"
        agent = "x"
        expected_duration = 1.0
        [[stages]]
        name = "long"
        agent = "x"
        expected_duration = 1.0
        [[stages]]
        name = "tail"
        agent = "y"
        depends_on = ["long"]
        expected_duration = 5.0
    "#,
    );
    let p = plan(&items(&["i"]), &s, &no_overrides()).unwrap();
    assert_eq!(task(&p, "i/long").start, 0.0);
    assert_eq!(task(&p, "i/short").start, 1.0);
    assert_eq!(p.makespan, 6.0);
    assert_eq!(p.critical_path, ["long", "tail"]);
    // Equal priority: item order decides.
    let p = plan(&items(&["b", "a"]), &s, &no_overrides()).unwrap();
    assert_eq!(task(&p, "b/long").start, 0.0);
    assert_eq!(task(&p, "a/long").start, 1.0);
}

#[test]
fn fan_out_copies_share_capacity_and_block_dependents() {
    let s = spec(
        r#"
        name = "fan"
        capacities = { d = 2, m = 1 }
        [[stages]]
        name = "discover"
        agent = "d"
        fan_out = 3
        expected_duration = 2.0
        [[stages]]
        name = "merge"
        agent = "m"
        depends_on = ["discover"]
        expected_duration = 1.0
    "#,
    );
    let p = plan(&items(&["q"]), &s, &no_overrides()).unwrap();
    let ids: Vec<&str> = p.tasks.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(
        ids,
        ["q/discover#0", "q/discover#1", "q/discover#2", "q/merge"]
    );
    assert_eq!(task(&p, "q/discover#2").shard, Some(2));
    assert_eq!(task(&p, "q/discover#2").start, 2.0);
    // merge waits for every copy.
    assert_eq!(task(&p, "q/merge").start, 4.0);
    assert_eq!(p.makespan, 5.0);
    assert_eq!(p.critical_path_length, 3.0);
    assert_eq!(p.critical_path_tasks, ["q/discover#0", "q/merge"]);
    assert_eq!(p.sequential_time, 7.0);
    let b = p.bottleneck.as_ref().unwrap();
    assert_eq!(
        (b.agent_type.as_str(), b.makespan_with_one_more_slot),
        ("d", 3.0)
    );
    assert_feasible(&p, &s);
}

#[test]
fn gate_stage_takes_no_time_and_no_agent() {
    // At t=2 the gate and `side` become ready together. The gate passes at
    // once, so `publish` (remaining 5) competes with `side` (remaining 1) for
    // the single `b` slot at t=2 and wins.
    let s = spec(
        r#"
        name = "gated"
        capacities = { a = 1, b = 1 }
        [[stages]]
        name = "work"
        agent = "a"
        expected_duration = 2.0
        [[stages]]
        name = "approve"
        kind = "gate"
        depends_on = ["work"]
        expected_duration = 30.0
        [[stages]]
        name = "side"
        agent = "b"
        depends_on = ["work"]
        expected_duration = 1.0
        [[stages]]
        name = "publish"
        agent = "b"
        depends_on = ["approve"]
        expected_duration = 5.0
    "#,
    );
    let p = plan(&items(&["x"]), &s, &no_overrides()).unwrap();
    let gate = task(&p, "x/approve");
    assert_eq!(gate.agent_type, None);
    assert_eq!(gate.slot, None);
    assert_eq!((gate.start, gate.end), (2.0, 2.0));
    assert!(gate.on_critical_path);
    assert_eq!(task(&p, "x/publish").start, 2.0);
    assert_eq!(task(&p, "x/side").start, 7.0);
    assert_eq!(p.critical_path, ["work", "approve", "publish"]);
    assert_eq!(p.critical_path_length, 7.0);
    assert_eq!(p.makespan, 8.0);
    assert_eq!(p.sequential_time, 8.0);
    assert!(!p.utilization.contains_key("gate"));
    assert_feasible(&p, &s);
    let chart = gantt::render(&p, 30);
    assert!(chart.contains("x/approve"), "{chart}");
    assert!(chart.contains('◆'), "{chart}");
}

#[test]
fn look_ahead_holds_a_slot_for_an_imminent_critical_task() {
    // `u` becomes ready at t=1 and heads a 10-unit chain; `l` is ready at t=0
    // on the same single-slot agent type and takes 5. Greedy list scheduling
    // starts `l` at once and delays the chain to t=5 (makespan 15). The
    // look-ahead sees `u` arriving within the next completion events and holds
    // the slot (makespan 11).
    let s = spec(
        r#"
        name = "hold"
        capacities = { x = 1, y = 1, z = 1 }
        [[stages]]
        name = "a"
        agent = "y"
        expected_duration = 1.0
        [[stages]]
        name = "u"
        agent = "x"
        depends_on = ["a"]
        expected_duration = 1.0
        [[stages]]
        name = "chain"
        agent = "z"
        depends_on = ["u"]
        expected_duration = 9.0
        [[stages]]
        name = "l"
        agent = "x"
        expected_duration = 5.0
    "#,
    );
    let greedy = plan_with_options(
        &items(&["i"]),
        &s,
        &no_overrides(),
        &PlanOptions {
            lookahead_events: 0,
        },
    )
    .unwrap();
    assert_eq!(task(&greedy, "i/l").start, 0.0);
    assert_eq!(greedy.makespan, 15.0);
    let p = plan(&items(&["i"]), &s, &no_overrides()).unwrap();
    assert_eq!(task(&p, "i/u").start, 1.0);
    assert_eq!(task(&p, "i/l").start, 2.0);
    assert_eq!(p.makespan, 11.0);
    assert_feasible(&p, &s);
}

#[test]
fn look_ahead_does_not_hold_when_running_is_better() {
    // Same shape, but `l` is the long chain: holding would only hurt.
    let s = spec(
        r#"
        name = "nohold"
        capacities = { x = 1, y = 1 }
        [[stages]]
        name = "a"
        agent = "y"
        expected_duration = 1.0
        [[stages]]
        name = "u"
        agent = "x"
        depends_on = ["a"]
        expected_duration = 1.0
        [[stages]]
        name = "l"
        agent = "x"
        expected_duration = 8.0
    "#,
    );
    let p = plan(&items(&["i"]), &s, &no_overrides()).unwrap();
    assert_eq!(task(&p, "i/l").start, 0.0);
    assert_eq!(p.makespan, 9.0);
}

#[test]
fn deep_research_plans() {
    let spec = builtin("deep-research").unwrap();
    let p = plan(&items(&["topic-a", "topic-b"]), &spec, &no_overrides()).unwrap();
    assert_eq!(p.tasks.len(), 2 * 9);
    assert_eq!(
        p.critical_path,
        [
            "discover",
            "consolidate",
            "validate",
            "analyze",
            "synthesize"
        ]
    );
    assert_eq!(p.critical_path_length, 64.0);
    // 10 discovery copies through 5 slots: the second topic's streams wait.
    assert_eq!(task(&p, "topic-b/discover#0").start, 10.0);
    assert_eq!(
        p.bottleneck.as_ref().unwrap().agent_type,
        "research_discovery"
    );
    assert_feasible(&p, &spec);
}

#[test]
fn gantt_for_two_items() {
    let p = stock_plan(&[]);
    let chart = gantt::render(&p, 45);
    println!("{chart}");
    assert!(chart.contains("AAPL/screening"));
    assert!(chart.contains("MSFT/report"));
    assert!(chart.contains("makespan: 9 time units"));
    assert!(chart.contains("critical path: screening → business → financial → valuation → report"));
    assert!(chart.contains("parallelism: 2.22x"));
    assert!(chart.contains("bottleneck: valuation (capacity 1): makespan 9 → 8 with one more slot"));
    // One row per task, grouped by item with a blank line between items.
    let rows: Vec<&str> = chart.lines().filter(|l| l.contains("/")).collect();
    assert_eq!(rows.len(), 14);
    // AAPL valuation occupies bar cells 30..35 of 45 (t = 6..7).
    let row = chart
        .lines()
        .find(|l| l.starts_with("AAPL/valuation"))
        .unwrap();
    let bar: Vec<char> = row.split('|').nth(1).unwrap().chars().collect();
    assert_eq!(bar.len(), 45);
    assert!(bar[30..35].iter().all(|&c| c == '█'), "{row}");
    assert!(bar[..30].iter().all(|&c| c == ' '), "{row}");
}

#[test]
fn gantt_truncates_large_plans() {
    let spec = builtin("stock-analysis").unwrap();
    let many: Vec<String> = (0..100).map(|i| format!("s{i}")).collect();
    let p = plan(&many, &spec, &no_overrides()).unwrap();
    let chart = gantt::render_with(&p, 60, 20);
    assert!(chart.contains("… 680 more tasks"), "{chart}");
    assert_eq!(chart.lines().filter(|l| l.starts_with('s')).count(), 20);
}

#[test]
fn many_items_respect_capacity_and_valuation_is_the_bottleneck() {
    let spec = builtin("stock-analysis").unwrap();
    let many: Vec<String> = (0..40).map(|i| format!("s{i}")).collect();
    let p = plan(&many, &spec, &no_overrides()).unwrap();
    assert_feasible(&p, &spec);
    // 40 valuations through one slot bound the makespan from below.
    assert!(p.makespan >= 6.0 + 40.0 + 1.0 - 1e-9);
    assert_eq!(p.bottleneck.as_ref().unwrap().agent_type, "valuation");
}

/// Timing check for 10 000 items × 6 stages; run with
/// `cargo test --release -p caucus-coordinator --test planner -- --ignored --nocapture`.
#[test]
#[ignore]
fn plan_ten_thousand_items() {
    let spec = builtin("stock-analysis").unwrap();
    let many: Vec<String> = (0..10_000).map(|i| format!("item{i}")).collect();
    let started = std::time::Instant::now();
    let p = plan(&many, &spec, &no_overrides()).unwrap();
    let elapsed = started.elapsed();
    assert_eq!(p.tasks.len(), 60_000);
    assert_eq!(p.bottleneck.as_ref().unwrap().agent_type, "valuation");
    println!(
        "planned {} tasks in {:?}: makespan {}",
        p.tasks.len(),
        elapsed,
        p.makespan
    );
}
