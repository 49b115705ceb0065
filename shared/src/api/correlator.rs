//! The correlator's operations (`caucus.api.correlator.<operation>`):
//! `correlations` and `alerts`.

use super::OperationDoc;

/// The service's name in API subjects.
pub const SERVICE: &str = "correlator";

/// Every operation of the correlator.
pub fn operations() -> Vec<OperationDoc> {
    DOCS.to_vec()
}

const DOCS: &[OperationDoc] = &[];
