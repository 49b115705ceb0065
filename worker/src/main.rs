//! `caucus-worker`: runs tasks of one or more agent types.
//!
//! A thin main: [`service::run_main`] parses the common flags, loads the
//! layered config, starts telemetry and the service, and runs
//! [`run_worker`]. The worker flags are applied as
//! the top config layer, so they win over file and environment.

use std::process::ExitCode;

use caucus_shared::config::CommonArgs;
use caucus_shared::service::{self, ServiceContext};
use caucus_worker::builtin;
use caucus_worker::handler::{self, Handler, HandlerSpec, HandlerSpecError};
use caucus_worker::runtime::{self, WorkerError};
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
    /// `builtin`, `noop`, `sleep:MS`, `exec:CMD` or `http:URL` (`worker.handler`).
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

/// `--handler` must name a handler (clap prints the error's forms).
fn parse_handler(raw: &str) -> Result<String, HandlerSpecError> {
    raw.parse::<HandlerSpec>().map(|_| raw.to_string())
}

#[tokio::main]
async fn main() -> ExitCode {
    let common = Args::parse().into_common();
    service::run_main(BIN, SERVICE, &common, |svc| svc.run(run_worker)).await
}

/// The worker's work: register, lease, pull, run, report, until shutdown.
async fn run_worker(ctx: ServiceContext) -> Result<(), WorkerError> {
    let cfg = ctx.config.clone();
    let spec: HandlerSpec = cfg.worker.handler.parse()?;
    let (builtin, dataset) = if spec == HandlerSpec::Builtin {
        let data = builtin::dataset(cfg.worker.data_path.as_deref())?;
        tracing::info!(data_set = %data.origin(), tickers = data.tickers().len(), "built-in analysts loaded");
        let settings = caucus_agents::Settings {
            margin_debate_gap: cfg.worker.margin_debate_gap,
        };
        (
            Some(builtin::analysts_with(data.clone(), settings)),
            Some(data),
        )
    } else {
        (None, None)
    };
    let deps = runtime::WorkerDeps {
        config: cfg.clone(),
        subjects: ctx.subjects.clone(),
        js: ctx.js.clone(),
        redis: ctx.redis.clone(),
        shutdown: ctx.shutdown.clone(),
        clock: ctx.clock.clone(),
        worker_id: ctx.instance_id.clone(),
        handler: Handler::new(spec, builtin)
            .with_config(&cfg)
            .with_http_client(handler::http_client(&cfg.worker)?),
        dataset,
        health: ctx.health.clone(),
        tasks: ctx.tasks.clone(),
    };
    runtime::run(deps).await
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
            e.to_string()
                .contains("builtin, noop, sleep:MS, exec:CMD or http:URL"),
            "{e}"
        );
        assert!(Args::try_parse_from([BIN, "--handler", "exec:"]).is_err());
    }
}
