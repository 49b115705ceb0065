//! `debates`, `debate`, `expert_load`, `decide`: debates and the experts' queues.

use crate::api::OperationDoc;

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[];
