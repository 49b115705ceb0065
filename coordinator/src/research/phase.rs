//! The research phase state machine (seed 004, "Coordination State
//! Machine"): INITIALIZING → DISCOVERING → CONSOLIDATING → VALIDATING →
//! ANALYZING → SYNTHESIZING → COMPLETE, and any unfinished phase → FAILED.

use serde::{Deserialize, Serialize};

/// One phase of a research run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Phase {
    /// Set-up (the workflow record exists, nothing dispatched).
    Initializing,
    /// Parallel discovery streams.
    Discovering,
    /// Merging the streams' sources.
    Consolidating,
    /// Fact-checking the merged sources.
    Validating,
    /// Patterns and insights.
    Analyzing,
    /// The report.
    Synthesizing,
    /// Report generated.
    Complete,
    /// Stopped by a failed gate, a time limit or a critical error.
    Failed,
}

/// A transition the state machine does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal research phase transition {from} → {to}")]
pub struct IllegalPhaseTransition {
    /// The phase the run is in.
    pub from: Phase,
    /// The phase asked for.
    pub to: Phase,
}

impl Phase {
    /// The phases that run a stage, in order.
    pub const WORKING: [Phase; 5] = [
        Phase::Discovering,
        Phase::Consolidating,
        Phase::Validating,
        Phase::Analyzing,
        Phase::Synthesizing,
    ];

    /// The spelling in status, audit and the seed.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Initializing => "INITIALIZING",
            Phase::Discovering => "DISCOVERING",
            Phase::Consolidating => "CONSOLIDATING",
            Phase::Validating => "VALIDATING",
            Phase::Analyzing => "ANALYZING",
            Phase::Synthesizing => "SYNTHESIZING",
            Phase::Complete => "COMPLETE",
            Phase::Failed => "FAILED",
        }
    }

    /// Parses the stage parameter `phase` (`discovering`, …, case-insensitive).
    pub fn parse_working(s: &str) -> Option<Phase> {
        Phase::WORKING
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s.trim()))
    }

    /// The one forward transition from here.
    pub fn next(self) -> Option<Phase> {
        Some(match self {
            Phase::Initializing => Phase::Discovering,
            Phase::Discovering => Phase::Consolidating,
            Phase::Consolidating => Phase::Validating,
            Phase::Validating => Phase::Analyzing,
            Phase::Analyzing => Phase::Synthesizing,
            Phase::Synthesizing => Phase::Complete,
            Phase::Complete | Phase::Failed => return None,
        })
    }

    /// COMPLETE or FAILED.
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Complete | Phase::Failed)
    }

    /// Checks `self → to`: the next phase, or FAILED from any unfinished one.
    pub fn transition(self, to: Phase) -> Result<Phase, IllegalPhaseTransition> {
        let legal = self.next() == Some(to) || (to == Phase::Failed && !self.is_terminal());
        if legal {
            Ok(to)
        } else {
            Err(IllegalPhaseTransition { from: self, to })
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_seed_transitions_are_legal() {
        let mut p = Phase::Initializing;
        for expected in [
            Phase::Discovering,
            Phase::Consolidating,
            Phase::Validating,
            Phase::Analyzing,
            Phase::Synthesizing,
            Phase::Complete,
        ] {
            p = p.transition(expected).unwrap();
        }
        assert_eq!(p, Phase::Complete);
        assert!(Phase::Complete.transition(Phase::Failed).is_err());
        assert!(Phase::Failed.transition(Phase::Discovering).is_err());
        let e = Phase::Discovering
            .transition(Phase::Validating)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "illegal research phase transition DISCOVERING → VALIDATING"
        );
        assert!(Phase::Analyzing.transition(Phase::Consolidating).is_err());
        for p in Phase::WORKING {
            assert_eq!(p.transition(Phase::Failed), Ok(Phase::Failed));
        }
        assert_eq!(Phase::parse_working("validating"), Some(Phase::Validating));
        assert_eq!(Phase::parse_working("complete"), None);
    }
}
