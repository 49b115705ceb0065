//! The facilitator's operations (`caucus.api.facilitator.<operation>`) and
//! the data they carry: debate records and summaries, resolutions, impact
//! reports and credibility scores. The facilitator keeps these plain data
//! types here and re-exports them, so its replies and every client share
//! one definition; its own `Debate` (which carries the state machine) is
//! mirrored by [`DebateRecord`].

use super::OperationDoc;

pub mod credibility;
pub mod debates;
pub mod impact;
pub mod provisional;
pub mod record;
pub mod resolution;
pub mod scores;
pub mod side;

pub use credibility::*;
pub use debates::*;
pub use impact::*;
pub use provisional::*;
pub use record::*;
pub use resolution::*;
pub use scores::*;
pub use side::*;

/// The service's name in API subjects.
pub const SERVICE: &str = "facilitator";

/// Every operation of the facilitator, in the order PROTOCOL.md lists them.
pub fn operations() -> Vec<OperationDoc> {
    [debates::DOCS, provisional::DOCS, credibility::DOCS].concat()
}
