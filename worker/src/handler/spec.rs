//! Parsing `--handler builtin|noop|sleep:MS|exec:CMD|http:URL`.

use std::str::FromStr;

/// Which kind of handler runs the tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerSpec {
    /// The built-in analysts.
    Builtin,
    /// Returns `{}` at once (benchmarks, plumbing tests).
    Noop,
    /// Sleeps this many ms, then returns (load tests).
    Sleep(u64),
    /// `sh -c CMD`: task JSON on stdin, result JSON on stdout.
    Exec(String),
    /// POST the task JSON to this URL; the response body is the result.
    Http(String),
}

impl HandlerSpec {
    /// The kind's name (`builtin`, `noop`, `sleep`, `exec`, `http`): the
    /// `handler` label of `caucus_worker_handler_seconds`.
    pub fn kind(&self) -> &'static str {
        match self {
            HandlerSpec::Builtin => "builtin",
            HandlerSpec::Noop => "noop",
            HandlerSpec::Sleep(_) => "sleep",
            HandlerSpec::Exec(_) => "exec",
            HandlerSpec::Http(_) => "http",
        }
    }
}

/// A handler spec that cannot be parsed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error(
    "invalid handler `{spec}`: {reason} (expected builtin, noop, sleep:MS, exec:CMD or http:URL)"
)]
pub struct HandlerSpecError {
    spec: String,
    reason: &'static str,
}

impl FromStr for HandlerSpec {
    type Err = HandlerSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| HandlerSpecError {
            spec: s.to_string(),
            reason,
        };
        let s = s.trim();
        if s == "builtin" {
            return Ok(HandlerSpec::Builtin);
        }
        if s == "noop" {
            return Ok(HandlerSpec::Noop);
        }
        if let Some(ms) = s.strip_prefix("sleep:") {
            return ms
                .parse()
                .map(HandlerSpec::Sleep)
                .map_err(|_| err("sleep needs milliseconds"));
        }
        if let Some(cmd) = s.strip_prefix("exec:") {
            if cmd.trim().is_empty() {
                return Err(err("exec needs a command"));
            }
            return Ok(HandlerSpec::Exec(cmd.to_string()));
        }
        let url = s
            .strip_prefix("http:")
            .filter(|u| u.starts_with("http"))
            .unwrap_or(s);
        if url.starts_with("http://") || url.starts_with("https://") {
            return Ok(HandlerSpec::Http(url.to_string()));
        }
        Err(err("unknown kind"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind() {
        assert_eq!("builtin".parse(), Ok(HandlerSpec::Builtin));
        assert_eq!("noop".parse(), Ok(HandlerSpec::Noop));
        assert_eq!("sleep:100".parse(), Ok(HandlerSpec::Sleep(100)));
        assert_eq!(
            "exec:python3 agent.py".parse(),
            Ok(HandlerSpec::Exec("python3 agent.py".into()))
        );
        assert_eq!(
            "http:http://127.0.0.1:8080/run".parse(),
            Ok(HandlerSpec::Http("http://127.0.0.1:8080/run".into()))
        );
        assert_eq!(
            "https://x/run".parse(),
            Ok(HandlerSpec::Http("https://x/run".into()))
        );
        let e = "bogus".parse::<HandlerSpec>().unwrap_err().to_string();
        assert!(e.contains("invalid handler `bogus`"), "{e}");
        assert!("exec:".parse::<HandlerSpec>().is_err());
        assert!("sleep:x".parse::<HandlerSpec>().is_err());
    }
}
