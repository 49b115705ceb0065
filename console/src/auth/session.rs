//! The login session: a signed cookie naming the person, when it was
//! issued and a random session id. The signature (a key derived from
//! `console.session_secret`) makes it unforgeable; its age, checked here
//! against `console.session_ttl`, makes it expire whatever the browser
//! keeps.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The session cookie's name.
pub const COOKIE: &str = "caucus_session";

/// How far in the future an issue time may lie (clocks of consoles behind
/// one load balancer differ a little); further is not a cookie we wrote.
const MAX_SKEW: Duration = Duration::from_secs(60);

/// A logged-in person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Who.
    pub name: String,
    /// Milliseconds since the Unix epoch when they logged in.
    pub issued_ms: u64,
    /// Random, per login: what the CSRF token is bound to.
    pub id: String,
}

/// What a request's session cookie says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionState {
    /// No (valid, signed) cookie.
    Missing,
    /// Signed by us, but older than the session lifetime.
    Expired,
    /// Logged in.
    Valid(Session),
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Session {
    /// A new session for `name`, issued at `now_ms`.
    pub fn new(name: &str, now_ms: u64) -> Session {
        Session {
            name: name.to_string(),
            issued_ms: now_ms,
            id: hex::encode(rand::random::<[u8; 16]>()),
        }
    }

    /// The cookie value: `<name>.<issued_ms>.<id>` (names have no dots).
    pub fn encode(&self) -> String {
        format!("{}.{}.{}", self.name, self.issued_ms, self.id)
    }

    /// Reads a (verified) cookie value and checks its age against `ttl`
    /// at `now_ms`.
    pub fn decode(value: &str, ttl: Duration, now_ms: u64) -> SessionState {
        let mut parts = value.split('.');
        let (Some(name), Some(issued), Some(id), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return SessionState::Missing;
        };
        let Ok(issued_ms) = issued.parse::<u64>() else {
            return SessionState::Missing;
        };
        if caucus_shared::auth::validate_person(name).is_err() || id.is_empty() {
            return SessionState::Missing;
        }
        let ttl_ms = ttl.as_millis() as u64;
        if issued_ms > now_ms + MAX_SKEW.as_millis() as u64
            || now_ms.saturating_sub(issued_ms) >= ttl_ms
        {
            return SessionState::Expired;
        }
        SessionState::Valid(Session {
            name: name.to_string(),
            issued_ms,
            id: id.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_session_lasts_its_ttl_and_not_a_millisecond_more() {
        let s = Session::new("alice", 1_000_000);
        let v = s.encode();
        assert_eq!(
            Session::decode(&v, HOUR, 1_000_000 + 3_599_999),
            SessionState::Valid(s.clone())
        );
        assert_eq!(
            Session::decode(&v, HOUR, 1_000_000 + 3_600_000),
            SessionState::Expired
        );
        assert_eq!(
            Session::decode(&v, HOUR, 1_000_000 - 120_000),
            SessionState::Expired,
            "issued in the future"
        );
    }

    #[test]
    fn malformed_values_are_no_session() {
        for v in [
            "",
            "alice",
            "alice.x.id",
            "a.b.1.id",
            "al ice.1.id",
            "alice.1.",
        ] {
            assert_eq!(Session::decode(v, HOUR, 2), SessionState::Missing, "{v:?}");
        }
        assert_ne!(Session::new("a", 1).id, Session::new("a", 1).id);
    }
}
