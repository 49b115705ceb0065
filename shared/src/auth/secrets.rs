//! The secrets of one user and where they are kept: its env file.

use rand::distr::Alphanumeric;
use rand::Rng;

/// Length of a generated password: 40 alphanumerics, about 238 bits.
pub const SECRET_LEN: usize = 40;

/// Env variable of the NATS user name.
pub const NATS_USER: &str = "CAUCUS_NATS_USER";
/// Env variable of the NATS password.
pub const NATS_PASSWORD: &str = "CAUCUS_NATS_PASSWORD";
/// Env variable of the Redis user name.
pub const REDIS_USERNAME: &str = "CAUCUS_REDIS_USERNAME";
/// Env variable of the Redis password.
pub const REDIS_PASSWORD: &str = "CAUCUS_REDIS_PASSWORD";
/// Env variable set for the services that must name who acts.
pub const REQUIRE_IDENTITY: &str = "CAUCUS_SECURITY_REQUIRE_IDENTITY";
/// Env variable of a person's identity (the CLI sends `.as.<identity>`).
pub const IDENTITY: &str = "CAUCUS_IDENTITY";
/// Env variable of the key signing the console's session cookies and
/// CSRF tokens (`console.env` only).
pub const CONSOLE_SESSION_SECRET: &str = "CAUCUS_CONSOLE_SESSION_SECRET";
/// Env variable of the subject (and Redis key) prefix.
pub const SUBJECT_PREFIX: &str = "CAUCUS_SUBJECT_PREFIX";

/// One user's passwords. `Debug` never shows them.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The NATS password.
    pub nats_password: String,
    /// The Redis password (unused by roles without Redis, kept anyway so
    /// a later role change needs no rotation).
    pub redis_password: String,
    /// The console's session key (written to `console.env` only; kept
    /// like the passwords, so sessions survive a re-run of `auth init`).
    pub session_secret: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "Credentials { nats_password: \"***\", redis_password: \"***\", session_secret: \"***\" }",
        )
    }
}

impl Credentials {
    /// Fresh random passwords.
    pub fn generate() -> Credentials {
        Credentials {
            nats_password: new_secret(),
            redis_password: new_secret(),
            session_secret: new_secret(),
        }
    }

    /// The passwords an env file written by `caucus auth init` holds, if
    /// it holds a NATS password (a role without Redis has none: a fresh
    /// one is made for it, never used).
    pub fn from_env_text(text: &str) -> Option<Credentials> {
        let nats_password = value(text, NATS_PASSWORD)?;
        let redis_password = value(text, REDIS_PASSWORD).unwrap_or_else(new_secret);
        let session_secret = value(text, CONSOLE_SESSION_SECRET).unwrap_or_else(new_secret);
        Some(Credentials {
            nats_password,
            redis_password,
            session_secret,
        })
    }
}

/// A random alphanumeric password of [`SECRET_LEN`] characters.
pub fn new_secret() -> String {
    rand::rng()
        .sample_iter(Alphanumeric)
        .take(SECRET_LEN)
        .map(char::from)
        .collect()
}

/// The value of `KEY=VALUE` (optionally `export `, quoted) in an env file.
pub fn value(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line);
        let v = line.strip_prefix(key)?.strip_prefix('=')?;
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(v);
        (!v.is_empty()).then(|| v.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_long_random_alphanumerics() {
        let (a, b) = (new_secret(), new_secret());
        assert_eq!(a.len(), SECRET_LEN);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, b);
    }

    #[test]
    fn env_text_is_read_back() {
        let t = "# x\nCAUCUS_NATS_USER=w\nexport CAUCUS_NATS_PASSWORD=\"abc\"\nCAUCUS_REDIS_PASSWORD=def\nCAUCUS_CONSOLE_SESSION_SECRET=ghi\n";
        let c = Credentials::from_env_text(t).unwrap();
        assert_eq!(c.nats_password, "abc");
        assert_eq!(c.redis_password, "def");
        assert_eq!(c.session_secret, "ghi");
        assert!(!format!("{c:?}").contains("ghi"));
        assert!(Credentials::from_env_text("CAUCUS_NATS_USER=w\n").is_none());
        assert!(!format!("{c:?}").contains("abc"));
    }
}
