//! Every durable consumer a restricted service reads, in one place.
//!
//! The coordinator and `caucus init` create them (they hold the rights to);
//! the services that read them (worker, facilitator, correlator) only bind
//! (see [`super::bind`]). Both sides build the names and configurations
//! here, from the same configuration, so they agree.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};

use crate::subjects::{encode_token, StreamKind, Subjects};
use crate::Config;

/// Durable name of the facilitator's debate-message consumer.
pub const FACILITATOR_DEBATES: &str = "facilitator";
/// Durable name of the facilitator's inbox (`caucus.msg.facilitator`).
pub const FACILITATOR_MESSAGES: &str = "facilitator-msg";
/// Durable name of the facilitator's macro-broadcast consumer.
pub const FACILITATOR_BROADCASTS: &str = "facilitator-broadcasts";
/// The facilitator's name on the message bus (`caucus.msg.facilitator`).
pub const FACILITATOR_NAME: &str = "facilitator";
/// Debate events the facilitator consumes (it publishes the others).
pub const FACILITATOR_EVENTS: [&str; 4] = ["challenge", "ack", "evidence", "verdict"];
/// Durable name of the correlator's failure consumer.
pub const CORRELATOR: &str = "correlator";

/// One durable pull consumer: the stream it reads and its configuration.
#[derive(Debug, Clone)]
pub struct ConsumerSpec {
    /// The stream's name (`CAUCUS_TASKS`, ...).
    pub stream: String,
    /// The consumer's configuration (its durable name is set).
    pub config: pull::Config,
    /// Who creates it, for the message a binder logs while it is missing.
    pub created_by: String,
}

impl ConsumerSpec {
    /// The durable name.
    pub fn name(&self) -> &str {
        self.config.durable_name.as_deref().unwrap_or_default()
    }
}

fn explicit(name: String, description: String, ack_wait: Duration) -> pull::Config {
    pull::Config {
        durable_name: Some(name),
        description: Some(description),
        ack_policy: AckPolicy::Explicit,
        deliver_policy: DeliverPolicy::All,
        ack_wait,
        ..Default::default()
    }
}

fn by_coordinator_for(agent_type: &str) -> String {
    format!(
        "the coordinator creates it when it sees a {agent_type} worker (or a built-in \
         pipeline uses the type); or run `caucus init --agent-types {agent_type}`"
    )
}

const BY_COORDINATOR: &str = "the coordinator creates it at start; or run `caucus init`";

/// Durable name of the shared task consumer of one agent type.
pub fn task_consumer_name(agent_type: &str) -> String {
    format!("workers-{}", encode_token(agent_type))
}

/// Durable name of an agent type's inbox consumer.
pub fn inbox_consumer_name(agent_type: &str) -> String {
    format!("agents-{}", encode_token(agent_type))
}

/// `workers-<agent_type>` on TASKS, filtered to `caucus.tasks.<agent_type>`.
pub fn task_consumer(
    subjects: &Subjects,
    agent_type: &str,
    ack_wait: Duration,
    max_deliver: i64,
) -> ConsumerSpec {
    let mut config = explicit(
        task_consumer_name(agent_type),
        format!("workers of agent type {agent_type}"),
        ack_wait,
    );
    config.filter_subject = subjects.tasks(agent_type);
    config.max_deliver = max_deliver;
    ConsumerSpec {
        stream: subjects.stream(StreamKind::Tasks),
        config,
        created_by: by_coordinator_for(agent_type),
    }
}

/// `agents-<agent_type>` on MESSAGES, filtered to `caucus.msg.<agent_type>`.
pub fn inbox_consumer(subjects: &Subjects, agent_type: &str, ack_wait: Duration) -> ConsumerSpec {
    let mut config = explicit(
        inbox_consumer_name(agent_type),
        format!("messages to built-in agent {agent_type}"),
        ack_wait,
    );
    config.filter_subject = subjects.msg(agent_type);
    ConsumerSpec {
        stream: subjects.stream(StreamKind::Messages),
        config,
        created_by: by_coordinator_for(agent_type),
    }
}

/// Both consumers of one agent type: its tasks and its inbox, with the
/// `[worker]` settings of `cfg`.
pub fn for_agent_type(subjects: &Subjects, cfg: &Config, agent_type: &str) -> Vec<ConsumerSpec> {
    vec![
        task_consumer(
            subjects,
            agent_type,
            cfg.worker.ack_wait,
            cfg.worker.max_deliver,
        ),
        inbox_consumer(subjects, agent_type, cfg.worker.ack_wait),
    ]
}

/// `facilitator` on DEBATES: the debate events it consumes.
pub fn facilitator_debates(subjects: &Subjects, ack_wait: Duration) -> ConsumerSpec {
    let mut config = explicit(
        FACILITATOR_DEBATES.into(),
        "debate messages for the facilitator".into(),
        ack_wait,
    );
    config.filter_subjects = FACILITATOR_EVENTS
        .iter()
        .map(|e| format!("{}.debates.*.{e}", subjects.prefix()))
        .collect();
    ConsumerSpec {
        stream: subjects.stream(StreamKind::Debates),
        config,
        created_by: BY_COORDINATOR.into(),
    }
}

/// `facilitator-msg` on MESSAGES: messages addressed to the facilitator.
pub fn facilitator_messages(subjects: &Subjects, ack_wait: Duration) -> ConsumerSpec {
    let mut config = explicit(
        FACILITATOR_MESSAGES.into(),
        "messages addressed to the facilitator".into(),
        ack_wait,
    );
    config.filter_subject = subjects.msg(FACILITATOR_NAME);
    ConsumerSpec {
        stream: subjects.stream(StreamKind::Messages),
        config,
        created_by: BY_COORDINATOR.into(),
    }
}

/// `facilitator-broadcasts` on MESSAGES: every macro broadcast from the
/// stream's start, applied in order (the last one wins).
pub fn facilitator_broadcasts(subjects: &Subjects, ack_wait: Duration) -> ConsumerSpec {
    let mut config = explicit(
        FACILITATOR_BROADCASTS.into(),
        "macro broadcasts: the facilitator's current regime".into(),
        ack_wait,
    );
    config.filter_subject = subjects.msg_all();
    ConsumerSpec {
        stream: subjects.stream(StreamKind::Messages),
        config,
        created_by: BY_COORDINATOR.into(),
    }
}

/// `correlator` on FAILURES: ack policy `all` (one ack per batch), new
/// deployments start at the stream's end (history is the replay's job).
pub fn correlator(subjects: &Subjects, ack_wait: Duration, fetch_batch: usize) -> ConsumerSpec {
    let config = pull::Config {
        durable_name: Some(CORRELATOR.into()),
        description: Some("failure events for the correlator".into()),
        filter_subject: subjects.failures_all(),
        ack_policy: AckPolicy::All,
        deliver_policy: DeliverPolicy::New,
        ack_wait,
        max_ack_pending: (fetch_batch * 32).clamp(1024, 1_000_000) as i64,
        ..Default::default()
    };
    ConsumerSpec {
        stream: subjects.stream(StreamKind::Failures),
        config,
        created_by: BY_COORDINATOR.into(),
    }
}

/// The consumers of fixed name (facilitator's and correlator's), with the
/// settings of `cfg`.
pub fn fixed(subjects: &Subjects, cfg: &Config) -> Vec<ConsumerSpec> {
    vec![
        facilitator_debates(subjects, cfg.facilitator.ack_wait),
        facilitator_messages(subjects, cfg.facilitator.ack_wait),
        facilitator_broadcasts(subjects, cfg.facilitator.ack_wait),
        correlator(
            subjects,
            cfg.correlator.ack_wait,
            cfg.correlator.fetch_batch,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_encode_the_agent_type() {
        let s = Subjects::default();
        assert_eq!(
            task_consumer(&s, "BRK.B", Duration::from_secs(1), 3).name(),
            "workers-BRK~2EB"
        );
        assert_eq!(
            inbox_consumer(&s, "valuation", Duration::from_secs(1)).name(),
            "agents-valuation"
        );
    }

    #[test]
    fn every_fixed_consumer_has_a_distinct_name_and_says_who_creates_it() {
        let s = Subjects::default();
        let all = fixed(&s, &Config::default());
        let mut names: Vec<_> = all.iter().map(|c| c.name().to_string()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 4);
        assert!(all.iter().all(|c| c.created_by.contains("caucus init")));
    }

    #[test]
    fn agent_type_consumers_read_tasks_and_messages() {
        let s = Subjects::default();
        let both = for_agent_type(&s, &Config::default(), "report");
        assert_eq!(both[0].stream, "CAUCUS_TASKS");
        assert_eq!(both[0].config.filter_subject, "caucus.tasks.report");
        assert_eq!(both[1].stream, "CAUCUS_MESSAGES");
        assert_eq!(both[1].config.filter_subject, "caucus.msg.report");
        assert!(both[0].created_by.contains("--agent-types report"));
    }
}
