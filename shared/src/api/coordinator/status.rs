//! `status`: workflows, their tasks and the load per agent type.

use crate::api::OperationDoc;

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[];
