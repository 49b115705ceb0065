//! Typed `content` for every [`crate::envelope::MessageType`].
//!
//! One file per message family. Every struct ignores unknown fields (so newer
//! senders stay readable) and defaults the fields the seeds leave out. Each
//! implements [`MessageContent`], which ties it to its message type and adds
//! the checks serde cannot express (e.g. a confidence within 0..=1).

pub mod addressing;
mod alert;
pub mod broadcast;
mod challenge;
mod content;
mod debate;
mod exchange;
mod failure;
mod finding;
mod pause;
mod validate;

pub use addressing::{addresses, agent_type_of, Addressee};
pub use alert::Alert;
pub use broadcast::{
    critical_broadcast, BelowThreshold, BroadcastError, MacroBroadcast, MacroEvent, NotCritical,
};
pub use challenge::{assumption_value, debate_metric, Challenge, ChallengePriority, Position};
pub(crate) use content::typed;
pub use content::{Content, MessageContent};
pub use debate::{
    DebateAck, DebateEscalation, DebateEvidence, DebateResolution, DebateVerdict, ResolutionMethod,
};
pub use exchange::{Confirmation, Request, FLUSH_WORKING_MEMORY};
pub use failure::{AgentFailureEvent, BatchTrigger, CorrelationDetected};
pub use finding::{Finding, FindingWithPrecedent, HistoricalContext, SimilarPattern};
pub use pause::{BatchPauseRequest, PauseComplete, PauseRequest, ResumeCommand, ResumePlan};
pub use validate::ValidationError;
