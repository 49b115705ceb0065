//! `caucus-console`: the web console. A thin main over the library
//! ([`caucus_console::server`]).

use std::process::ExitCode;

use clap::Parser;

use caucus_shared::config::CommonArgs;

const BIN: &str = "caucus-console";

#[derive(Debug, Parser)]
#[command(name = BIN, version, about = "the web console: workflows, gates, debates, alerts")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Where to serve HTTP (overrides console.listen /
    /// CAUCUS_CONSOLE_LISTEN; default 127.0.0.1:8080).
    #[arg(long)]
    listen: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let (mut config, telemetry) = match caucus_shared::service::boot(BIN, &args.common) {
        Ok(b) => b,
        Err(code) => return code,
    };
    if let Some(listen) = args.listen {
        config.console.listen = listen;
    }
    let code = match caucus_console::server::run(config).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("{BIN}: {e}");
            ExitCode::from(e.exit_code())
        }
    };
    drop(telemetry);
    code
}
