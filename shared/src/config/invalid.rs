//! [`InvalidSetting`]: a setting that parses but breaks a rule.

/// A configuration value that breaks a rule serde cannot express; reads
/// `<key> <problem>`, e.g. `coordinator.submit_chunk must be at least 1`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} {problem}")]
pub struct InvalidSetting {
    /// The setting's dotted path, e.g. `coordinator.submit_chunk`.
    pub key: &'static str,
    /// What is wrong with it (may start with the offending value).
    pub problem: String,
}

impl InvalidSetting {
    /// `key` breaks the rule `problem`.
    pub fn new(key: &'static str, problem: impl Into<String>) -> Self {
        InvalidSetting {
            key,
            problem: problem.into(),
        }
    }
}
