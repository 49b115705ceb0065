//! Secrets in the configuration: kept as given, never shown.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

/// What a secret, or the password part of a URL, shows instead of itself.
pub const REDACTED: &str = "***";

/// A password, token or seed. It (de)serializes as the plain string, so the
/// layered loader and config files work as for any string, while `Debug`
/// prints `"***"`. `--dump-config` redacts it by key name (see
/// [`super::Config::to_toml`]).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that hands it to a server.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

// Deref to `str` keeps `Option<Secret>::as_deref()` and comparisons working
// for callers that only test presence or pass the value on.
impl Deref for Secret {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{REDACTED}\"")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret(value.to_string())
    }
}

/// Whether a config key holds a secret by its name: `password`, `token`,
/// `nkey_seed`, or any key ending in `_password`, `_token`, `_secret` or
/// `_seed` (so a future field named that way is redacted without a list to
/// keep up to date).
pub(crate) fn is_secret_key(key: &str) -> bool {
    matches!(key, "password" | "token" | "nkey_seed" | "secret")
        || ["_password", "_token", "_secret", "_seed"]
            .iter()
            .any(|s| key.ends_with(s))
}

/// `scheme://user:secret@host` → `scheme://user:***@host`, `scheme://tok@host`
/// → `scheme://***@host`; each URL of a comma-separated list; anything else
/// unchanged.
pub fn redact_urls(value: &str) -> String {
    value
        .split(',')
        .map(|u| redact_url(u.trim()))
        .collect::<Vec<_>>()
        .join(",")
}

/// [`redact_urls`] for one URL.
pub fn redact_url(url: &str) -> String {
    let Some(s) = url.find("://") else {
        return url.to_string();
    };
    // Userinfo ends at the last '@' before the path, query or fragment.
    let rest = &url[s + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_string();
    };
    let creds = &rest[..at];
    let shown = match creds.split_once(':') {
        Some((user, _)) => format!("{user}:{REDACTED}"),
        None => REDACTED.to_string(),
    };
    format!("{}{shown}{}", &url[..s + 3], &rest[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_value_and_serde_keeps_it() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "\"***\"");
        assert_eq!(format!("{:?}", Some(s.clone())), "Some(\"***\")");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"hunter2\"");
        let back: Secret = serde_json::from_str("\"hunter2\"").unwrap();
        assert_eq!(back.expose(), "hunter2");
    }

    #[test]
    fn urls_lose_their_passwords() {
        assert_eq!(redact_url("redis://:pw@h:1"), "redis://:***@h:1");
        assert_eq!(redact_url("rediss://u:pw@h:1/0"), "rediss://u:***@h:1/0");
        assert_eq!(redact_url("nats://tok@h:1"), "nats://***@h:1");
        assert_eq!(redact_url("redis://h:1"), "redis://h:1");
        assert_eq!(redact_url("http://h:1/a@b"), "http://h:1/a@b");
        assert_eq!(redact_url("not a url"), "not a url");
        assert_eq!(
            redact_urls("nats://a:p1@h:1, nats://b:p@2@h:2"),
            "nats://a:***@h:1,nats://b:***@h:2"
        );
    }

    #[test]
    fn secret_keys_by_name() {
        for k in [
            "password",
            "token",
            "nkey_seed",
            "api_token",
            "client_secret",
        ] {
            assert!(is_secret_key(k), "{k}");
        }
        for k in ["user", "url", "tls_key_file", "username", "tokens_max"] {
            assert!(!is_secret_key(k), "{k}");
        }
    }
}
