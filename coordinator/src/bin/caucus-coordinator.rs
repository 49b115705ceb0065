//! `caucus-coordinator`: plans pipelines and dispatches tasks
//!
//! A thin main: flags → layered config → telemetry → the shared service
//! scaffolding, which runs [`run_coordinator`].

use std::process::ExitCode;

use caucus_coordinator::runtime::{self, SharedScheduler};
use caucus_shared::config::CommonArgs;
use caucus_shared::service::{self, ServiceContext};
use clap::Parser;

const BIN: &str = "caucus-coordinator";
/// Name in API subjects: `caucus.api.coordinator.<operation>`.
const SERVICE: &str = "coordinator";

#[derive(Debug, Parser)]
#[command(name = BIN, version, about = "plans pipelines and dispatches tasks")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let (config, _telemetry) = match service::boot(BIN, &args.common) {
        Ok(booted) => booted,
        Err(code) => return code,
    };
    let mut svc = match service::Service::start(SERVICE, config).await {
        Ok(s) => s,
        Err(e) => return service::exit_code(BIN, Err(e)),
    };
    let slot = SharedScheduler::default();
    runtime::routes(&mut svc, slot.clone());
    service::exit_code(BIN, svc.run(move |ctx| run_coordinator(ctx, slot)).await)
}

/// The coordinator's work: lead (or stand by) until shutdown.
async fn run_coordinator(
    ctx: ServiceContext,
    slot: SharedScheduler,
) -> Result<(), runtime::CoordinatorError> {
    runtime::run(runtime::deps_from(&ctx), slot).await
}
