//! The roles a NATS or Redis user can have.

use std::fmt;

/// Who connects: a caucus service, a person or an outside service.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Schedules work; the only service that administers streams,
    /// consumers and buckets.
    Coordinator,
    /// Runs agents: fetches and acks tasks, publishes their results.
    Worker,
    /// Runs debates.
    Facilitator,
    /// Correlates failures.
    Correlator,
    /// The CLI: every API operation, on bare subjects.
    Operator,
    /// The web console: the operator's reads, every mutating operation
    /// as whichever person is logged in (`….as.<person>`), and the event
    /// subjects its live updates follow.
    Console,
    /// An outside service: publishes findings and failures only.
    Publisher,
    /// Full rights: `caucus init` and a person repairing things; never a
    /// running service.
    Admin,
    /// One person: read operations bare, mutating operations only on
    /// `….as.<name>` (their own identity).
    Person(String),
}

/// The fixed roles, in the order files and tables list them.
pub const ROLES: [Role; 8] = [
    Role::Coordinator,
    Role::Worker,
    Role::Facilitator,
    Role::Correlator,
    Role::Operator,
    Role::Console,
    Role::Publisher,
    Role::Admin,
];

/// Longest person name accepted (it becomes a subject token and a file
/// name).
pub const MAX_PERSON_LEN: usize = 64;

impl Role {
    /// The NATS and Redis user name: the role's name, `operator-<name>`
    /// for a person (so a person named `worker` is not the worker).
    pub fn user(&self) -> String {
        match self {
            Role::Person(name) => format!("operator-{name}"),
            r => r.name().to_string(),
        }
    }

    /// The fixed role's name (`operator` for a person).
    pub fn name(&self) -> &'static str {
        match self {
            Role::Coordinator => "coordinator",
            Role::Worker => "worker",
            Role::Facilitator => "facilitator",
            Role::Correlator => "correlator",
            Role::Operator | Role::Person(_) => "operator",
            Role::Console => "console",
            Role::Publisher => "publisher",
            Role::Admin => "admin",
        }
    }

    /// The env file's name: `<role>.env`, `operator-<name>.env`.
    pub fn env_file(&self) -> String {
        format!("{}.env", self.user())
    }

    /// Whether the role connects to Redis (the CLI, the console and
    /// outside services need only NATS).
    pub fn uses_redis(&self) -> bool {
        !matches!(
            self,
            Role::Operator | Role::Person(_) | Role::Publisher | Role::Console
        )
    }

    /// Whether the role's services must name who acts
    /// (`security.require_identity`): the services that serve mutating
    /// operations.
    pub fn requires_identity(&self) -> bool {
        matches!(self, Role::Coordinator | Role::Facilitator)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.user())
    }
}

/// Checks a person's name: 1..=64 of `[A-Za-z0-9_-]` (a subject token
/// without encoding, a file name, a NATS user name).
pub fn validate_person(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_PERSON_LEN {
        return Err(format!(
            "operator name must be 1..={MAX_PERSON_LEN} characters, got {}",
            name.len()
        ));
    }
    match name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        Some(c) => Err(format!(
            "operator name `{name}`: character {c:?} is not allowed (only [A-Za-z0-9_-])"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_person_is_an_operator_user_of_their_own() {
        let p = Role::Person("worker".into());
        assert_eq!(p.user(), "operator-worker");
        assert_eq!(p.env_file(), "operator-worker.env");
        assert_ne!(p.user(), Role::Worker.user());
        assert!(!p.uses_redis());
    }

    #[test]
    fn person_names_are_plain_tokens() {
        assert!(validate_person("alice_b-2").is_ok());
        for bad in ["", "a.b", "a b", "a*", "ü", &"x".repeat(65)] {
            assert!(validate_person(bad).is_err(), "{bad:?}");
        }
    }
}
