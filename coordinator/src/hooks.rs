//! The rule sets plugged into every workflow record's transitions
//! ([`crate::workflow::RecordHook`]). This module is where the core record
//! and the optional rule sets meet, so neither names the other.

use crate::research::ResearchHook;
use crate::workflow::{LevelReviewHook, RecordHook};

static HOOKS: [&dyn RecordHook; 2] = [&ResearchHook, &LevelReviewHook];

/// Every hook, in the order they are called: research first (its quality
/// gate decides before anything downstream starts), then level review.
pub(crate) fn record_hooks() -> &'static [&'static dyn RecordHook] {
    &HOOKS
}
