//! `caucus gate …`: human gates from the terminal: list the open ones, show
//! a decision package, approve / reject / send back, and review a
//! provisional decision (confirm / override / re-debate).

use serde_json::json;

use caucus_shared::api::coordinator::gates::{
    Gate, GateAction, GateDecide, GateDecideRequest, GateRequest, GateReview, GateReviewRequest,
    Gates, GatesRequest,
};
use caucus_shared::api::facilitator::{DebateRequest, GetDebate, Side};
use caucus_shared::api::Operation;
use caucus_shared::messages::Position;

use super::Client;

mod findings;
mod render;
mod review;

pub use render::{render_decision, render_decision_package, render_list, render_package};
pub use review::render_review;

/// `caucus gate` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum GateCommand {
    /// Open gates, oldest first.
    List {
        /// Only gates of this item.
        #[arg(long)]
        item: Option<String>,
        /// Gates per page (default 200, at most 1,000).
        #[arg(long)]
        limit: Option<usize>,
        /// Where the page starts: the cursor the previous page printed.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// The decision package of a workflow's open gate.
    Show {
        /// Workflow id, or an item with exactly one open gate.
        target: String,
        /// The gate, when several are open.
        #[arg(long)]
        gate: Option<String>,
    },
    /// Approve: the work stands and dependents run.
    Approve(DecideArgs),
    /// Reject: the workflow fails with your rationale.
    Reject(DecideArgs),
    /// Send back: run upstream stages again; the gate reopens after them.
    SendBack {
        #[command(flatten)]
        args: DecideArgs,
        /// Stages to run again (default: the gate's dependencies).
        #[arg(long = "to", value_delimiter = ',')]
        to: Vec<String>,
    },
    /// Review a provisional decision of the workflow (level 5).
    Review {
        /// Workflow id, or an item with exactly one open gate.
        target: String,
        /// The debate.
        debate_id: String,
        /// confirm, override or redebate.
        action: String,
        /// Who reviews (default: $USER).
        #[arg(long)]
        reviewer: Option<String>,
        /// Override: the side whose position applies (challenger or challenged).
        #[arg(long)]
        side: Option<String>,
        /// Override: your own value (e.g. 0.28 or "28%").
        #[arg(long)]
        value: Option<String>,
        /// Override with --value: the metric (default: the debate's).
        #[arg(long)]
        metric: Option<String>,
        /// Why (required to override).
        #[arg(long, default_value = "")]
        rationale: String,
        /// Re-debate: the context the new debate should weigh.
        #[arg(long)]
        context: Option<String>,
    },
}

/// Flags shared by approve / reject / send-back.
#[derive(Debug, Clone, clap::Args)]
pub struct DecideArgs {
    /// Workflow id, or an item with exactly one open gate.
    pub target: String,
    /// Who decides (default: $USER).
    #[arg(long)]
    pub reviewer: Option<String>,
    /// Why (required to reject or send back).
    #[arg(long, default_value = "")]
    pub rationale: String,
    /// The gate, when several are open.
    #[arg(long)]
    pub gate: Option<String>,
}

fn reviewer(r: Option<String>) -> String {
    r.or_else(|| std::env::var("USER").ok())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "cli".into())
}

/// A workflow id, or the workflow of the only open gate of an item.
async fn resolve(client: &Client, target: &str) -> anyhow::Result<String> {
    let list = client
        .op_ok::<Gates>(&GatesRequest {
            item: Some(target.to_string()),
            ..Default::default()
        })
        .await?;
    match list.gates.as_slice() {
        [one] => Ok(one.workflow_id.clone()),
        [] => Ok(target.to_string()),
        many => anyhow::bail!(
            "item {target} has {} open gates; name the workflow: {}",
            many.len(),
            many.iter()
                .map(|g| g.workflow_id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Calls `O`. With `--json` it prints the reply as it came (a newer
/// coordinator's fields included) and returns `None`; else the reply, typed.
async fn ask<O: Operation>(
    client: &Client,
    request: &O::Request,
    as_json: bool,
) -> anyhow::Result<Option<O::Reply>> {
    if !as_json {
        return Ok(Some(client.op_ok::<O>(request).await?));
    }
    let body = serde_json::to_value(request)?;
    let reply = client.call_ok(O::SERVICE, O::NAME, body).await?;
    println!("{}", serde_json::to_string_pretty(&reply)?);
    Ok(None)
}

/// Runs a `caucus gate` subcommand.
pub async fn run(client: &Client, cmd: GateCommand, as_json: bool) -> anyhow::Result<i32> {
    let text = match cmd {
        GateCommand::List {
            item,
            limit,
            cursor,
        } => {
            let req = GatesRequest {
                workflow_id: None,
                item,
                limit,
                cursor,
            };
            ask::<Gates>(client, &req, as_json)
                .await?
                .map(|r| render_list(&r))
        }
        GateCommand::Show { target, gate } => {
            let workflow_id = resolve(client, &target).await?;
            let req = GateRequest { workflow_id, gate };
            ask::<Gate>(client, &req, as_json)
                .await?
                .map(|p| render_decision_package(&p))
        }
        GateCommand::Approve(a) => {
            decide(client, GateAction::Approve, a, Vec::new(), as_json).await?
        }
        GateCommand::Reject(a) => {
            decide(client, GateAction::Reject, a, Vec::new(), as_json).await?
        }
        GateCommand::SendBack { args, to } => {
            decide(client, GateAction::SendBack, args, to, as_json).await?
        }
        GateCommand::Review {
            target,
            debate_id,
            action,
            reviewer: who,
            side,
            value,
            metric,
            rationale,
            context,
        } => {
            let workflow_id = resolve(client, &target).await?;
            let position = match value {
                Some(v) => Some(own_position(client, &debate_id, metric, &v).await?),
                None => None,
            };
            let side = side
                .map(|s| s.parse::<Side>())
                .transpose()
                .map_err(|e| anyhow::anyhow!("--side: {e}"))?;
            let req = GateReviewRequest {
                workflow_id,
                debate_id,
                action,
                reviewer: Some(reviewer(who)),
                side,
                position,
                rationale: Some(rationale).filter(|r| !r.is_empty()),
                context,
                analyses: None,
                dry_run: false,
            };
            ask::<GateReview>(client, &req, as_json)
                .await?
                .map(|r| render_review(&r))
        }
    };
    if let Some(text) = text {
        print!("{text}");
    }
    Ok(0)
}

/// A reviewer's own value as an override position: `{statement, metric,
/// value}`, the metric the debate's unless named.
async fn own_position(
    client: &Client,
    debate_id: &str,
    metric: Option<String>,
    v: &str,
) -> anyhow::Result<Position> {
    let parsed = caucus_shared::messages::assumption_value(&json!(v))
        .ok_or_else(|| anyhow::anyhow!("--value {v}: not a number like 0.28 or 28%"))?;
    let metric = match metric {
        Some(m) => m,
        None => debate_metric(client, debate_id).await?,
    };
    Ok(Position {
        statement: format!("{metric} {v} (set at gate review)"),
        metric: Some(metric),
        value: Some(json!(parsed)),
        confidence: None,
        evidence: Vec::new(),
    })
}

async fn decide(
    client: &Client,
    action: GateAction,
    a: DecideArgs,
    send_back_to: Vec<String>,
    as_json: bool,
) -> anyhow::Result<Option<String>> {
    let workflow_id = resolve(client, &a.target).await?;
    let req = GateDecideRequest {
        workflow_id,
        gate: a.gate,
        action,
        reviewer: reviewer(a.reviewer),
        rationale: a.rationale,
        send_back_to,
    };
    Ok(ask::<GateDecide>(client, &req, as_json)
        .await?
        .map(|r| render_decision(&r)))
}

/// The metric a debate is about, as the facilitator states it by the one
/// shared rule (`caucus_shared::messages::debate_metric`).
async fn debate_metric(client: &Client, debate_id: &str) -> anyhow::Result<String> {
    let d = client
        .op_ok::<GetDebate>(&DebateRequest {
            debate_id: debate_id.to_string(),
        })
        .await?;
    d.metric
        .ok_or_else(|| anyhow::anyhow!("debate {debate_id} names no metric; pass --metric"))
}
