//! `caucus-correlator`: correlates agent failures
//!
//! A thin main: [`service::run_main`] parses the common flags, loads the
//! layered config, starts telemetry and the service, and hands it to
//! [`caucus_correlator::service::serve`].

use std::process::ExitCode;

use caucus_correlator::service as correlator;
use caucus_shared::config::CommonArgs;
use caucus_shared::service;
use clap::Parser;

const BIN: &str = "caucus-correlator";
/// Name in API subjects: `caucus.api.correlator.<operation>`.
const SERVICE: &str = "correlator";

#[derive(Debug, Parser)]
#[command(name = BIN, version, about = "correlates agent failures")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    service::run_main(BIN, SERVICE, &args.common, correlator::serve).await
}
