//! `caucus-console`: the web console for the people at the gates and the
//! team running caucus (docs/CONSOLE.md).
//!
//! Server-rendered HTML ([`layout`], one module per page in [`pages`]),
//! live updates over Server-Sent Events ([`events`]), and nothing stored
//! here: every figure comes from the NATS control API and streams, every
//! action goes back through it as the person logged in ([`viewer`],
//! [`auth`]), so any number of consoles can run behind a load balancer.
//! [`server`] is the process around it.

pub mod auth;
pub mod error;
pub mod events;
pub mod layout;
pub mod pages;
pub mod server;
pub mod state;
pub mod viewer;

use std::sync::Arc;

pub use auth::{Auth, AuthError};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

use crate::viewer::Viewer;
pub use state::AppState;

/// The whole console's routes, with authentication as `[console]` says
/// (keys from `console.session_secret`, or random for this router).
pub fn router(state: AppState) -> Result<axum::Router, AuthError> {
    let auth = Arc::new(Auth::from_config(state.console())?);
    Ok(app(state, auth))
}

/// The whole console's routes with `auth`.
pub fn app(state: AppState, auth: Arc<Auth>) -> axum::Router {
    // The live events say which workflows changed: for people logged in
    // only, like the pages.
    let events = events::routes().route_layer(axum::middleware::from_fn_with_state(
        state.clone(),
        signed_in,
    ));
    pages::routes()
        .merge(events)
        .with_state(state)
        .layer(axum::middleware::from_fn(move |req, next| {
            auth::layer(auth.clone(), req, next)
        }))
}

/// Lets the request through only when [`Viewer`] accepts it (else its
/// redirect to the login, 401 or 403).
async fn signed_in(_viewer: Viewer, req: Request, next: Next) -> Response {
    next.run(req).await
}
