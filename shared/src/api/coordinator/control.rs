//! `pause`, `resume`, `batch_pause`, `batch_resume`, `batch_status`.

use crate::api::OperationDoc;

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[];
