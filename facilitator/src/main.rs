//! `caucus-facilitator`: runs debates between agents.
//!
//! A thin main: flags → layered config → telemetry →
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
    let (config, _telemetry) = match service::boot(BIN, &args.common) {
        Ok(booted) => booted,
        Err(code) => return code,
    };
    service::exit_code(
        BIN,
        caucus_facilitator::service::serve(SERVICE, config).await,
    )
}
