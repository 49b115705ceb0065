//! `caucus-facilitator`: runs debates between agents.
//!
//! A thin main: [`service::run_main`] parses the common flags, loads the
//! layered config, starts telemetry and the service, and hands it to
//! [`caucus_facilitator::service::serve`].

use std::process::ExitCode;

use caucus_shared::config::CommonArgs;
use caucus_shared::service;
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
    service::run_main(
        BIN,
        SERVICE,
        &args.common,
        caucus_facilitator::service::serve,
    )
    .await
}
