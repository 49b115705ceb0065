//! `[console]`: the web console (`caucus-console`, docs/CONSOLE.md).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::secret::Secret;

/// How the console knows who is using it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ConsoleAuth {
    /// Nobody logs in: the console refuses to listen on anything but
    /// loopback (the local stack's default).
    #[default]
    None,
    /// A login form checked against `users_file` (argon2 hashes written by
    /// `caucus console add-user`).
    Users,
    /// An authenticating proxy in front names the person in
    /// `trusted_header`.
    Header,
}

/// Console settings.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ConsoleConfig {
    /// Where the console serves HTTP (env `CAUCUS_CONSOLE_LISTEN`).
    pub listen: String,
    /// `none`, `users` or `header`.
    pub auth: ConsoleAuth,
    /// The users file for `auth = "users"`.
    pub users_file: Option<PathBuf>,
    /// The header naming the person for `auth = "header"` (e.g.
    /// `X-Forwarded-User`); trust it only behind a proxy that sets it.
    pub trusted_header: String,
    /// Key signing session cookies and CSRF tokens; every console behind
    /// one load balancer needs the same (`caucus auth init` writes one
    /// into `console.env`). Unset: a random key per process.
    pub session_secret: Option<Secret>,
    /// A login lasts this long.
    #[serde(with = "humantime_serde")]
    pub session_ttl: Duration,
    /// Rows per page of every list.
    pub page_size: usize,
    /// The longest rationale a decision may carry (bytes).
    pub max_rationale_bytes: usize,
}

// By hand: the session secret must never reach a log.
impl std::fmt::Debug for ConsoleConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleConfig")
            .field("listen", &self.listen)
            .field("auth", &self.auth)
            .field("users_file", &self.users_file)
            .field("trusted_header", &self.trusted_header)
            .field(
                "session_secret",
                &self.session_secret.as_ref().map(|_| "***"),
            )
            .field("session_ttl", &self.session_ttl)
            .field("page_size", &self.page_size)
            .field("max_rationale_bytes", &self.max_rationale_bytes)
            .finish()
    }
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            listen: "127.0.0.1:8080".into(),
            auth: ConsoleAuth::None,
            users_file: None,
            trusted_header: "X-Forwarded-User".into(),
            session_secret: None,
            session_ttl: Duration::from_secs(8 * 3600),
            page_size: 50,
            max_rationale_bytes: 2000,
        }
    }
}
