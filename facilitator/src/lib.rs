//! caucus facilitator.
