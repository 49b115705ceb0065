//! `caucus console add-user NAME`: adds a person to the web console's
//! users file (or changes their password), as an argon2 hash.
//!
//! Runs without connecting to anything: it only writes the file, which
//! the console reads at each login (no restart needed).

use std::io::{BufRead, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use caucus_console::auth::users::Users;
use caucus_shared::config::CommonArgs;

/// `caucus console …`.
#[derive(Debug, Subcommand)]
pub enum ConsoleCommand {
    /// Add a person to the console's users file, or set a new password
    /// for one already there.
    AddUser(AddUserArgs),
}

/// Arguments of `caucus console add-user`.
#[derive(Debug, Args)]
pub struct AddUserArgs {
    /// The person's name (1..=64 of `[A-Za-z0-9_-]`): what decisions are
    /// recorded under.
    pub name: String,
    /// The users file (default: console.users_file of the configuration).
    #[arg(long, value_name = "FILE")]
    pub users_file: Option<PathBuf>,
    /// Read the password from the first line of stdin, without a prompt.
    #[arg(long)]
    pub password_stdin: bool,
}

/// Runs a `console` subcommand; prints what it did (never the password).
pub fn run(common: &CommonArgs, cmd: &ConsoleCommand) -> anyhow::Result<i32> {
    match cmd {
        ConsoleCommand::AddUser(a) => add_user(common, a),
    }
}

fn add_user(common: &CommonArgs, a: &AddUserArgs) -> anyhow::Result<i32> {
    let file = match &a.users_file {
        Some(f) => f.clone(),
        None => common
            .load()
            .context("reading the configuration for console.users_file")?
            .console
            .users_file
            .context("no users file: pass --users-file FILE or set console.users_file")?,
    };
    let mut users = Users::load(&file)?;
    if !a.password_stdin {
        // The prompt goes to stderr so stdout stays the report; the
        // terminal echoes what is typed (pipe it with --password-stdin
        // to keep it off the screen).
        eprint!("password for {}: ", a.name);
        std::io::stderr().flush().ok();
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the password from stdin")?;
    let password = line.trim_end_matches(['\n', '\r']);
    let new = users.set(&a.name, password)?;
    users.save(&file)?;
    println!(
        "{} {} in {}",
        if new { "added" } else { "new password for" },
        a.name,
        file.display()
    );
    Ok(0)
}
