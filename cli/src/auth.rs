//! `caucus auth init DIR`: the credentials of every role (docs/SECURITY.md).
//!
//! Runs without connecting to anything: it only writes files.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use caucus_shared::auth::{init, InitOptions};

/// `caucus auth …`.
#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Write nats.conf, redis-users.acl and one env file per role (and per
    /// `--operator`) into DIR (files 0600, DIR 0700). A second run keeps
    /// every secret and adds what is missing; `--rotate` makes new ones.
    Init(InitArgs),
}

/// Arguments of `caucus auth init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The directory to write (created if missing).
    pub dir: PathBuf,
    /// Subject and Redis key prefix the permissions are written for.
    #[arg(long, default_value = "caucus")]
    pub prefix: String,
    /// A person with their own operator user (`operator-NAME`, identity
    /// NAME); repeat for more. Persons already in DIR are kept.
    #[arg(long = "operator", value_name = "NAME")]
    pub operators: Vec<String>,
    /// New secrets for every user. Then restart nats-server and
    /// redis-server, then every service (docs/SECURITY.md, "Rotation").
    #[arg(long)]
    pub rotate: bool,
}

/// Runs an `auth` subcommand; prints what it did (never a secret).
pub fn run(cmd: &AuthCommand) -> anyhow::Result<i32> {
    match cmd {
        AuthCommand::Init(a) => {
            let report = init(&InitOptions {
                dir: a.dir.clone(),
                prefix: a.prefix.clone(),
                operators: a.operators.clone(),
                rotate: a.rotate,
            })?;
            if !report.created.is_empty() {
                println!("new secrets: {}", report.created.join(", "));
            }
            if !report.kept.is_empty() {
                println!("kept: {}", report.kept.join(", "));
            }
            println!(
                "wrote {} files into {}",
                report.files.len(),
                a.dir.display()
            );
            Ok(0)
        }
    }
}
