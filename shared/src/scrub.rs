//! Scrubbing error texts before they are stored or sent: a task's error
//! message ends up in the workflow record, in events, on alert cards and in
//! logs, and an agent may well echo its environment, a connection URL or a
//! configuration line into it. [`scrub`] takes out what looks like a
//! credential and everything equal to a secret the process knows, then
//! bounds the length.

use std::sync::LazyLock;

use regex::Regex;

use crate::config::Config;

/// What a scrubbed value is replaced with.
pub const MASK: &str = "***";

/// Longest text [`scrub`] returns, in bytes (the `…` marking a cut
/// included).
pub const MAX_LEN: usize = 2048;

/// Secrets shorter than this (in characters) are not searched for: a
/// one-letter "password" would mask every occurrence of that letter.
pub const MIN_SECRET_CHARS: usize = 4;

/// `scheme://user:password@`: the password part.
static URL_USERINFO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/?#@\s]*):([^@/?#\s]*)@").expect("valid regex")
});

/// `nats://TOKEN@`: a token as the whole userinfo (NATS reads it so).
static URL_TOKEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\b[a-z][a-z0-9+.-]*://([^:/?#@\s]+)@").expect("valid regex"));

/// Names that say their value is a credential (`CAUCUS_NATS_PASSWORD`,
/// `token`, `api_key`, `nkey_seed`, …), as the tail of a key.
const SECRET_KEY: &str = r"[\w.-]*(?:password|passwd|pwd|token|secret|api[_-]?key|apikey|seed)";

/// `key=value` (shell, env dumps, query strings, logfmt).
static KEY_EQUALS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"(?i)(\b{SECRET_KEY}\s*=\s*)("[^"]*"|'[^']*'|[^\s&,;"']+)"#
    ))
    .expect("valid regex")
});

/// `"key": "value"` (JSON).
static KEY_JSON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r#"(?i)("{SECRET_KEY}"\s*:\s*)"(?:[^"\\]|\\.)*""#)).expect("valid regex")
});

/// `Bearer <token>` (an `Authorization` header echoed).
static BEARER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]+").expect("valid regex"));

/// `text` without credentials, at most [`MAX_LEN`] bytes: URL passwords
/// (`scheme://user:pass@` → `scheme://user:***@`), every occurrence of each
/// of `secrets` (those of at least [`MIN_SECRET_CHARS`] characters),
/// `password=…`/`token=…`-shaped values, JSON `"…password": "…"` values and
/// `Bearer …` tokens become [`MASK`].
pub fn scrub(text: &str, secrets: &[&str]) -> String {
    scrub_to(text, secrets, MAX_LEN)
}

/// [`scrub`] with another length bound (bytes, the `…` included).
pub fn scrub_to(text: &str, secrets: &[&str], max_len: usize) -> String {
    // Known secrets first, longest first: a secret containing another is
    // masked whole, and the shape rules below cannot split one.
    let mut known: Vec<&str> = secrets
        .iter()
        .copied()
        .filter(|s| s.chars().count() >= MIN_SECRET_CHARS)
        .collect();
    known.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = text.to_string();
    for s in known {
        if out.contains(s) {
            out = out.replace(s, MASK);
        }
    }
    let out = URL_USERINFO.replace_all(&out, format!("${{1}}:{MASK}@"));
    let out = KEY_EQUALS.replace_all(&out, format!("${{1}}{MASK}"));
    let out = KEY_JSON.replace_all(&out, format!("${{1}}\"{MASK}\""));
    let out = BEARER.replace_all(&out, format!("${{1}}{MASK}"));
    truncate(&out, max_len)
}

/// `text` cut to at most `max_len` bytes on a character boundary, ending in
/// `…` when cut.
pub fn truncate(text: &str, max_len: usize) -> String {
    if text.len() <= max_len {
        return text.to_string();
    }
    const ELLIPSIS: &str = "…";
    let mut cut = max_len.saturating_sub(ELLIPSIS.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{ELLIPSIS}", &text[..cut])
}

/// The secret values in `cfg` a process must never echo: the NATS
/// password, token and nkey seed, the Redis password, the passwords in the
/// NATS and Redis URLs, and a token standing alone in a NATS URL
/// (`nats://TOKEN@host`).
pub fn config_secrets(cfg: &Config) -> Vec<String> {
    let mut out: Vec<String> = [
        cfg.nats.password.as_deref(),
        cfg.nats.token.as_deref(),
        cfg.nats.nkey_seed.as_deref(),
        cfg.redis.password.as_deref(),
    ]
    .into_iter()
    .flatten()
    .map(str::to_string)
    .collect();
    for url in [cfg.nats.url.as_str(), cfg.redis.url.as_str()] {
        out.extend(
            URL_USERINFO
                .captures_iter(url)
                .filter_map(|c| c.get(2))
                .map(|m| m.as_str().to_string()),
        );
    }
    out.extend(
        URL_TOKEN
            .captures_iter(&cfg.nats.url)
            .filter_map(|c| c.get(1))
            .map(|m| m.as_str().to_string()),
    );
    out.retain(|s| !s.is_empty());
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_passwords_are_masked_and_users_kept() {
        assert_eq!(
            scrub("cannot reach redis://app:hunter2@db:6379/0 (refused)", &[]),
            "cannot reach redis://app:***@db:6379/0 (refused)"
        );
        assert_eq!(
            scrub("nats://:tok@n1:4222,nats://u:p@n2", &[]),
            "nats://:***@n1:4222,nats://u:***@n2"
        );
        // No userinfo, or a user without a password: unchanged.
        assert_eq!(
            scrub("see https://x.org/a:b@c", &[]),
            "see https://x.org/a:b@c"
        );
        assert_eq!(scrub("ssh://git@host", &[]), "ssh://git@host");
    }

    #[test]
    fn every_occurrence_of_a_known_secret_is_masked() {
        let env = r#"{"CAUCUS_NATS_URL":"nats://x","X":"s3cret-value","Y":"a s3cret-value b"}"#;
        let out = scrub(env, &["s3cret-value"]);
        assert!(!out.contains("s3cret"), "{out}");
        assert_eq!(out.matches(MASK).count(), 2, "{out}");
    }

    #[test]
    fn short_and_empty_secrets_are_ignored() {
        assert_eq!(scrub("a b abc", &["", "a", "abc"]), "a b abc");
    }

    #[test]
    fn a_longer_secret_containing_a_shorter_is_masked_whole() {
        assert_eq!(scrub("x=[abcdefgh]", &["abcd", "abcdefgh"]), "x=[***]");
    }

    #[test]
    fn credential_shaped_values_are_masked() {
        assert_eq!(
            scrub("CAUCUS_NATS_PASSWORD=p4ss other=1", &[]),
            "CAUCUS_NATS_PASSWORD=*** other=1"
        );
        assert_eq!(
            scrub("GET /x?token=abc&page=2", &[]),
            "GET /x?token=***&page=2"
        );
        assert_eq!(scrub(r#"password="two words" ok"#, &[]), "password=*** ok");
        assert_eq!(
            scrub(r#"{"api_key": "k-1\"2", "n": 1}"#, &[]),
            r#"{"api_key": "***", "n": 1}"#
        );
        assert_eq!(
            scrub("Authorization: Bearer eyJhbGci.x-y", &[]),
            "Authorization: Bearer ***"
        );
        // Prose mentioning a password keeps its words.
        assert_eq!(
            scrub("wrong password: check the config", &[]),
            "wrong password: check the config"
        );
    }

    #[test]
    fn long_texts_are_cut_on_a_char_boundary() {
        let text = "é".repeat(2000); // 4,000 bytes
        let out = scrub(&text, &[]);
        assert!(out.len() <= MAX_LEN, "{}", out.len());
        assert!(out.ends_with('…'));
        assert!(out.len() > MAX_LEN - 8);
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("abcdefghij", 10), "abcdefghij");
        assert_eq!(truncate("abcdefghijk", 10), "abcdefg…");
    }

    #[test]
    fn a_secret_cut_by_the_bound_is_masked_before_the_cut() {
        // Cut first, the bound would keep `s3cre`: it straddles byte 2,045.
        let text = format!("{}s3cret-value{}", "x".repeat(2040), "y".repeat(100));
        let out = scrub(&text, &["s3cret-value"]);
        assert!(!out.contains("s3c"), "{out}");
    }

    #[test]
    fn config_secrets_are_the_credentials_and_url_passwords() {
        let mut cfg = Config::default();
        cfg.nats.password = Some("np4ss".into());
        cfg.nats.token = Some("".into());
        cfg.redis.password = Some("redisp4ss".into());
        cfg.nats.url = "nats://a:up4ss@h:4222,nats://tok3n@h2".into();
        cfg.redis.url = "redis://:rp4ss@r:6379".into();
        assert_eq!(
            config_secrets(&cfg),
            vec!["np4ss", "redisp4ss", "rp4ss", "tok3n", "up4ss"]
        );
        assert!(config_secrets(&Config::default()).is_empty());
    }
}
