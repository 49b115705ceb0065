//! Who is using the console (issue 13 item 3): the users file and login
//! sessions (`console.auth = "users"`), a trusted header set by an
//! authenticating proxy (`"header"`), or nobody (`"none"`, loopback only);
//! and the CSRF token every POST carries, in every mode.
//!
//! [`layer`] puts the [`Auth`] and the browser's id into each request's
//! extensions; [`crate::viewer::Viewer`] reads them.

pub mod csrf;
pub mod session;
pub mod users;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::header::{COOKIE, SET_COOKIE};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use axum_extra::extract::cookie::{Cookie, Key, SameSite, SignedCookieJar};
use sha2::{Digest, Sha512};

use caucus_shared::config::{ConsoleAuth, ConsoleConfig};

use self::csrf::CsrfKey;
use self::session::{Session, SessionState};
use self::users::{Users, UsersError};

/// The cookie holding a browser's random id, which CSRF tokens are bound
/// to when nobody is logged in (the login form, `auth = none | header`).
pub const BROWSER_COOKIE: &str = "caucus_browser";

/// Why the `[console]` authentication settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// `auth = "users"` without a users file.
    #[error("console.auth = \"users\" needs console.users_file (create it with `caucus console add-user NAME --users-file FILE`)")]
    NoUsersFile,
    /// `trusted_header` is not a header name.
    #[error("console.trusted_header `{0}` is not an HTTP header name")]
    BadHeader(String),
    /// The users file exists but cannot be read.
    #[error(transparent)]
    Users(#[from] UsersError),
}

/// The console's authentication settings and keys; one per process.
pub struct Auth {
    mode: ConsoleAuth,
    users_file: Option<PathBuf>,
    header: HeaderName,
    /// The header as configured (`HeaderName` is lower case), for messages.
    header_label: String,
    ttl: Duration,
    cookie_key: Key,
    csrf_key: CsrfKey,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("mode", &self.mode)
            .field("users_file", &self.users_file)
            .field("header", &self.header)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// The browser's id (from [`BROWSER_COOKIE`], or new).
#[derive(Debug, Clone)]
pub struct Browser(pub String);

impl Auth {
    /// From `[console]`: keys derived from `session_secret`, or random for
    /// this process when it is unset (sessions then end with the process
    /// and are not shared with other consoles). A users file that exists
    /// is read once here, so a malformed one stops the start.
    pub fn from_config(c: &ConsoleConfig) -> Result<Auth, AuthError> {
        let header = HeaderName::try_from(c.trusted_header.as_str())
            .map_err(|_| AuthError::BadHeader(c.trusted_header.clone()))?;
        if c.auth == ConsoleAuth::Users {
            let file = c.users_file.as_ref().ok_or(AuthError::NoUsersFile)?;
            let users = Users::load(file)?;
            if users.is_empty() {
                tracing::warn!(users_file = %file.display(), "the users file has no users yet: nobody can log in until `caucus console add-user` adds one");
            }
        }
        let secret: Vec<u8> = match &c.session_secret {
            Some(s) => s.expose().as_bytes().to_vec(),
            None => rand::random::<[u8; 32]>().to_vec(),
        };
        // The cookie key needs 64 bytes; the secret is whatever length the
        // operator chose.
        let mut h = Sha512::new();
        h.update(b"caucus-console-cookie\0");
        h.update(&secret);
        let cookie_key = Key::from(&h.finalize());
        Ok(Auth {
            mode: c.auth,
            users_file: c.users_file.clone(),
            header,
            header_label: c.trusted_header.clone(),
            ttl: c.session_ttl,
            cookie_key,
            csrf_key: CsrfKey::derive(&secret),
        })
    }

    /// `none`, `users` or `header`.
    pub fn mode(&self) -> ConsoleAuth {
        self.mode
    }

    /// The header naming the person in `header` mode.
    pub fn header(&self) -> &HeaderName {
        &self.header
    }

    /// The header's name as configured (for messages).
    pub fn header_label(&self) -> &str {
        &self.header_label
    }

    /// The CSRF token for `binding` (a session id or a browser id).
    pub fn csrf_token(&self, binding: &str) -> String {
        self.csrf_key.token(binding)
    }

    /// Whether `name` / `password` is a user of the users file (read now,
    /// so `add-user` needs no restart).
    pub fn check_login(&self, name: &str, password: &str) -> Result<bool, AuthError> {
        let file = self.users_file.as_ref().ok_or(AuthError::NoUsersFile)?;
        Ok(Users::load(file)?.verify(name, password))
    }

    /// The signed cookie jar of a request.
    pub fn jar(&self, headers: &HeaderMap) -> SignedCookieJar {
        SignedCookieJar::from_headers(headers, self.cookie_key.clone())
    }

    /// A new session for `name` in `jar` (the response sets it).
    pub fn log_in(&self, jar: SignedCookieJar, name: &str) -> SignedCookieJar {
        let session = Session::new(name, session::now_ms());
        jar.add(session_cookie(session.encode()))
    }

    /// `jar` without the session.
    pub fn log_out(&self, jar: SignedCookieJar) -> SignedCookieJar {
        jar.remove(session_cookie(String::new()))
    }

    /// The session a request carries.
    pub fn session(&self, headers: &HeaderMap) -> SessionState {
        match self.jar(headers).get(session::COOKIE) {
            Some(c) => Session::decode(c.value(), self.ttl, session::now_ms()),
            None => SessionState::Missing,
        }
    }
}

fn session_cookie(value: String) -> Cookie<'static> {
    Cookie::build((session::COOKIE, value))
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .build()
}

/// The browser id a request's cookies carry, if well-formed.
fn browser_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| Cookie::parse(c.trim().to_string()).ok())
        .find(|c| c.name() == BROWSER_COOKIE)
        .map(|c| c.value().to_string())
        .filter(|v| v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Middleware: adds `auth` and the browser's id to the request; a browser
/// without one gets a new id in a cookie.
pub async fn layer(auth: Arc<Auth>, mut req: Request, next: Next) -> Response {
    let (id, new) = match browser_id(req.headers()) {
        Some(id) => (id, false),
        None => (hex::encode(rand::random::<[u8; 16]>()), true),
    };
    req.extensions_mut().insert(auth);
    req.extensions_mut().insert(Browser(id.clone()));
    let mut res = next.run(req).await;
    if new {
        let cookie = format!("{BROWSER_COOKIE}={id}; Path=/; HttpOnly; SameSite=Lax");
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            res.headers_mut().append(SET_COOKIE, v);
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use caucus_shared::config::Secret;

    fn config(secret: Option<&str>) -> ConsoleConfig {
        ConsoleConfig {
            session_secret: secret.map(Secret::new),
            session_ttl: Duration::from_secs(60),
            ..ConsoleConfig::default()
        }
    }

    fn cookie_header(jar: SignedCookieJar) -> HeaderMap {
        let mut h = HeaderMap::new();
        let c = jar.get(session::COOKIE).expect("session cookie");
        // What the browser sends back: the signed value as set.
        let set = axum::response::IntoResponse::into_response((jar, ()));
        let raw = set.headers()[SET_COOKIE].to_str().unwrap().to_string();
        let pair = raw.split(';').next().unwrap().to_string();
        assert!(pair.starts_with(session::COOKIE), "{pair} for {c}");
        h.insert(COOKIE, HeaderValue::from_str(&pair).unwrap());
        h
    }

    #[test]
    fn a_session_is_accepted_by_every_console_sharing_the_secret_only() {
        let a = Auth::from_config(&config(Some("shared secret"))).unwrap();
        let b = Auth::from_config(&config(Some("shared secret"))).unwrap();
        let other = Auth::from_config(&config(Some("another secret"))).unwrap();
        let headers = cookie_header(a.log_in(a.jar(&HeaderMap::new()), "alice"));
        let SessionState::Valid(s) = b.session(&headers) else {
            panic!("the other console rejects the session")
        };
        assert_eq!(s.name, "alice");
        assert_eq!(a.csrf_token(&s.id), b.csrf_token(&s.id));
        assert_eq!(other.session(&headers), SessionState::Missing);
        assert_ne!(a.csrf_token(&s.id), other.csrf_token(&s.id));
        let unset = Auth::from_config(&config(None)).unwrap();
        assert_eq!(unset.session(&headers), SessionState::Missing);
    }

    #[test]
    fn tampered_session_cookies_are_rejected() {
        let a = Auth::from_config(&config(Some("k"))).unwrap();
        let headers = cookie_header(a.log_in(a.jar(&HeaderMap::new()), "alice"));
        let raw = headers[COOKIE]
            .to_str()
            .unwrap()
            .replace("alice", "mallory");
        let mut forged = HeaderMap::new();
        forged.insert(COOKIE, HeaderValue::from_str(&raw).unwrap());
        assert_eq!(a.session(&forged), SessionState::Missing);
    }

    #[test]
    fn users_mode_needs_a_users_file_and_a_header_name_must_be_valid() {
        let c = ConsoleConfig {
            auth: ConsoleAuth::Users,
            ..ConsoleConfig::default()
        };
        assert!(matches!(Auth::from_config(&c), Err(AuthError::NoUsersFile)));
        let c = ConsoleConfig {
            trusted_header: "bad header".into(),
            ..ConsoleConfig::default()
        };
        assert!(matches!(
            Auth::from_config(&c),
            Err(AuthError::BadHeader(_))
        ));
    }

    #[test]
    fn browser_ids_are_read_from_cookies_when_well_formed() {
        let mut h = HeaderMap::new();
        let id = "0123456789abcdef0123456789abcdef";
        h.insert(
            COOKIE,
            HeaderValue::from_str(&format!("x=1; {BROWSER_COOKIE}={id}")).unwrap(),
        );
        assert_eq!(browser_id(&h).as_deref(), Some(id));
        h.insert(COOKIE, HeaderValue::from_static("caucus_browser=short"));
        assert_eq!(browser_id(&h), None);
    }
}
