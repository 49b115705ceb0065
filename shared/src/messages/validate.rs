//! Small checks shared by the content types, and [`ValidationError`], the
//! reason that ends up in `DecodeError::InvalidContent` (and so in DLQ
//! records): each message reads as the text the checks always gave.

/// Why a message's content fails a check serde cannot express; the text
/// names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValidationError {
    /// A number that must lie within 0..=1 does not.
    #[error("{field}: must be within 0..=1, got {value}")]
    OutOfUnitInterval {
        /// The field's path, e.g. `position.confidence`.
        field: String,
        /// The value received.
        value: f64,
    },
    /// A text field holds only white space (or nothing).
    #[error("{field}: must not be empty")]
    Empty {
        /// The field's path.
        field: String,
    },
    /// A list that needs at least one entry is empty.
    #[error("{field}: must list at least one entry")]
    EmptyList {
        /// The field's name.
        field: &'static str,
    },
    /// A field breaks a fixed rule, e.g. `attempt: starts at 1`.
    #[error("{field}: {rule}")]
    Rule {
        /// The field's name.
        field: &'static str,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// A debate level outside 1..=5.
    #[error("{field}: debate levels are 1..=5, got {level}")]
    Level {
        /// `level`, `from_level` or `to_level`.
        field: &'static str,
        /// The level received.
        level: u8,
    },
    /// An escalation that does not go up.
    #[error("to_level {to} must be above from_level {from}")]
    LevelOrder {
        /// The level escalated from.
        from: u8,
        /// The level escalated to.
        to: u8,
    },
    /// A challenge whose challenger is the challenged agent.
    #[error("challenger and challenged are both `{agent}`: an agent cannot challenge itself")]
    SelfChallenge {
        /// The agent on both sides.
        agent: String,
    },
    /// A macro broadcast's confidence outside 0..=1.
    #[error("confidence must be within 0..=1, got {0}")]
    Confidence(f64),
    /// A number that must be finite is NaN or infinite.
    #[error("{0} must be a finite number")]
    NotFinite(String),
    /// A field an event of its type needs is missing.
    #[error("a {event} needs {field}")]
    Missing {
        /// The event, e.g. `regime_change`.
        event: &'static str,
        /// The missing field.
        field: &'static str,
    },
    /// An `event_type` that is not a macro broadcast.
    #[error("event_type `{0}` is not a macro broadcast; use `{re}` or `{ra}`", re = super::broadcast::REGIME_CHANGE, ra = super::broadcast::RATE_ANNOUNCEMENT)]
    NotMacroEvent(String),
}

/// `value` must be a finite number within 0..=1.
pub(crate) fn unit_interval(field: &str, value: f64) -> Result<(), ValidationError> {
    if value.is_finite() && (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(ValidationError::OutOfUnitInterval {
            field: field.to_string(),
            value,
        })
    }
}

/// Like [`unit_interval`] for an optional value.
pub(crate) fn opt_unit_interval(field: &str, value: Option<f64>) -> Result<(), ValidationError> {
    value.map_or(Ok(()), |v| unit_interval(field, v))
}

/// `value` must contain something other than white space.
pub(crate) fn non_empty(field: &str, value: &str) -> Result<(), ValidationError> {
    if value.trim().is_empty() {
        Err(ValidationError::Empty {
            field: field.to_string(),
        })
    } else {
        Ok(())
    }
}

/// The list must have at least one element.
pub(crate) fn non_empty_list<T>(field: &'static str, value: &[T]) -> Result<(), ValidationError> {
    if value.is_empty() {
        Err(ValidationError::EmptyList { field })
    } else {
        Ok(())
    }
}
