//! Errors a page shows: a status and a specific message, as HTML.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

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
            PageError::Api(e) => api_status(e),
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        if matches!(self, PageError::Unauthenticated) {
            return axum::response::Redirect::to("/login").into_response();
        }
        let status = self.status();
        (status, error_page(status, &self.to_string())).into_response()
    }
}

/// The error page: the status and the specific message.
pub fn error_page(status: StatusCode, message: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { (status.as_u16()) " · caucus" } }
            body {
                h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
                p class="error" { (message) }
                p { a href="/" { "Back to the overview" } }
            }
        }
    }
}

/// The HTTP status for an API error code.
pub fn api_status(e: &ApiError) -> StatusCode {
    match e.code.as_str() {
        "not_found" => StatusCode::NOT_FOUND,
        "bad_request" | "invalid_field" | "missing_field" => StatusCode::BAD_REQUEST,
        "not_allowed" | "forbidden" => StatusCode::FORBIDDEN,
        "conflict"
        | "wrong_state"
        | "no_open_gate"
        | "workflow_finished"
        | "workflow_not_running"
        | "provisional_unreviewed"
        | "reruns_pending" => StatusCode::CONFLICT,
        "timeout" | "no_responders" | "standby" | "unavailable" | "store_unavailable" => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::BAD_GATEWAY,
    }
}
