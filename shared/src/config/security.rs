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

    /// The variable `caucus auth init` writes into the coordinator's and
    /// facilitator's env files reaches this key (either spelling).
    #[test]
    fn the_env_variable_sets_it() {
        for var in [
            "CAUCUS_SECURITY_REQUIRE_IDENTITY",
            "CAUCUS_SECURITY__REQUIRE_IDENTITY",
        ] {
            let c = crate::config::ConfigLoader::new()
                .env([(var.to_string(), "true".to_string())])
                .load()
                .unwrap();
            assert!(c.security.require_identity, "{var}");
        }
        let off = crate::config::ConfigLoader::new().load().unwrap();
        assert!(!off.security.require_identity);
    }
}
