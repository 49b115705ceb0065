//! The `gates` page (issue 13 item 2).

use axum::Router;

use crate::state::AppState;

/// Its routes.
pub fn routes() -> Router<AppState> {
    Router::new()
}
