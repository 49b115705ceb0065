//! Messages from other agents and outside services (issue #17): the
//! coordinator reads every finding on `caucus.findings.<item>` and every
//! message on `caucus.msg.>`, and
//!
//! - hands a finding addressed to an agent type ([`caucus_shared::messages::addressing`])
//!   to that type's next tasks for the item, in `inputs.findings`
//!   ([`index`], read at dispatch by the scheduler);
//! - flags the unfinished workflows of the item for re-evaluation when a
//!   high or critical finding arrives after its addressee's task completed
//!   ([`late`]);
//! - waits for the `confirmation` of every message sent with
//!   `requires_response`, and sends an alert card when none comes in time
//!   ([`responses`]);
//! - turns a `request` into work (`runtime/requests`) and an outside
//!   service's `alert` into an alert card ([`messages`]).
//!
//! Bodies that do not decode, findings addressed to no known agent type and
//! requests that cannot be served go to the DLQ with the reason.

mod awaiting;
pub mod classify;
mod context;
pub mod findings;
pub mod hold;
pub mod index;
pub mod late;
pub mod messages;
pub mod replay;
pub mod responses;
mod settle;
mod watch;

pub use context::Inbound;
pub use index::{FindingsIndex, TaskLimits};
pub use watch::run as watch;

pub use late::{LateFinding, LATE_FINDING};
pub use responses::{Answer, ResponseRecord, ResponseStore, RESPONSES_BUCKET};
