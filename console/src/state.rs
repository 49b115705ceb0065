//! What every handler gets: the typed API client and the configuration.

use std::sync::Arc;

use caucus_shared::api::ApiClient;
use caucus_shared::config::ConsoleConfig;
use caucus_shared::Config;

/// Shared, cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The control API as the console's own NATS user; actions go out
    /// `with_identity(<person>)` (see [`crate::viewer::Viewer::api`]).
    pub api: ApiClient,
    /// The whole configuration (subjects prefix, timeouts, `[console]`).
    pub config: Arc<Config>,
}

impl AppState {
    /// The `[console]` section.
    pub fn console(&self) -> &ConsoleConfig {
        &self.config.console
    }
}
