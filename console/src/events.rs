//! `GET /events`: Server-Sent Events telling open pages that something
//! they show changed (a workflow's state, a gate, a debate, an alert).

use axum::Router;

use crate::state::AppState;

/// The live-update routes.
pub fn routes() -> Router<AppState> {
    Router::new()
}
