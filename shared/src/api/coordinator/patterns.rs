//! `run_pattern` and `pattern_status`: coordination patterns.

use crate::api::OperationDoc;

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[];
