//! What a built-in agent hands back to the runtime that ran it: the task's
//! output, findings to publish and other messages to send. The worker turns
//! these into its handler output; nothing here knows about NATS.

use serde_json::Value;

use caucus_shared::envelope::Envelope;

/// Where an [`AgentMessage`] goes.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageTarget {
    /// `caucus.debates.<debate_id>.<event>`.
    Debate {
        /// The debate.
        debate_id: String,
        /// `challenge`, `ack`, `evidence`, `verdict`.
        event: String,
    },
    /// `caucus.msg.all`.
    Broadcast,
}

/// An envelope an agent wants published besides its findings (a challenge,
/// a macro broadcast); its id is the `Nats-Msg-Id`, so a re-run task does
/// not publish it twice.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentMessage {
    /// Where it goes.
    pub target: MessageTarget,
    /// The message.
    pub envelope: Envelope,
}

/// A successful run of a built-in agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOutput {
    /// The task's result.
    pub output: Value,
    /// Finding contents (the `finding` message shape) to publish on
    /// `caucus.findings.<item>`.
    pub findings: Vec<Value>,
    /// Other messages to publish (before the completion is reported).
    pub messages: Vec<AgentMessage>,
}

impl AgentOutput {
    /// Output without findings or messages.
    pub fn plain(output: Value) -> Self {
        AgentOutput {
            output,
            findings: Vec::new(),
            messages: Vec::new(),
        }
    }
}
