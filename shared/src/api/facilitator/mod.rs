//! The facilitator's operations (`caucus.api.facilitator.<operation>`).

use super::OperationDoc;

pub mod credibility;
pub mod debates;
pub mod provisional;

/// The service's name in API subjects.
pub const SERVICE: &str = "facilitator";

/// Every operation of the facilitator, in the order PROTOCOL.md lists them.
pub fn operations() -> Vec<OperationDoc> {
    [debates::DOCS, provisional::DOCS, credibility::DOCS].concat()
}
