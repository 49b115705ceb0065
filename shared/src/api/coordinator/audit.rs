//! `audit`: a research run's audit trail.

use crate::api::OperationDoc;

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[];
