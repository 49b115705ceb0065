//! Who is looking: the person (when authentication is on) and the CSRF
//! token every form of the page must carry.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;

use caucus_shared::api::ApiClient;
use caucus_shared::config::ConsoleAuth;

use crate::auth::session::SessionState;
use crate::auth::{Auth, Browser};
use crate::error::PageError;
use crate::state::AppState;

/// The person behind a request.
#[derive(Debug, Clone)]
pub struct Viewer {
    /// Their identity; `None` when the console runs without
    /// authentication (loopback only).
    pub identity: Option<String>,
    /// The token forms post back as `csrf`.
    pub csrf: String,
}

impl Viewer {
    /// The API client acting as this person (decisions are recorded under
    /// their name).
    pub fn api(&self, state: &AppState) -> ApiClient {
        match &self.identity {
            Some(name) => state.api.clone().with_identity(name.clone()),
            None => state.api.clone(),
        }
    }

    /// Checks the `csrf` field a form posted against this viewer's token
    /// (constant time); every POST handler calls it before acting.
    pub fn check_csrf(&self, token: &str) -> Result<(), PageError> {
        if !self.csrf.is_empty() && ct_eq(self.csrf.as_bytes(), token.as_bytes()) {
            Ok(())
        } else {
            Err(PageError::Forbidden("missing or wrong CSRF token".into()))
        }
    }
}

// Constant time in the contents (not the length, which is public: tokens
// are fixed-size hex), so a wrong guess tells nothing about the right one.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn parts_auth(parts: &Parts) -> Result<(Arc<Auth>, Browser), PageError> {
    let auth = parts.extensions.get::<Arc<Auth>>().cloned();
    let browser = parts.extensions.get::<Browser>().cloned();
    match (auth, browser) {
        (Some(a), Some(b)) => Ok((a, b)),
        // A router built without `crate::auth::layer`: a bug, not a user's.
        _ => Err(PageError::Forbidden(
            "the console's authentication layer is missing".into(),
        )),
    }
}

/// Not logged in: pages go to the login form; actions (and anything but
/// GET) get a 401 saying so, since a redirect would lose the form.
fn unauthenticated(parts: &Parts, why: &str) -> Response {
    if parts.method == Method::GET || parts.method == Method::HEAD {
        return Redirect::to("/login").into_response();
    }
    let body = html! {
        h1 { "401 Unauthorized" }
        p class="error" { (why) }
        p { a href="/login" { "Log in" } }
    };
    (StatusCode::UNAUTHORIZED, body).into_response()
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _state: &AppState) -> Result<Self, Response> {
        let (auth, browser) = parts_auth(parts).map_err(IntoResponse::into_response)?;
        match auth.mode() {
            ConsoleAuth::None => Ok(Viewer {
                identity: None,
                csrf: auth.csrf_token(&browser.0),
            }),
            ConsoleAuth::Header => {
                let header = auth.header_label();
                let name = parts
                    .headers
                    .get(auth.header())
                    .and_then(|v| v.to_str().ok())
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| {
                        PageError::Forbidden(format!(
                            "no `{header}` header: this console expects the authenticating proxy in front of it to name the person"
                        ))
                        .into_response()
                    })?;
                caucus_shared::auth::validate_person(name).map_err(|e| {
                    PageError::Forbidden(format!(
                        "`{header}`: {}",
                        e.replace("operator name", "person")
                    ))
                    .into_response()
                })?;
                Ok(Viewer {
                    identity: Some(name.to_string()),
                    csrf: auth.csrf_token(&browser.0),
                })
            }
            ConsoleAuth::Users => match auth.session(&parts.headers) {
                SessionState::Valid(s) => Ok(Viewer {
                    csrf: auth.csrf_token(&s.id),
                    identity: Some(s.name),
                }),
                SessionState::Expired => {
                    Err(unauthenticated(parts, "your session expired: log in again"))
                }
                SessionState::Missing => Err(unauthenticated(parts, "log in first")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csrf_must_match_exactly() {
        let v = Viewer {
            identity: None,
            csrf: "ab".repeat(32),
        };
        assert!(v.check_csrf(&"ab".repeat(32)).is_ok());
        for bad in ["", "ab", &"ba".repeat(32), &"ab".repeat(33)] {
            let e = v.check_csrf(bad).unwrap_err();
            assert!(matches!(e, PageError::Forbidden(_)), "{bad:?}");
            assert_eq!(e.to_string(), "missing or wrong CSRF token");
        }
        let empty = Viewer {
            identity: None,
            csrf: String::new(),
        };
        assert!(empty.check_csrf("").is_err(), "an empty token never passes");
    }
}
