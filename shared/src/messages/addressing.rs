//! Who a message is for: the `to_agent` of an envelope, read as an agent
//! type.
//!
//! The seed names agents by role (`valuation_agent`, `financial_analyst`)
//! while pipelines name agent types (`valuation`, `financial`). Both forms
//! address the same type: a `to_agent` of `<type>`, `<type>_agent` or
//! `<type>_analyst` addresses agent type `<type>` (compared without regard
//! to case); `all` addresses every agent type of the item's pipeline.

/// Suffixes the seed's role names carry after the agent type.
const ROLE_SUFFIXES: [&str; 2] = ["_agent", "_analyst"];

/// The addressee of a message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Addressee {
    /// Every agent type (`to_agent` = `all`).
    All,
    /// One agent type, in its pipeline spelling (`valuation`).
    Type(String),
}

impl Addressee {
    /// Reads a `to_agent`; `None` when it is empty or white space.
    pub fn parse(to_agent: &str) -> Option<Addressee> {
        let t = to_agent.trim();
        if t.is_empty() {
            return None;
        }
        if t.eq_ignore_ascii_case("all") {
            return Some(Addressee::All);
        }
        Some(Addressee::Type(agent_type_of(t).to_string()))
    }

    /// Whether this addressee includes agent type `agent_type`.
    pub fn includes(&self, agent_type: &str) -> bool {
        match self {
            Addressee::All => true,
            Addressee::Type(t) => t.eq_ignore_ascii_case(agent_type),
        }
    }

    /// The agent type, or `None` for `all`.
    pub fn agent_type(&self) -> Option<&str> {
        match self {
            Addressee::All => None,
            Addressee::Type(t) => Some(t),
        }
    }
}

impl std::fmt::Display for Addressee {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Addressee::All => f.write_str("all"),
            Addressee::Type(t) => f.write_str(t),
        }
    }
}

/// The agent type a role name stands for: `valuation_agent` → `valuation`,
/// `financial_analyst` → `financial`, `valuation` → `valuation`.
pub fn agent_type_of(name: &str) -> &str {
    let lower = name.to_ascii_lowercase();
    for suffix in ROLE_SUFFIXES {
        if lower.len() > suffix.len() && lower.ends_with(suffix) {
            return &name[..name.len() - suffix.len()];
        }
    }
    name
}

/// Whether `to_agent` addresses agent type `agent_type`.
pub fn addresses(to_agent: &str, agent_type: &str) -> bool {
    Addressee::parse(to_agent).is_some_and(|a| a.includes(agent_type))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_names_and_bare_types_address_the_same_type() {
        assert!(addresses("valuation_agent", "valuation"));
        assert!(addresses("valuation", "valuation"));
        assert!(addresses("Valuation_Agent", "valuation"));
        assert!(addresses("financial_analyst", "financial"));
        assert!(addresses("all", "valuation"));
        assert!(addresses("ALL", "strategy"));
        assert!(!addresses("valuation_agent", "financial"));
        assert!(!addresses("", "valuation"));
        assert!(!addresses("  ", "valuation"));
    }

    #[test]
    fn a_bare_suffix_is_a_type_of_its_own() {
        assert_eq!(agent_type_of("_agent"), "_agent");
        assert_eq!(agent_type_of("agent"), "agent");
        assert_eq!(agent_type_of("macro"), "macro");
        assert_eq!(Addressee::parse("all"), Some(Addressee::All));
        assert_eq!(
            Addressee::parse("valuation_agent").unwrap().to_string(),
            "valuation"
        );
    }
}
