//! Errors a page shows: a status and a specific message, as HTML.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use caucus_shared::nats::ApiError;

/// Why a page or an action could not be served.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// Unknown workflow, gate, debate, …
    #[error("{0}")]
    NotFound(String),
    /// The form or query is wrong (says which field and why).
    #[error("{0}")]
    BadRequest(String),
    /// Not logged in (the handler redirects to the login page).
    #[error("log in first")]
    Unauthenticated,
    /// Logged in, but the request is refused (e.g. a missing CSRF token).
    #[error("{0}")]
    Forbidden(String),
    /// The control API answered with an error or not at all.
    #[error("{0}")]
    Api(#[from] ApiError),
}

impl PageError {
    /// The HTTP status it is served with.
    pub fn status(&self) -> StatusCode {
        match self {
            PageError::NotFound(_) => StatusCode::NOT_FOUND,
            PageError::BadRequest(_) => StatusCode::BAD_REQUEST,
            PageError::Unauthenticated => StatusCode::UNAUTHORIZED,
            PageError::Forbidden(_) => StatusCode::FORBIDDEN,
            PageError::Api(e) => crate::layout::api_status(e),
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        if matches!(self, PageError::Unauthenticated) {
            return axum::response::Redirect::to("/login").into_response();
        }
        let status = self.status();
        (status, crate::layout::error_page(status, &self.to_string())).into_response()
    }
}
