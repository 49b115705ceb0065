//! The coordinator's operations (`caucus.api.coordinator.<operation>`).

use super::OperationDoc;

pub mod audit;
pub mod control;
pub mod gates;
pub mod partitions;
pub mod patterns;
pub mod plan;
pub mod scaling;
pub mod status;
pub mod submit;
pub mod workers;

/// The service's name in API subjects.
pub const SERVICE: &str = "coordinator";

/// Every operation of the coordinator, in the order PROTOCOL.md lists them.
pub fn operations() -> Vec<OperationDoc> {
    [
        submit::DOCS,
        status::DOCS,
        plan::DOCS,
        workers::DOCS,
        partitions::DOCS,
        scaling::DOCS,
        control::DOCS,
        gates::DOCS,
        audit::DOCS,
        patterns::DOCS,
    ]
    .concat()
}
