//! `caucus-worker`: runs tasks of one or more agent types.
//!
//! A thin main: flags → layered config → telemetry → the shared service
//! scaffolding, which runs [`run_worker`]. The worker flags are applied as
//! the top config layer, so they win over file and environment.

use std::process::ExitCode;

use caucus_shared::config::CommonArgs;
use caucus_shared::service::{self, ServiceContext};
use caucus_shared::telemetry;
use clap::Parser;

const BIN: &str = "caucus-worker";
/// Name in API subjects: `caucus.api.worker.<operation>`.
const SERVICE: &str = "worker";

#[derive(Debug, Parser)]
#[command(name = BIN, version, about = "runs tasks of one or more agent types")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Agent types to run, comma separated (`worker.agents`).
    #[arg(long = "agent", value_name = "TYPE[,TYPE…]", value_delimiter = ',')]
    agents: Vec<String>,
    /// Concurrent task slots per agent type (`worker.slots`).
    #[arg(long, value_name = "N")]
    slots: Option<u32>,
    /// `builtin`, `exec:CMD` or `http:URL` (`worker.handler`).
    #[arg(long, value_name = "HANDLER", value_parser = parse_handler)]
    handler: Option<String>,
}

impl Args {
    /// Folds the worker flags into the common `--set` layer.
    fn into_common(self) -> CommonArgs {
        let mut common = self.common;
        let agents: Vec<&str> = self
            .agents
            .iter()
            .map(|a| a.trim())
            .filter(|a| !a.is_empty())
            .collect();
        if !agents.is_empty() {
            common
                .set
                .push(format!("worker.agents={}", agents.join(",")));
        }
        if let Some(n) = self.slots {
            common.set.push(format!("worker.slots={n}"));
        }
        if let Some(h) = self.handler {
            common.set.push(format!("worker.handler={h}"));
        }
        common
    }
}

fn parse_handler(raw: &str) -> Result<String, String> {
    let ok = raw == "builtin"
        || raw
            .strip_prefix("exec:")
            .is_some_and(|c| !c.trim().is_empty())
        || raw
            .strip_prefix("http:")
            .is_some_and(|u| !u.trim().is_empty());
    if ok {
        Ok(raw.to_string())
    } else {
        Err(format!(
            "`{raw}` is not a handler: use builtin, exec:COMMAND or http:URL"
        ))
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let common = Args::parse().into_common();
    let config = match common.load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{BIN}: {e}");
            return ExitCode::from(2);
        }
    };
    if common.dump_config {
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
    service::exit_code(BIN, service::run_service(SERVICE, config, run_worker).await)
}

/// The worker's work, run once the process is connected and ready.
/// Placeholder until `caucus_worker::run(ctx)` exists: it holds the process
/// up (answering `health`) until shutdown.
async fn run_worker(ctx: ServiceContext) -> Result<(), std::convert::Infallible> {
    ctx.shutdown.cancelled().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_flags_become_config() {
        let args = Args::try_parse_from([
            BIN,
            "--agent",
            "valuation, report",
            "--slots",
            "3",
            "--handler",
            "exec:./run.sh",
        ])
        .unwrap();
        let cfg = args.into_common().load().unwrap();
        assert_eq!(cfg.worker.agents, vec!["valuation", "report"]);
        assert_eq!(cfg.worker.slots, 3);
        assert_eq!(cfg.worker.handler, "exec:./run.sh");
    }

    #[test]
    fn bad_handler_is_rejected_with_the_forms() {
        let e = Args::try_parse_from([BIN, "--handler", "python"]).unwrap_err();
        assert!(
            e.to_string().contains("builtin, exec:COMMAND or http:URL"),
            "{e}"
        );
        assert!(Args::try_parse_from([BIN, "--handler", "exec:"]).is_err());
    }
}
