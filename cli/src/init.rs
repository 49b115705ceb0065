//! `caucus init [--agent-types a,b]`: creates or updates every stream, the
//! facilitator's and correlator's KV buckets and the durable consumers the
//! restricted services bind to (theirs, and `workers-<t>` / `agents-<t>`
//! for each agent type named), then exits. It is what the coordinator does
//! at start, so workers, the facilitator and the correlator can start
//! before any coordinator has run.
//!
//! It needs the `admin` NATS user (only the coordinator and admin may
//! create streams): configured credentials are used as given; with none,
//! the `admin.env` that `caucus auth init` wrote beside the operator's is
//! read (see [`crate::credentials`]), never the operator's, which could not
//! create anything.

use anyhow::Context;
use async_nats::jetstream;

use caucus_shared::config::{CommonArgs, ConfigLoader, NatsConfig};
use caucus_shared::nats::{self, admin};
use caucus_shared::subjects::Subjects;
use caucus_shared::Config;

/// The role whose credentials `caucus init` uses when none are configured.
pub const ADMIN_ROLE: &str = "admin";

/// Arguments of `caucus init`.
#[derive(Debug, Clone, clap::Args)]
pub struct InitArgs {
    /// Agent types whose consumers to create (`workers-<t>`, `agents-<t>`),
    /// comma separated or repeated.
    #[arg(long, value_delimiter = ',', value_name = "TYPE[,TYPE]")]
    pub agent_types: Vec<String>,
}

/// Runs `caucus init`; returns the exit code.
pub async fn run(common: &CommonArgs, args: &InitArgs, json: bool) -> anyhow::Result<i32> {
    let config = admin_config(common)?;
    let client = nats::connect(&config.nats, "caucus-init").await?;
    let js = jetstream::new(client.clone());
    let subjects = Subjects::new(config.subject_prefix.clone());
    let types: Vec<String> = args
        .agent_types
        .iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect();
    let done = admin::everything(&js, &subjects, &config, &types)
        .await
        .context("creating the topology (does this NATS user have the admin role?)")?;
    client.flush().await.ok();
    if json {
        let out = serde_json::json!({
            "streams": done.streams,
            "buckets": done.buckets,
            "consumers": done.consumers,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("streams:   {}", done.streams.join(", "));
        println!("buckets:   {}", done.buckets.join(", "));
        println!("consumers: {}", done.consumers.join(", "));
    }
    Ok(0)
}

/// The configuration, with the admin's NATS credentials from its env file
/// when none are configured.
fn admin_config(common: &CommonArgs) -> anyhow::Result<Config> {
    let mut config = common.load()?;
    if has_credentials(&config.nats) {
        return Ok(config);
    }
    let vars = crate::credentials::role_env(ADMIN_ROLE)?;
    if vars.is_empty() {
        // Authentication off (or credentials elsewhere): connect as is.
        return Ok(config);
    }
    // Typed by the services' own env mapping (CAUCUS_NATS_USER → nats.user).
    let found = ConfigLoader::new()
        .env(vars)
        .load()
        .context("admin.env: invalid credentials file")?;
    config.nats.user = found.nats.user;
    config.nats.password = found.nats.password;
    config.nats.token = found.nats.token;
    config.nats.nkey_seed = found.nats.nkey_seed;
    config.nats.credentials_file = found.nats.credentials_file;
    Ok(config)
}

fn has_credentials(nats: &NatsConfig) -> bool {
    nats.user.is_some()
        || nats.password.is_some()
        || nats.token.is_some()
        || nats.nkey_seed.is_some()
        || nats.credentials_file.is_some()
}
