//! `caucus-coordinator`: plans pipelines and dispatches tasks
//!
//! A thin main: [`service::run_main`] parses the common flags, loads the
//! layered config, starts telemetry and the service, registers the
//! coordinator's routes and runs [`run_coordinator`].

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
    service::run_main(BIN, SERVICE, &args.common, |mut svc| async move {
        let slot = SharedScheduler::default();
        let router = runtime::routes(&mut svc, slot.clone());
        // `GET /scaling/<agent_type>` for autoscalers, and the operation a
        // standby asks the leader with.
        runtime::scaling::route(&mut svc, router.clone());
        let scaling = runtime::scaling::http(svc.context(), router);
        svc.http_routes(scaling);
        svc.run(move |ctx| run_coordinator(ctx, slot)).await
    })
    .await
}

/// The coordinator's work: lead (or stand by) until shutdown.
async fn run_coordinator(
    ctx: ServiceContext,
    slot: SharedScheduler,
) -> Result<(), runtime::CoordinatorError> {
    runtime::run(runtime::deps_from(&ctx), slot).await
}
