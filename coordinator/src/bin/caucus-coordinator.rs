//! `caucus-coordinator`: plans pipelines and dispatches tasks
//!
//! A thin main: flags → layered config → telemetry → the shared service
//! scaffolding, which runs [`run_coordinator`].

use std::process::ExitCode;

use caucus_shared::config::CommonArgs;
use caucus_shared::service::{self, ServiceContext};
use caucus_shared::telemetry;
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
    let config = match args.common.load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{BIN}: {e}");
            return ExitCode::from(2);
        }
    };
    if args.common.dump_config {
        print!("{}", config.to_toml());
        return ExitCode::SUCCESS;
    }
    let _telemetry = match telemetry::init(&config.telemetry, BIN) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("{BIN}: {e}");
            return ExitCode::from(2);
        }
    };
    service::exit_code(
        BIN,
        service::run_service(SERVICE, config, run_coordinator).await,
    )
}

/// The coordinator's work, run once the process is connected and ready.
/// Placeholder until `caucus_coordinator::run(ctx)` exists: it holds the
/// process up (answering `health`) until shutdown.
async fn run_coordinator(ctx: ServiceContext) -> Result<(), std::convert::Infallible> {
    ctx.shutdown.cancelled().await;
    Ok(())
}
