//! `caucus-correlator`: correlates agent failures
//!
//! A thin main: flags → layered config → telemetry → the shared service
//! scaffolding, which runs [`caucus_correlator::service::run`].

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
    let (config, _telemetry) = match service::boot(BIN, &args.common) {
        Ok(booted) => booted,
        Err(code) => return code,
    };
    service::exit_code(BIN, serve(config).await)
}

/// Connects, registers the API, and runs the correlator until shutdown.
async fn serve(config: caucus_shared::Config) -> Result<service::Exit, caucus_shared::Error> {
    let mut svc = service::Service::start(SERVICE, config).await?;
    let ctx = svc.context().clone();
    let store = correlator::open_store(&ctx.js, &ctx.subjects, &ctx.config)
        .await
        .map_err(caucus_shared::Error::nats)?;
    correlator::routes(&mut svc, store);
    svc.run(correlator::run).await
}
