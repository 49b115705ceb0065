//! `[security]`: how the API treats the identity of its callers.

use serde::{Deserialize, Serialize};

/// Security settings of a service's API (docs/SECURITY.md, "Who decided").
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct SecurityConfig {
    /// Whether the person a mutating request names (its
    /// [`crate::api::Operation::ACTOR_FIELD`], e.g. a gate decision's
    /// `reviewer`) always comes from the caller's authenticated identity
    /// (`CAUCUS_SECURITY_REQUIRE_IDENTITY`). True: a request on
    /// `….<op>.as.<identity>` acts as `<identity>`, one on the bare subject
    /// as the shared `operator` role, whatever the body says. False (the
    /// default, for deployments without authentication): the `.as.` token
    /// still wins, but a bare request keeps the name its body gives.
    pub require_identity: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_not_required_unless_configured() {
        assert!(!SecurityConfig::default().require_identity);
        let on: SecurityConfig = toml::from_str("require_identity = true").unwrap();
        assert!(on.require_identity);
    }
}
