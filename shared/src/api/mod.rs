//! The control API's contract: one request and one reply type per
//! operation, for the services that serve it and every client (the CLI,
//! the coordinator's calls to the facilitator, the console, the tests).
//!
//! An operation is a marker type implementing [`Operation`]: its service,
//! its name (the last token of `caucus.api.<service>.<operation>`), its
//! request and reply types and the error codes it may answer besides the
//! common ones ([`COMMON_ERRORS`]). Services register a handler with
//! [`crate::nats::ApiServer::op`] (or [`crate::service::Service::op`]);
//! clients call it with [`ApiClient::call`]. docs/PROTOCOL.md's table of
//! operations is generated from [`catalog`] and a test keeps it so.
//!
//! Compatibility: replies gain fields without notice (clients ignore
//! fields they do not know, so reply types never deny unknown fields);
//! renaming or removing a field, or changing its meaning, is a new
//! operation. Requests deny unknown fields where a typo would silently
//! change the result.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub mod client;
pub mod coordinator;
pub mod correlator;
mod decode;
mod error;
pub mod facilitator;
mod health;
pub mod identity;
pub mod server;

pub use client::ApiClient;
pub use health::{Health, HealthReply};

pub use server::{
    ApiError, CODE_BAD_REPLY, CODE_BAD_REQUEST, CODE_INTERNAL, CODE_NOT_FOUND, CODE_NO_RESPONDERS,
    CODE_REPLY_TOO_LARGE, CODE_TIMEOUT, CODE_UNKNOWN_OPERATION,
};

/// Codes any operation may answer (PROTOCOL.md §8); an operation's
/// [`Operation::ERRORS`] lists only the others.
pub const COMMON_ERRORS: &[&str] = &[
    CODE_BAD_REQUEST,
    CODE_UNKNOWN_OPERATION,
    CODE_INTERNAL,
    CODE_REPLY_TOO_LARGE,
];

/// A coordinator that stands by (another instance leads) answers a
/// leader-only operation with this code; [`ApiClient`] retries it.
pub const CODE_STANDBY: &str = "standby";

/// One operation of the control API.
pub trait Operation {
    /// The service that answers it (`coordinator`, `facilitator`, …).
    const SERVICE: &'static str;
    /// Its name: the last token of `caucus.api.<service>.<operation>`.
    const NAME: &'static str;
    /// What it does, one line (the "does" column of PROTOCOL.md §8).
    const SUMMARY: &'static str;
    /// Error codes it may answer besides [`COMMON_ERRORS`].
    const ERRORS: &'static [&'static str];
    /// Whether it changes state: only the `operator` role may call such an
    /// operation when authentication is on (docs/SECURITY.md).
    const MUTATES: bool = false;
    /// The request field naming the person who acts (`decided_by`, …),
    /// which the API server sets from the caller's authenticated identity
    /// when there is one, instead of trusting the body.
    const ACTOR_FIELD: Option<&'static str> = None;
    /// The request body. An empty body is read as `{}`.
    type Request: Serialize + DeserializeOwned + Send + Sync + 'static;
    /// The reply body (an error is `{"error": {...}}` instead).
    type Reply: Serialize + DeserializeOwned + Send + Sync + 'static;
}

/// What the catalog (and PROTOCOL.md's table) says of one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationDoc {
    /// [`Operation::SERVICE`].
    pub service: &'static str,
    /// [`Operation::NAME`].
    pub name: &'static str,
    /// [`Operation::SUMMARY`].
    pub summary: &'static str,
    /// [`Operation::ERRORS`].
    pub errors: &'static [&'static str],
    /// [`Operation::MUTATES`].
    pub mutates: bool,
    /// [`Operation::ACTOR_FIELD`].
    pub actor_field: Option<&'static str>,
}

impl OperationDoc {
    /// The entry of `O`.
    pub const fn of<O: Operation>() -> OperationDoc {
        OperationDoc {
            service: O::SERVICE,
            name: O::NAME,
            summary: O::SUMMARY,
            errors: O::ERRORS,
            mutates: O::MUTATES,
            actor_field: O::ACTOR_FIELD,
        }
    }

    /// `caucus.api.<service>.<name>` under the default prefix.
    pub fn subject(&self) -> String {
        format!("caucus.api.{}.{}", self.service, self.name)
    }
}

/// Every operation of every service, `health` first, then by service.
pub fn catalog() -> Vec<OperationDoc> {
    let mut all = vec![OperationDoc::of::<Health>()];
    all.extend(coordinator::operations());
    all.extend(correlator::operations());
    all.extend(facilitator::operations());
    all
}

/// The request of operations that take no parameters: `{}` (or nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// PROTOCOL.md §8's table of operations, as [`catalog`] describes them.
pub fn operations_table() -> String {
    let mut out =
        String::from("| subject | does | errors besides the common ones |\n|---|---|---|\n");
    for op in catalog() {
        let subject = if op.name == Health::NAME {
            "caucus.api.<service>.health".to_string()
        } else {
            op.subject()
        };
        let errors = if op.errors.is_empty() {
            "–".to_string()
        } else {
            op.errors
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!("| `{subject}` | {} | {errors} |\n", op.summary));
    }
    out
}

/// How long [`ApiClient`] waits for an answer unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- operations:begin (generated from shared::api::catalog; CAUCUS_BLESS=1 cargo test -p caucus-shared operations_table rewrites it) -->\n";
    const END: &str = "<!-- operations:end -->";

    /// PROTOCOL.md's table is the catalog's: an operation added, renamed
    /// or given a new error code in the types shows up as a failing diff
    /// here until the docs say the same.
    #[test]
    fn protocol_md_operations_table_matches_the_types() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/PROTOCOL.md");
        let doc = std::fs::read_to_string(path).expect("docs/PROTOCOL.md");
        let start = doc.find(BEGIN).map(|i| i + BEGIN.len());
        let end = doc.find(END);
        let (Some(start), Some(end)) = (start, end) else {
            panic!("docs/PROTOCOL.md lacks the operations markers:\n{BEGIN}{END}");
        };
        let want = operations_table();
        if doc[start..end] != want {
            if std::env::var_os("CAUCUS_BLESS").is_some() {
                let new = format!("{}{}{}", &doc[..start], want, &doc[end..]);
                std::fs::write(path, new).expect("write PROTOCOL.md");
                return;
            }
            panic!(
                "docs/PROTOCOL.md §8's table differs from shared::api::catalog(); \
                 run CAUCUS_BLESS=1 cargo test -p caucus-shared operations_table\n\
                 --- in the docs ---\n{}\n--- from the types ---\n{want}",
                &doc[start..end]
            );
        }
    }

    #[test]
    fn every_operation_is_listed_once_with_codes_not_common() {
        let all = catalog();
        let mut seen = std::collections::BTreeSet::new();
        for op in &all {
            assert!(
                seen.insert((op.service, op.name)),
                "{}.{} listed twice",
                op.service,
                op.name
            );
            assert!(
                !op.summary.is_empty(),
                "{}.{} has no summary",
                op.service,
                op.name
            );
            for c in op.errors {
                assert!(
                    !COMMON_ERRORS.contains(c),
                    "{}.{} lists the common code {c}",
                    op.service,
                    op.name
                );
            }
        }
    }
}
