//! The two sides of a debate.

use serde::{Deserialize, Serialize};

/// Which party of a debate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The agent that raised the challenge.
    Challenger,
    /// The agent whose finding is disputed.
    Challenged,
}

impl Side {
    /// The other side.
    pub fn other(self) -> Side {
        match self {
            Side::Challenger => Side::Challenged,
            Side::Challenged => Side::Challenger,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Challenger => "challenger",
            Side::Challenged => "challenged",
        }
    }
}

/// A word that names no side (`caucus decide --side`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a side: challenger or challenged")]
pub struct UnknownSide(pub String);

impl std::str::FromStr for Side {
    type Err = UnknownSide;

    fn from_str(s: &str) -> Result<Side, UnknownSide> {
        match s {
            "challenger" => Ok(Side::Challenger),
            "challenged" => Ok(Side::Challenged),
            other => Err(UnknownSide(other.to_string())),
        }
    }
}
