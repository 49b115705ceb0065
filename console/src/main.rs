//! `caucus-console`: the web console. A thin main over the library.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;

use caucus_console::AppState;
use caucus_shared::api::ApiClient;
use caucus_shared::config::CommonArgs;
use caucus_shared::subjects::Subjects;

const BIN: &str = "caucus-console";

#[derive(Debug, Parser)]
#[command(name = BIN, version, about = "the web console: workflows, gates, debates, alerts")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let (config, _telemetry) = match caucus_shared::service::boot(BIN, &args.common) {
        Ok(b) => b,
        Err(code) => return code,
    };
    match run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{BIN}: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(config: caucus_shared::Config) -> anyhow::Result<()> {
    let nats = caucus_shared::nats::connect(&config.nats, "caucus-console").await?;
    let api = ApiClient::new(
        nats,
        Subjects::new(config.subject_prefix.clone()),
        config.nats.request_timeout,
    );
    let listen = config.console.listen.clone();
    let state = AppState {
        api,
        config: Arc::new(config),
    };
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    tracing::info!(addr = %listener.local_addr()?, "console listening");
    axum::serve(listener, caucus_console::router(state))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
