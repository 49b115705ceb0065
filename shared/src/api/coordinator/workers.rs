//! `workers`: registered workers, capacity, queue depth and the live bottleneck.

use crate::api::OperationDoc;

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[];
