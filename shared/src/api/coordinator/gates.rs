//! `gates`, `gate`, `gate_decide`, `gate_review`, `rerun`: human gates and their decision packages.

use crate::api::OperationDoc;

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[];
