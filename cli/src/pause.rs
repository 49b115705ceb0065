//! `caucus pause`, `caucus resume` and `caucus batch pause|resume|status`.

use clap::Subcommand;
use serde_json::{json, Value};

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

/// A workflow id (UUID) or an item.
fn target(t: &str) -> Value {
    if uuid::Uuid::parse_str(t).is_ok() {
        json!({"workflow_id": t})
    } else {
        json!({"item": t})
    }
}

fn in_flight(restart: bool) -> &'static str {
    if restart {
        "restart"
    } else {
        "wait"
    }
}

/// `caucus pause TARGET`.
pub async fn pause(
    client: &Client,
    t: &str,
    reason: Option<String>,
    cancel_in_flight: bool,
    as_json: bool,
) -> anyhow::Result<i32> {
    let mut body = target(t);
    body["cancel_in_flight"] = json!(cancel_in_flight);
    body["trigger_source"] = json!("human");
    if let Some(r) = reason {
        body["reason"] = json!(r);
    }
    let r = client.call_ok("coordinator", "pause", body).await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "{} {}: {} (in flight: {})",
            r["item"].as_str().unwrap_or("?"),
            r["workflow_id"].as_str().unwrap_or("?"),
            r["outcome"].as_str().unwrap_or("?"),
            r["in_flight"]
                .as_array()
                .map(|a| a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        );
    }
    Ok(0)
}

fn list(v: &Value) -> String {
    let items: Vec<&str> = v
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
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
    let mut body = target(t);
    body["dry_run"] = json!(dry_run);
    body["in_flight"] = json!(in_flight(restart_in_flight));
    body["notify"] = json!(notify);
    let r = client.call_ok("coordinator", "resume", body).await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(0);
    }
    println!(
        "{} {}{}",
        r["item"].as_str().unwrap_or("?"),
        r["workflow_id"].as_str().unwrap_or("?"),
        if dry_run {
            " (dry run: nothing changed)"
        } else {
            ""
        }
    );
    println!("  restart: {}", list(&r["plan"]["restart"]));
    println!("  skip:    {}", list(&r["plan"]["skip"]));
    println!("  wait:    {}", list(&r["plan"]["wait"]));
    if !dry_run {
        println!("  state:   {}", r["state"].as_str().unwrap_or("?"));
    }
    Ok(0)
}

fn print_batch(r: &Value) {
    println!(
        "batch {}  {}  total {}  paused {}  resumed {}  failed {}  skipped {}",
        r["batch_id"].as_str().unwrap_or("?"),
        r["state"].as_str().unwrap_or("?"),
        r["total"],
        r["paused"],
        r["resumed"],
        r["failed"],
        r["skipped"]
    );
    if let Some(s) = r["stop_reason"].as_str() {
        println!("  stopped: {s}");
    }
    for i in r["items"].as_array().into_iter().flatten() {
        println!(
            "  {:<8} {:<13} {} {}",
            i["item"].as_str().unwrap_or("?"),
            i["state"].as_str().unwrap_or("?"),
            i["workflow_id"].as_str().unwrap_or("-"),
            i["error"].as_str().unwrap_or("")
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
            let mut body = json!({"items": items});
            if let Some(r) = reason {
                body["reason"] = json!(r);
            }
            if let Some(m) = max_concurrency {
                body["max_concurrency"] = json!(m);
            }
            if let Some(b) = batch_id {
                body["batch_id"] = json!(b);
            }
            client.call_ok("coordinator", "batch_pause", body).await?
        }
        BatchCommand::Resume {
            batch_id,
            items,
            concurrency_limit,
            restart_in_flight,
        } => {
            let mut body = json!({"items": items, "in_flight": in_flight(restart_in_flight)});
            if let Some(b) = batch_id {
                body["batch_id"] = json!(b);
            }
            if let Some(c) = concurrency_limit {
                body["concurrency_limit"] = json!(c);
            }
            client.call_ok("coordinator", "batch_resume", body).await?
        }
        BatchCommand::Status { batch_id } => {
            client
                .call_ok("coordinator", "batch_status", json!({"batch_id": batch_id}))
                .await?
        }
    };
    if as_json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print_batch(&r);
    }
    Ok(0)
}
