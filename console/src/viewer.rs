//! Who is looking: the person (when authentication is on) and the CSRF
//! token every form of the page must carry.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use caucus_shared::api::ApiClient;

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

impl FromRequestParts<AppState> for Viewer {
    type Rejection = PageError;

    async fn from_request_parts(
        _parts: &mut Parts,
        _state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        // Without authentication configured nobody is named; the auth
        // module replaces this with sessions and CSRF (issue 13 item 3).
        Ok(Viewer {
            identity: None,
            csrf: String::new(),
        })
    }
}
