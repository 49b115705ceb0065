//! `caucus-facilitator`: runs debates between agents.
//!
//! A thin main: flags → layered config → telemetry →
//! [`caucus_facilitator::service::serve`].

use std::process::ExitCode;

use caucus_shared::config::CommonArgs;
use caucus_shared::service;
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
        caucus_facilitator::service::serve(SERVICE, config).await,
    )
}
