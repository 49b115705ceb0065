//! What each role may publish and subscribe to on NATS (docs/PROTOCOL.md
//! §1, §8; docs/SECURITY.md has the generated matrix).
//!
//! JetStream is driven through subjects too, so the JetStream rights are
//! subject rights: `$JS.API.STREAM.INFO.<stream>` to bind to a stream,
//! `$JS.API.CONSUMER.INFO.<stream>.*` to bind to a consumer,
//! `$JS.API.CONSUMER.MSG.NEXT.<stream>.*` to fetch, `$JS.ACK.<stream>.>`
//! to ack, nak and signal progress, the bare `$JS.API.CONSUMER.CREATE.<stream>`
//! for an ephemeral (ordered) consumer — the server refuses a durable
//! name on that subject — and `$JS.API.DIRECT.GET` / `STREAM.MSG.GET`
//! to read single messages. A KV bucket `b` is the stream `KV_<prefix>_b`
//! written through `$KV.<prefix>_b.>`. Stream and durable-consumer
//! administration is the coordinator's and the admin's only.

use crate::api::catalog;
use crate::subjects::{StreamKind, Subjects};

use super::Role;

/// One role's NATS permissions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NatsPermissions {
    /// Subjects it may publish to.
    pub publish_allow: Vec<String>,
    /// Subjects it may never publish to (wins over `publish_allow`).
    pub publish_deny: Vec<String>,
    /// Subjects it may subscribe to.
    pub subscribe_allow: Vec<String>,
}

/// Debate events an agent publishes (the facilitator publishes the
/// others: escalation, resolution).
const AGENT_DEBATE_EVENTS: [&str; 4] = ["challenge", "ack", "evidence", "verdict"];

/// Replies to requests and JetStream publish acks arrive on `_INBOX.…`.
const INBOX: &str = "_INBOX.>";
/// `shared::nats::round_trip` sends a request nobody serves to learn that
/// the server processed everything before it (an API server is ready
/// only then); nobody may subscribe to it.
const RTT: &str = "_CAUCUS.rtt.*";

/// Stream administration: nobody but the coordinator and the admin.
pub fn admin_subjects() -> Vec<String> {
    [
        "$JS.API.STREAM.CREATE.>",
        "$JS.API.STREAM.UPDATE.>",
        "$JS.API.STREAM.DELETE.>",
        "$JS.API.STREAM.PURGE.>",
        "$JS.API.STREAM.MSG.DELETE.>",
        "$JS.API.CONSUMER.DELETE.>",
        "$JS.API.CONSUMER.DURABLE.CREATE.>",
    ]
    .map(String::from)
    .to_vec()
}

/// Reading one stream: bind, bind to its consumers, fetch from them,
/// create ephemeral consumers, read single messages, ack.
fn read_stream(stream: &str) -> Vec<String> {
    vec![
        format!("$JS.API.STREAM.INFO.{stream}"),
        format!("$JS.API.CONSUMER.INFO.{stream}.*"),
        format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.*"),
        format!("$JS.API.CONSUMER.CREATE.{stream}"),
        format!("$JS.API.DIRECT.GET.{stream}"),
        format!("$JS.API.DIRECT.GET.{stream}.>"),
        format!("$JS.API.STREAM.MSG.GET.{stream}"),
        format!("$JS.ACK.{stream}.>"),
    ]
}

/// Reading and writing one KV bucket (`name` without the prefix).
fn kv(s: &Subjects, name: &str) -> Vec<String> {
    let bucket = s.bucket(name);
    let mut out = read_stream(&format!("KV_{bucket}"));
    out.push(format!("$KV.{bucket}.>"));
    out
}

fn streams(s: &Subjects, kinds: &[StreamKind]) -> Vec<String> {
    kinds
        .iter()
        .flat_map(|k| read_stream(&s.stream(*k)))
        .collect()
}

/// The KV buckets of the facilitator (facilitator crate, shared::nats::buckets).
const FACILITATOR_BUCKETS: [&str; 3] = ["debates", "credibility", "facilitator"];
/// The correlator's KV bucket.
const CORRELATOR_BUCKETS: [&str; 1] = ["correlations"];

/// `role`'s permissions under `s`'s prefix.
pub fn permissions(role: &Role, s: &Subjects) -> NatsPermissions {
    let p = s.prefix();
    let own = |v: &[&str]| v.iter().map(|x| format!("{p}.{x}")).collect::<Vec<_>>();
    let js_info = || vec!["$JS.API.INFO".to_string(), RTT.to_string()];
    // Services bind to every stream at start (shared::nats::bind): the
    // streams' configuration and counts are readable by every service.
    let stream_info = || vec!["$JS.API.STREAM.INFO.*".to_string()];
    // Services answer `<svc>.health` for each other and for healthchecks
    // run with the service's own credentials.
    let health = || vec![format!("{p}.api.*.health")];
    // Nobody but the coordinator and the admin administers streams, and no
    // service may act as a person.
    let restricted_deny = || {
        let mut d = admin_subjects();
        d.push(format!("{p}.api.*.*.as.>"));
        d
    };
    match role {
        Role::Admin => NatsPermissions {
            publish_allow: vec![">".into()],
            publish_deny: vec![],
            subscribe_allow: vec![">".into()],
        },
        Role::Coordinator => NatsPermissions {
            // It creates and updates every stream, consumer and bucket, and
            // publishes on every stream of the topology.
            publish_allow: [
                vec![
                    "$JS.API.>".to_string(),
                    "$JS.ACK.>".into(),
                    "$KV.>".into(),
                    RTT.into(),
                ],
                vec![format!("{p}.>")],
            ]
            .concat(),
            // No deny: it relays a person's gate review to the facilitator
            // as that person (`facilitator.gate_review.as.<name>`), so the
            // facilitator records who decided.
            publish_deny: vec![],
            // Advisories: a task that ran out of deliveries.
            subscribe_allow: vec![
                INBOX.into(),
                format!("{p}.api.coordinator.>"),
                "$JS.EVENT.ADVISORY.>".into(),
            ],
        },
        Role::Worker => NatsPermissions {
            publish_allow: [
                js_info(),
                stream_info(),
                streams(
                    s,
                    &[StreamKind::Tasks, StreamKind::Messages, StreamKind::Debates],
                ),
                own(&[
                    "events.task.>",
                    "findings.>",
                    "failures.>",
                    "dlq.>",
                    "msg.>",
                ]),
                // Confirmations of the facilitator's flush requests go to
                // the request's `reply_to`, the facilitator's inbox.
                vec![INBOX.to_string()],
                AGENT_DEBATE_EVENTS
                    .iter()
                    .map(|e| format!("{p}.debates.*.{e}"))
                    .collect(),
                health(),
            ]
            .concat(),
            publish_deny: [
                restricted_deny(),
                // Broadcasts reach every analysis: people only.
                own(&[
                    "msg.all",
                    "control.>",
                    "correlations",
                    "tasks.>",
                    "alerts.>",
                ]),
            ]
            .concat(),
            // Its `health` (every service serves its API).
            subscribe_allow: vec![INBOX.into(), format!("{p}.api.worker.>")],
        },
        Role::Facilitator => NatsPermissions {
            publish_allow: [
                js_info(),
                stream_info(),
                streams(
                    s,
                    &[
                        StreamKind::Debates,
                        StreamKind::Messages,
                        StreamKind::Findings,
                    ],
                ),
                FACILITATOR_BUCKETS.iter().flat_map(|b| kv(s, b)).collect(),
                own(&["debates.>", "msg.>", "alerts.>", "dlq.>"]),
                health(),
            ]
            .concat(),
            publish_deny: [restricted_deny(), own(&["msg.all", "control.>", "tasks.>"])].concat(),
            subscribe_allow: vec![INBOX.into(), format!("{p}.api.facilitator.>")],
        },
        Role::Correlator => NatsPermissions {
            publish_allow: [
                js_info(),
                stream_info(),
                streams(s, &[StreamKind::Failures]),
                CORRELATOR_BUCKETS.iter().flat_map(|b| kv(s, b)).collect(),
                own(&["correlations", "control.batch_trigger", "alerts.>", "dlq.>"]),
                health(),
            ]
            .concat(),
            publish_deny: [restricted_deny(), own(&["msg.>", "tasks.>"])].concat(),
            subscribe_allow: vec![INBOX.into(), format!("{p}.api.correlator.>")],
        },
        Role::Operator => NatsPermissions {
            // Every operation on the bare subject (the services record
            // `operator` as the actor); broadcasts.
            publish_allow: [js_info(), vec![format!("{p}.api.*.*")], own(&["msg.all"])].concat(),
            publish_deny: restricted_deny(),
            subscribe_allow: vec![INBOX.into()],
        },
        Role::Console => {
            // The operator's operations on bare subjects (a console without
            // logins, on loopback, acts as the shared `operator`), and
            // every mutating operation as a person (`.as.*`: the console
            // names whoever is logged in). No broadcasts, no stream
            // administration.
            let mut allow = js_info();
            allow.push(format!("{p}.api.*.*"));
            allow.extend(
                catalog()
                    .iter()
                    .filter(|o| o.mutates)
                    .map(|o| format!("{}.as.*", s.api(o.service, o.name))),
            );
            NatsPermissions {
                publish_allow: allow,
                publish_deny: admin_subjects(),
                // Its own `health`; the core subjects its live updates
                // (Server-Sent Events) follow: the coordinator's workflow
                // records as they are written (read-only: a core
                // subscription to the bucket's subjects), task events,
                // debates, alerts, correlations, batch commands.
                subscribe_allow: [
                    vec![
                        INBOX.to_string(),
                        format!("{p}.api.console.>"),
                        format!("$KV.{}.>", s.bucket("workflows")),
                    ],
                    own(&[
                        "events.>",
                        "debates.>",
                        "alerts.>",
                        "correlations",
                        "control.>",
                    ]),
                ]
                .concat(),
            }
        }
        Role::Person(name) => {
            let mut allow = js_info();
            allow.push(format!("{p}.api.*.health"));
            // `health` is answered by every service: covered above.
            for op in catalog().iter().filter(|o| o.name != "health") {
                let subject = s.api(op.service, op.name);
                allow.push(if op.mutates {
                    format!("{subject}.as.{name}")
                } else {
                    subject
                });
            }
            allow.extend(own(&["msg.all"]));
            NatsPermissions {
                publish_allow: allow,
                publish_deny: admin_subjects(),
                subscribe_allow: vec![INBOX.into()],
            }
        }
        Role::Publisher => NatsPermissions {
            // A JetStream publish needs nothing but the subject; its ack
            // comes back on the publisher's inbox.
            publish_allow: own(&["findings.>", "failures.>"]),
            publish_deny: [restricted_deny(), own(&["control.>", "api.>", "msg.>"])].concat(),
            subscribe_allow: vec![INBOX.into()],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s() -> Subjects {
        Subjects::default()
    }

    #[test]
    fn only_the_coordinator_and_the_admin_may_administer_streams() {
        for role in super::super::ROLES {
            let perms = permissions(&role, &s());
            let admin = perms
                .publish_allow
                .iter()
                .any(|a| a == ">" || a == "$JS.API.>");
            assert_eq!(
                admin,
                matches!(role, Role::Coordinator | Role::Admin),
                "{role}"
            );
            if !matches!(role, Role::Coordinator | Role::Admin) {
                for d in admin_subjects() {
                    assert!(perms.publish_deny.contains(&d), "{role} lacks deny {d}");
                }
            }
        }
    }

    #[test]
    fn a_person_calls_mutating_operations_only_as_themselves() {
        let perms = permissions(&Role::Person("alice".into()), &s());
        let allow = &perms.publish_allow;
        assert!(allow.contains(&"caucus.api.coordinator.gate_decide.as.alice".to_string()));
        assert!(!allow.contains(&"caucus.api.coordinator.gate_decide".to_string()));
        assert!(allow.contains(&"caucus.api.coordinator.status".to_string()));
        assert!(!allow
            .iter()
            .any(|a| a.contains(".as.") && !a.ends_with(".as.alice")));
    }

    #[test]
    fn the_console_acts_as_persons_but_never_administers() {
        let perms = permissions(&Role::Console, &s());
        let allow = &perms.publish_allow;
        assert!(allow.contains(&"caucus.api.coordinator.gate_decide.as.*".to_string()));
        assert!(allow.contains(&"caucus.api.*.*".to_string()));
        assert!(!allow.contains(&"caucus.api.coordinator.status.as.*".to_string()));
        for d in admin_subjects() {
            assert!(perms.publish_deny.contains(&d), "{d}");
        }
        assert!(!allow.iter().any(|a| a == ">" || a.ends_with("msg.all")));
        assert!(perms
            .subscribe_allow
            .contains(&"caucus.api.console.>".to_string()));
        assert!(perms
            .subscribe_allow
            .contains(&"$KV.caucus_workflows.>".to_string()));
        assert!(!perms.publish_allow.iter().any(|a| a.starts_with("$KV")));
        assert!(!perms
            .subscribe_allow
            .iter()
            .any(|a| a.starts_with("caucus.tasks") || a.starts_with("caucus.findings")));
    }

    #[test]
    fn the_publisher_publishes_findings_and_failures_only() {
        let perms = permissions(&Role::Publisher, &s());
        assert_eq!(
            perms.publish_allow,
            ["caucus.findings.>", "caucus.failures.>"]
        );
        assert_eq!(perms.subscribe_allow, ["_INBOX.>"]);
    }

    #[test]
    fn a_worker_may_not_command_broadcast_or_call_the_api() {
        let perms = permissions(&Role::Worker, &s());
        for d in ["caucus.control.>", "caucus.msg.all", "caucus.api.*.*.as.>"] {
            assert!(perms.publish_deny.contains(&d.to_string()), "{d}");
        }
        assert!(!perms
            .publish_allow
            .iter()
            .any(|a| a.starts_with("caucus.api.") && !a.ends_with(".health")));
    }
}
