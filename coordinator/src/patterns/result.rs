//! What an agent is asked ([`PatternTask`]), what comes back
//! ([`AgentResult`]), and one round of a run ([`RoundRecord`]).

// The run record holds them, so their types live with the API.
pub use caucus_shared::api::coordinator::patterns::{AgentResult, PatternTask, RoundRecord};

/// The first `limit` characters of `s`, and whether anything was cut.
pub fn truncate_chars(s: &str, limit: usize) -> (String, bool) {
    match s.char_indices().nth(limit) {
        Some((cut, _)) => (s[..cut].to_string(), true),
        None => (s.to_string(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate_chars("héllo", 2), ("hé".to_string(), true));
        assert_eq!(truncate_chars("héllo", 5), ("héllo".to_string(), false));
        assert_eq!(truncate_chars("", 3), (String::new(), false));
    }
}
