//! `caucus-console`: the web console for the people at the gates and the
//! team running caucus (docs/CONSOLE.md).
//!
//! Server-rendered HTML ([`layout`], one module per page in [`pages`]),
//! live updates over Server-Sent Events ([`events`]), and nothing stored
//! here: every figure comes from the NATS control API and streams, every
//! action goes back through it as the person logged in ([`viewer`]), so
//! any number of consoles can run behind a load balancer.

pub mod error;
pub mod events;
pub mod layout;
pub mod pages;
pub mod state;
pub mod viewer;

pub use state::AppState;

/// The whole console's routes.
pub fn router(state: AppState) -> axum::Router {
    pages::routes().merge(events::routes()).with_state(state)
}
