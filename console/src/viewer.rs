//! Who is looking: the person (when authentication is on) and the CSRF
//! token every form of the page must carry.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use caucus_shared::api::ApiClient;

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
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = crate::error::PageError;

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
