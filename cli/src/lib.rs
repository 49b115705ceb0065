//! The `caucus` command-line client: talks to the services over the control
//! API (`caucus.api.<service>.<operation>`), so it needs only NATS.

mod audit;
mod auth;
mod broadcast;
mod client;
mod console;
mod credentials;
mod debates;
mod demo;
mod gate;
mod init;
mod level_review;
mod pause;
mod plan;
mod render;
mod run;
mod stack;
mod submit;
mod workers;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use caucus_shared::config::CommonArgs;

pub use client::Client;
pub use credentials::role_env;
pub use stack::load_stack_env;

/// caucus: coordinate teams of analysis agents over NATS JetStream.
#[derive(Debug, Parser)]
#[command(name = "caucus", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// A pipeline given by name or by file.
#[derive(Debug, Clone, clap::Args)]
pub struct PipelineArg {
    /// Built-in pipeline name.
    #[arg(long, short = 'p', default_value = "stock-analysis")]
    pub pipeline: String,
    /// A pipeline spec file (TOML or JSON) instead of a built-in name.
    #[arg(long = "file", short = 'f')]
    pub file: Option<PathBuf>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Dry-run schedule: makespan, critical path, bottleneck, Gantt chart.
    Plan {
        /// Items (tickers).
        #[arg(required = true)]
        items: Vec<String>,
        #[command(flatten)]
        pipeline: PipelineArg,
        /// Capacity override, e.g. `--capacity valuation=2` (repeatable).
        #[arg(long = "capacity", value_name = "AGENT=N")]
        capacities: Vec<String>,
    },
    /// Submit items to a pipeline.
    Submit {
        /// Items (tickers).
        #[arg(required_unless_present = "items_file")]
        items: Vec<String>,
        /// More items, one per line (`-`: stdin).
        #[arg(long, value_name = "FILE")]
        items_file: Option<PathBuf>,
        /// Retrying with the same key returns the same workflows and
        /// creates nothing (default: a new key per run, which also makes
        /// the CLI's own retries after a time-out safe).
        #[arg(long, value_name = "KEY")]
        idempotency_key: Option<String>,
        #[command(flatten)]
        pipeline: PipelineArg,
        /// Wall time of one pipeline time unit, in ms.
        #[arg(long)]
        time_unit_ms: Option<u64>,
        /// Follow progress until every workflow finishes; stops with exit
        /// code 4 (and the `caucus gate` commands to run) when every
        /// unfinished workflow waits for a person at a gate.
        #[arg(long, short = 'w')]
        watch: bool,
        /// Human gates approve themselves whenever nothing needs review
        /// (no provisional decision of the workflow awaits review).
        #[arg(long)]
        auto_approve_gates: bool,
    },
    /// A submission's state and workflow ids, page by page (`--all`: every
    /// page).
    Submission {
        /// Submission id (or `--key`).
        #[arg(required_unless_present = "key")]
        submission_id: Option<String>,
        /// The idempotency key it was submitted with.
        #[arg(long, conflicts_with = "submission_id")]
        key: Option<String>,
        /// First workflow (index) to list.
        #[arg(long, default_value_t = 0)]
        cursor: usize,
        /// Ids per page (at most 10,000; default 1,000).
        #[arg(long)]
        limit: Option<usize>,
        /// Every page.
        #[arg(long)]
        all: bool,
    },
    /// Workflow status: the named workflows, or (without ids) one page of
    /// those the coordinator holds.
    Status {
        /// Workflow ids (default: a page of all held by the coordinator).
        ids: Vec<String>,
        /// Only workflows in this state (repeatable).
        #[arg(long)]
        state: Vec<String>,
        /// Include per-task detail.
        #[arg(long)]
        tasks: bool,
        /// Workflows per page without ids (at most 1,000; default 100).
        #[arg(long)]
        limit: Option<usize>,
        /// Where the page starts: the cursor the previous page printed.
        #[arg(long)]
        cursor: Option<String>,
        /// Every page, following cursors.
        #[arg(long)]
        all: bool,
    },
    /// Pause a workflow (by id, or an item's latest workflow).
    Pause {
        /// Workflow id or item.
        target: String,
        /// Why (shown to people).
        #[arg(long)]
        reason: Option<String>,
        /// Pause at once instead of waiting for in-flight tasks (their
        /// results are still recorded).
        #[arg(long)]
        cancel_in_flight: bool,
    },
    /// Resume a paused workflow; `--dry-run` prints the plan only.
    Resume {
        /// Workflow id or item.
        target: String,
        /// Print the resume plan {restart, skip, wait}; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Re-dispatch in-flight tasks instead of waiting for them.
        #[arg(long)]
        restart_in_flight: bool,
        /// Send an alert card when resumed.
        #[arg(long)]
        notify: bool,
    },
    /// Batch pause, resume and status.
    Batch {
        #[command(subcommand)]
        command: pause::BatchCommand,
    },
    /// Registered workers, slots, queue depth and the live bottleneck.
    Workers,
    /// The audit trail of a research run: `timestamp | agent | action | result`.
    Audit {
        /// Workflow id.
        workflow: String,
    },
    /// The report of a finished workflow (by id or item).
    Result {
        /// Workflow id or item.
        target: String,
    },
    /// Exit 0 when SERVICE answers its health check.
    Health {
        /// coordinator, worker, facilitator, correlator or console.
        service: String,
    },
    /// Run a coordination pattern (parallel, pipeline, debate,
    /// hierarchical, consensus, peer_review) over agent workers.
    Run(run::RunArgs),
    /// Human gates: list, show the decision package, approve / reject /
    /// send back, review provisional decisions.
    #[command(subcommand)]
    Gate(gate::GateCommand),
    /// Debates (queue order) and each expert's load, e.g. "alice 2/3".
    Debates(debates::ListArgs),
    /// One debate in full (history, evidence, assessment, resolution).
    Debate {
        /// The debate id.
        debate_id: String,
    },
    /// A level-3 expert decision on a debate.
    Decide(debates::DecideArgs),
    /// Plan, run a batch, scale valuation, and compare.
    Demo {
        /// How many tickers in each batch.
        #[arg(long, default_value_t = 20)]
        tickers: usize,
        /// Wall time of one time unit, in ms.
        #[arg(long, default_value_t = 200)]
        unit_ms: u64,
    },
    /// Publish a macro broadcast (regime change, rate move) to every agent
    /// on `caucus.msg.all`.
    Broadcast(broadcast::BroadcastArgs),
    /// Create or update every stream, bucket and durable consumer the
    /// services bind to (what the coordinator does at start), then exit;
    /// needs the admin NATS user.
    Init(init::InitArgs),
    /// Credentials for every role (docs/SECURITY.md).
    #[command(subcommand)]
    Auth(auth::AuthCommand),
    /// The web console's users (docs/CONSOLE.md).
    #[command(subcommand)]
    Console(console::ConsoleCommand),
    /// Start the local stack (scripts/stack up).
    Up,
    /// Stop the local stack (scripts/stack down).
    Down,
}

/// Runs the CLI; returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    match &cli.command {
        Command::Up => return stack::script("up"),
        Command::Down => return stack::script("down"),
        Command::Auth(cmd) => return auth::run(cmd),
        Command::Console(cmd) => return console::run(&cli.common, cmd),
        Command::Init(args) => return init::run(&cli.common, args, cli.json).await,
        _ => {}
    }
    let config = credentials::load_config(&cli.common)?;
    let client = Client::connect(&config).await?;
    match cli.command {
        Command::Plan {
            items,
            pipeline,
            capacities,
        } => plan::run(&client, items, &pipeline, &capacities, cli.json).await,
        Command::Submit {
            items,
            items_file,
            idempotency_key,
            pipeline,
            time_unit_ms,
            watch,
            auto_approve_gates,
        } => {
            let items = submit::gather_items(items, items_file.as_deref())?;
            submit::run(
                &client,
                items,
                &pipeline,
                submit::Options {
                    time_unit_ms,
                    watch,
                    auto_approve_gates,
                    idempotency_key,
                },
                cli.json,
            )
            .await
        }
        Command::Submission {
            submission_id,
            key,
            cursor,
            limit,
            all,
        } => {
            let target = match (submission_id, key) {
                (_, Some(k)) => submit::SubmissionTarget::Key(k),
                (Some(id), None) => submit::SubmissionTarget::Id(id),
                (None, None) => anyhow::bail!("name a submission id or --key"),
            };
            submit::submission(&client, target, cursor, limit, all, cli.json).await
        }
        Command::Gate(cmd) => gate::run(&client, cmd, cli.json).await,
        Command::Debates(a) => debates::list(&client, a, cli.json).await,
        Command::Debate { debate_id } => debates::show(&client, &debate_id, cli.json).await,
        Command::Decide(a) => debates::decide(&client, a, cli.json).await,
        Command::Status {
            ids,
            state,
            tasks,
            limit,
            cursor,
            all,
        } => {
            let page = submit::StatusPage { limit, cursor, all };
            submit::status(&client, ids, state, tasks, page, cli.json).await
        }
        Command::Pause {
            target,
            reason,
            cancel_in_flight,
        } => pause::pause(&client, &target, reason, cancel_in_flight, cli.json).await,
        Command::Resume {
            target,
            dry_run,
            restart_in_flight,
            notify,
        } => {
            pause::resume(
                &client,
                &target,
                dry_run,
                restart_in_flight,
                notify,
                cli.json,
            )
            .await
        }
        Command::Batch { command } => pause::batch(&client, command, cli.json).await,
        Command::Workers => workers::run(&client, cli.json).await,
        Command::Result { target } => submit::result(&client, &target).await,
        Command::Audit { workflow } => audit::run(&client, &workflow, cli.json).await,
        Command::Health { service } => client.health(&service).await,
        Command::Run(args) => run::run(&client, &args, cli.json).await,
        Command::Demo { tickers, unit_ms } => demo::run(&client, &config, tickers, unit_ms).await,
        Command::Broadcast(args) => {
            let subjects = caucus_shared::subjects::Subjects::new(config.subject_prefix.clone());
            broadcast::run(&client, &subjects, &args, cli.json).await
        }
        Command::Up | Command::Down | Command::Init(_) | Command::Auth(_) | Command::Console(_) => {
            unreachable!("handled above")
        }
    }
}
