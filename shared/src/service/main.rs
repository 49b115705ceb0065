//! The one shape of every caucus binary's `main`: common flags → layered
//! config (`--dump-config` prints it and exits) → telemetry → connect →
//! the service's own set-up and body → exit code → telemetry flushed.
//!
//! ```text
//! #[tokio::main]
//! async fn main() -> ExitCode {
//!     let args = Args::parse();
//!     service::run_main(BIN, SERVICE, &args.common, |svc| svc.run(body)).await
//! }
//! ```

use std::fmt::Display;
use std::future::Future;
use std::process::ExitCode;

use super::{Exit, Service};
use crate::config::CommonArgs;
use crate::telemetry::TelemetryGuard;
use crate::Config;

/// Exit code of a configuration or telemetry error at start-up.
pub const CONFIG_EXIT_CODE: u8 = 2;

/// Runs a service binary from its parsed common flags: [`boot`], then
/// [`Service::start`] as `service`, then `build` (register routes, then
/// [`Service::run`] the body). Exit codes: 0 after a clean drain or
/// `--dump-config`, 2 for a configuration or telemetry error, 1 when the
/// service cannot start, fails or outlives its shutdown grace, 130 after a
/// second signal. Errors are printed as one line `<bin>: <error>`. The
/// telemetry guard is dropped (flushing traces) before returning.
pub async fn run_main<B, Fut, E>(
    bin: &str,
    service: &str,
    common: &CommonArgs,
    build: B,
) -> ExitCode
where
    B: FnOnce(Service) -> Fut,
    Fut: Future<Output = Result<Exit, E>>,
    E: Display,
{
    let (config, telemetry) = match boot(bin, common) {
        Ok(booted) => booted,
        Err(code) => return code,
    };
    let code = match Service::start(service, config).await {
        Ok(svc) => exit_code(bin, build(svc).await),
        Err(e) => exit_code(bin, Err(e)),
    };
    drop(telemetry);
    code
}

/// The start of every main: layered config from `common`, `--dump-config`,
/// then telemetry. `Err` carries the exit code to return at once: 0 after
/// `--dump-config`, 2 ([`CONFIG_EXIT_CODE`]) for a configuration or
/// telemetry error (printed as one line naming `bin`). Call inside the
/// tokio runtime.
pub fn boot(bin: &str, common: &CommonArgs) -> Result<(Config, TelemetryGuard), ExitCode> {
    let config = common.load().map_err(|e| {
        eprintln!("{bin}: {e}");
        ExitCode::from(CONFIG_EXIT_CODE)
    })?;
    if common.dump_config {
        print!("{}", config.to_toml());
        return Err(ExitCode::SUCCESS);
    }
    let guard = crate::telemetry::init(&config.telemetry, bin).map_err(|e| {
        eprintln!("{bin}: {e}");
        ExitCode::from(CONFIG_EXIT_CODE)
    })?;
    Ok((config, guard))
}

/// Turns the outcome into the process exit code, printing an error as one
/// line `<bin>: <error>` on stderr.
pub fn exit_code<E: Display>(bin: &str, result: Result<Exit, E>) -> ExitCode {
    let code = match result {
        Ok(exit) => exit.code(),
        Err(e) => {
            eprintln!("{bin}: {e}");
            1
        }
    };
    ExitCode::from(code as u8)
}
