//! `caucus-facilitator`: runs debates between agents
//!
//! A thin main: flags → layered config → telemetry → the shared service
//! scaffolding, which runs [`run_facilitator`].

use std::process::ExitCode;

use caucus_shared::config::CommonArgs;
use caucus_shared::service::{self, ServiceContext};
use caucus_shared::telemetry;
use clap::Parser;

const BIN: &str = "caucus-facilitator";
/// Name in API subjects: `caucus.api.facilitator.<operation>`.
const SERVICE: &str = "facilitator";

#[derive(Debug, Parser)]
#[command(name = BIN, version, about = "runs debates between agents")]
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
        service::run_service(SERVICE, config, run_facilitator).await,
    )
}

/// The facilitator's work, run once the process is connected and ready.
/// Placeholder until `caucus_facilitator::run(ctx)` exists: it holds the
/// process up (answering `health`) until shutdown.
async fn run_facilitator(ctx: ServiceContext) -> Result<(), std::convert::Infallible> {
    ctx.shutdown.cancelled().await;
    Ok(())
}
