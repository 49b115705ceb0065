//! The debate story of a demo batch: what happened to each margin debate,
//! the expert's level-3 decisions, and which of the announced steps took
//! place.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use caucus_shared::api::facilitator::{
    DebateSummary, Debates, DebatesRequest, Decide, DecideRequest, ExpertLoadReply, Side,
};

use super::reviewer::{confirmed_items, Reviewed};
use crate::Client;

/// The steps `caucus demo` announces for each batch, in order.
pub const STEPS: &[Step] = &[
    Step::AgentsResolved,
    Step::ToExpert,
    Step::Deferred,
    Step::Package,
    Step::Confirmed,
    Step::ExpertDecided,
];

/// One announced step of the debate story.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A debate resolved at level 1 by the two agents.
    AgentsResolved,
    /// A debate routed to a human expert (level 3).
    ToExpert,
    /// A debate deferred to the gate with the conservative margin (level 4).
    Deferred,
    /// A gate's decision package shown because it needed a person.
    Package,
    /// The reviewer confirmed a provisional decision at a gate.
    Confirmed,
    /// The expert decided the level-3 debates.
    ExpertDecided,
}

impl Step {
    /// What the step is, as the demo announces it.
    pub fn describe(self) -> &'static str {
        match self {
            Step::AgentsResolved => "a debate resolved by the two agents (level 1)",
            Step::ToExpert => "a debate routed to the expert (level 3)",
            Step::Deferred => {
                "a debate deferred to the gate with the conservative margin (level 4, provisional)"
            }
            Step::Package => "a gate's decision package with provisional decisions",
            Step::Confirmed => "the reviewer confirming a provisional decision at the gate",
            Step::ExpertDecided => "the expert deciding the level-3 debates",
        }
    }
}

/// A margin debate of the batch, as the facilitator lists it.
#[derive(Debug, Clone)]
pub struct Debate {
    /// The debate id.
    pub id: String,
    /// The workflow's item.
    pub item: String,
    /// Level reached.
    pub level: u64,
    /// State.
    pub state: String,
    /// The resolution's label, if resolved or provisional.
    pub resolution: Option<String>,
    /// The expert holding it, at level 3.
    pub expert: Option<String>,
}

impl Debate {
    fn of(d: &DebateSummary, item: &str) -> Debate {
        Debate {
            id: d.debate_id.clone(),
            item: item.to_string(),
            level: u64::from(d.level),
            state: d.state.as_str().to_string(),
            resolution: d.resolution.clone(),
            expert: d.expert.clone(),
        }
    }

    /// How it ended up, for people.
    pub fn outcome(&self) -> String {
        match (self.level, self.state.as_str()) {
            (1, "resolved") => "resolved by the agents (level 1)".into(),
            (3, "awaiting_human") => format!(
                "with the expert {} (level 3)",
                self.expert.as_deref().unwrap_or("?")
            ),
            (_, "provisional") => "deferred to the gate: conservative margin (level 4)".into(),
            (5, "resolved") => "deferred to the gate, confirmed by the reviewer (level 5)".into(),
            (l, s) => format!(
                "level {l}, {s}{}",
                self.resolution
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
        }
    }

    /// Whether it went to the gate as a provisional decision (level 4, or
    /// reviewed there at level 5).
    pub fn deferred(&self) -> bool {
        self.level >= 4
    }
}

/// The margin debates of `workflows` (id → item), once none is at level 1
/// or 2 any more (the gates wait for that, so it is at once after a
/// batch; the deadline guards against a stalled facilitator).
pub async fn settled_debates(
    client: &Client,
    workflows: &BTreeMap<String, String>,
) -> anyhow::Result<Vec<Debate>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut out = Vec::new();
        for (wf, item) in workflows {
            let request = DebatesRequest {
                workflow_id: Some(wf.clone()),
                ..DebatesRequest::default()
            };
            let r = client.op_ok::<Debates>(&request).await?;
            out.extend(r.debates.iter().map(|d| Debate::of(d, item)));
        }
        if out.iter().all(|d| d.level >= 3 || d.state == "resolved") {
            out.sort_by(|a, b| (a.level, &a.item).cmp(&(b.level, &b.item)));
            return Ok(out);
        }
        if Instant::now() > deadline {
            anyhow::bail!("debates of the batch still at level 1 or 2 after 60 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Prints the debates of the batch and what the reviewer did.
pub fn print(debates: &[Debate], reviewed: &Reviewed, load: &ExpertLoadReply) {
    if debates.is_empty() {
        println!("\nno debates in this batch");
        return;
    }
    println!(
        "\n{} debate(s) between the financial and strategy analysts on the operating margin:",
        debates.len()
    );
    let width = debates.iter().map(|d| d.item.len()).max().unwrap_or(4);
    for d in debates {
        println!("  {:<width$}  {}", d.item, d.outcome());
    }
    println!("  expert load: {}", expert_load(load));
    if let Some(p) = &reviewed.first_package {
        println!("\nThe first gate that needed a person (decision package):\n");
        for line in p.lines() {
            println!("  {line}");
        }
    }
    if !reviewed.confirmed.is_empty() {
        println!(
            "\nthe demo reviewer confirmed {} provisional decision(s) at the gates: {}",
            reviewed.confirmed.len(),
            confirmed_items(reviewed).join(", ")
        );
    }
}

/// `alice 3/3, bob 0/3` from `facilitator.expert_load`.
pub fn expert_load(load: &ExpertLoadReply) -> String {
    let parts: Vec<String> = load.iter().map(|(e, l)| format!("{e} {l}")).collect();
    if parts.is_empty() {
        "no experts configured".into()
    } else {
        parts.join(", ")
    }
}

/// The expert's decisions: every debate of the batch waiting at level 3
/// is decided for the challenger (the strategy analyst, whose reading of
/// the margin trend the evidence rule favoured when it rejected the
/// financial analyst's figure). Frees the expert's slots for the next
/// batch. Returns the items decided.
pub async fn expert_decides(client: &Client, debates: &[Debate]) -> anyhow::Result<Vec<String>> {
    let mut decided = Vec::new();
    for d in debates.iter().filter(|d| d.state == "awaiting_human") {
        let expert = d.expert.clone().unwrap_or_else(|| "expert".into());
        let request = DecideRequest {
            debate_id: d.id.clone(),
            expert,
            side: Some(Side::Challenger),
            position: None,
            rationale: "demo: the margin trend is holding (strategy's reading)".into(),
            unavailable: false,
        };
        client
            .op_ok::<Decide>(&request)
            .await
            .map_err(|e| anyhow::anyhow!("the expert's decision on {}: {e}", d.id))?;
        decided.push(d.item.clone());
    }
    Ok(decided)
}

/// Which announced steps did not happen.
pub fn missing(debates: &[Debate], reviewed: &Reviewed, decided: &[String]) -> Vec<Step> {
    STEPS
        .iter()
        .copied()
        .filter(|s| match s {
            Step::AgentsResolved => !debates
                .iter()
                .any(|d| d.level == 1 && d.state == "resolved"),
            Step::ToExpert => !debates.iter().any(|d| d.level == 3),
            Step::Deferred => !debates.iter().any(Debate::deferred),
            Step::Package => reviewed.first_package.is_none(),
            Step::Confirmed => reviewed.confirmed.is_empty(),
            Step::ExpertDecided => decided.is_empty(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn debate(item: &str, level: u64, state: &str) -> Debate {
        Debate {
            id: format!("margin-{item}"),
            item: item.into(),
            level,
            state: state.into(),
            resolution: None,
            expert: Some("alice".into()),
        }
    }

    #[test]
    fn a_full_story_misses_nothing() {
        let debates = vec![
            debate("NVDA", 1, "resolved"),
            debate("AMZN", 3, "awaiting_human"),
            debate("AMD", 5, "resolved"),
        ];
        let reviewed = Reviewed {
            confirmed: vec!["AMD margin-AMD".into()],
            first_package: Some("package".into()),
        };
        assert!(missing(&debates, &reviewed, &["AMZN".into()]).is_empty());
    }

    #[test]
    fn a_batch_whose_gates_needed_nobody_misses_the_gate_steps() {
        let debates = vec![
            debate("NVDA", 1, "resolved"),
            debate("AMZN", 3, "awaiting_human"),
        ];
        let got = missing(&debates, &Reviewed::default(), &["AMZN".into()]);
        assert_eq!(got, [Step::Deferred, Step::Package, Step::Confirmed]);
    }

    #[test]
    fn outcomes_read_for_people() {
        assert_eq!(
            debate("AMZN", 3, "awaiting_human").outcome(),
            "with the expert alice (level 3)"
        );
        assert!(debate("AMD", 4, "provisional").deferred());
        assert!(!debate("NVDA", 1, "resolved").deferred());
    }

    #[test]
    fn expert_load_is_one_line() {
        let load = ExpertLoadReply::from([
            ("alice".to_string(), "3/3".to_string()),
            ("bob".to_string(), "0/3".to_string()),
        ]);
        assert_eq!(expert_load(&load), "alice 3/3, bob 0/3");
        assert_eq!(
            expert_load(&ExpertLoadReply::new()),
            "no experts configured"
        );
    }
}
