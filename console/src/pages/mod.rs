//! One module per page; each owns its routes (GET and the POST actions).

pub mod alerts;
pub mod debates;
pub mod gates;
pub mod login;
pub mod overview;
pub mod plan;
pub mod workflow;

use axum::Router;

use crate::state::AppState;

/// Every page's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(overview::routes())
        .merge(workflow::routes())
        .merge(plan::routes())
        .merge(gates::routes())
        .merge(debates::routes())
        .merge(alerts::routes())
        .merge(login::routes())
}
