//! `caucus pause`, `caucus resume` and `caucus batch pause|resume|status`.

use clap::Subcommand;

use caucus_shared::api::coordinator::control::{
    BatchPause, BatchPauseRequest, BatchResume, BatchResumeRequest, BatchStatus, BatchStatusReply,
    BatchStatusRequest, InFlightPolicy, Pause, PauseOutcome, PauseRequest, Resume, ResumeRequest,
};
use caucus_shared::api::Operation;

use super::Client;

/// `caucus batch …`.
#[derive(Debug, Subcommand)]
pub enum BatchCommand {
    /// Pause the latest workflow of each item as one batch.
    Pause {
        /// Items (tickers).
        #[arg(required = true)]
        items: Vec<String>,
        /// Why (shown to people).
        #[arg(long)]
        reason: Option<String>,
        /// Pauses per wave.
        #[arg(long)]
        max_concurrency: Option<u32>,
        /// Batch id (default: new).
        #[arg(long)]
        batch_id: Option<String>,
    },
    /// Resume a batch (or the given items' paused workflows).
    Resume {
        /// The batch.
        #[arg(long = "batch", short = 'b')]
        batch_id: Option<String>,
        /// Items instead of a batch.
        items: Vec<String>,
        /// Workflows resumed and unfinished at once.
        #[arg(long)]
        concurrency_limit: Option<u32>,
        /// Re-dispatch in-flight tasks instead of waiting for them.
        #[arg(long)]
        restart_in_flight: bool,
    },
    /// `{total, paused, resumed, failed}` of a batch.
    Status {
        /// The batch.
        batch_id: String,
    },
}

/// A workflow id (UUID) or an item: `(workflow_id, item)`.
fn target(t: &str) -> (Option<String>, Option<String>) {
    if uuid::Uuid::parse_str(t).is_ok() {
        (Some(t.to_string()), None)
    } else {
        (None, Some(t.to_string()))
    }
}

fn in_flight(restart: bool) -> InFlightPolicy {
    if restart {
        InFlightPolicy::Restart
    } else {
        InFlightPolicy::Wait
    }
}

/// Calls `O` and reads the reply as its type; `--json` prints the reply as
/// it came (fields this CLI does not know included).
async fn call<O: Operation>(
    client: &Client,
    req: &O::Request,
    as_json: bool,
) -> anyhow::Result<Option<O::Reply>> {
    if !as_json {
        return client.op_ok::<O>(req).await.map(Some);
    }
    let raw = client
        .call_ok(O::SERVICE, O::NAME, serde_json::to_value(req)?)
        .await?;
    println!("{}", serde_json::to_string_pretty(&raw)?);
    Ok(None)
}

/// `caucus pause TARGET`.
pub async fn pause(
    client: &Client,
    t: &str,
    reason: Option<String>,
    cancel_in_flight: bool,
    as_json: bool,
) -> anyhow::Result<i32> {
    let (workflow_id, item) = target(t);
    let req = PauseRequest {
        workflow_id,
        item,
        reason,
        trigger_source: Some("human".into()),
        cancel_in_flight,
    };
    if let Some(r) = call::<Pause>(client, &req, as_json).await? {
        println!(
            "{} {}: {} (in flight: {})",
            r.item,
            r.workflow_id,
            outcome(r.outcome),
            r.in_flight.join(", ")
        );
    }
    Ok(0)
}

fn outcome(o: PauseOutcome) -> &'static str {
    match o {
        PauseOutcome::Pausing => "pausing",
        PauseOutcome::Paused => "paused",
        PauseOutcome::AlreadyPaused => "already_paused",
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(", ")
    }
}

/// `caucus resume TARGET [--dry-run]`.
pub async fn resume(
    client: &Client,
    t: &str,
    dry_run: bool,
    restart_in_flight: bool,
    notify: bool,
    as_json: bool,
) -> anyhow::Result<i32> {
    let (workflow_id, item) = target(t);
    let req = ResumeRequest {
        workflow_id,
        item,
        dry_run,
        in_flight: in_flight(restart_in_flight),
        plan: None,
        notify,
    };
    let Some(r) = call::<Resume>(client, &req, as_json).await? else {
        return Ok(0);
    };
    println!(
        "{} {}{}",
        r.item,
        r.workflow_id,
        if dry_run {
            " (dry run: nothing changed)"
        } else {
            ""
        }
    );
    println!("  restart: {}", list(&r.plan.restart));
    println!("  skip:    {}", list(&r.plan.skip));
    println!("  wait:    {}", list(&r.plan.wait));
    if !dry_run {
        println!("  state:   {}", r.state);
    }
    Ok(0)
}

fn print_batch(r: &BatchStatusReply) {
    println!(
        "batch {}  {}  total {}  paused {}  resumed {}  failed {}  skipped {}",
        r.batch_id,
        r.state.as_str(),
        r.total,
        r.paused,
        r.resumed,
        r.failed,
        r.skipped
    );
    if let Some(s) = &r.stop_reason {
        println!("  stopped: {s}");
    }
    for i in &r.items {
        println!(
            "  {:<8} {:<13} {} {}",
            i.item,
            i.state.as_str(),
            i.workflow_id.as_deref().unwrap_or("-"),
            i.error.as_deref().unwrap_or("")
        );
    }
}

/// `caucus batch …`.
pub async fn batch(client: &Client, cmd: BatchCommand, as_json: bool) -> anyhow::Result<i32> {
    let r = match cmd {
        BatchCommand::Pause {
            items,
            reason,
            max_concurrency,
            batch_id,
        } => {
            let req = BatchPauseRequest {
                items,
                reason,
                max_concurrency,
                batch_id,
                ..BatchPauseRequest::default()
            };
            call::<BatchPause>(client, &req, as_json).await?
        }
        BatchCommand::Resume {
            batch_id,
            items,
            concurrency_limit,
            restart_in_flight,
        } => {
            let req = BatchResumeRequest {
                batch_id,
                items,
                concurrency_limit,
                in_flight: in_flight(restart_in_flight),
            };
            call::<BatchResume>(client, &req, as_json).await?
        }
        BatchCommand::Status { batch_id } => {
            call::<BatchStatus>(client, &BatchStatusRequest { batch_id }, as_json).await?
        }
    };
    if let Some(r) = r {
        print_batch(&r);
    }
    Ok(0)
}
