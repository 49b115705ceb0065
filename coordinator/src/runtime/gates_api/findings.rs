//! The findings of a decision package: read from `caucus.findings.<item>`
//! (this workflow's own, and every finding about the item addressed to an
//! agent), marked late against the workflow's completed tasks, with their
//! answers from the `responses` bucket and the `applied_findings` of the
//! workflow's task outputs.

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::consumer::pull::OrderedConfig;
use async_nats::jetstream::consumer::DeliverPolicy;
use futures::StreamExt;

use caucus_shared::api::coordinator::gates::{FindingSource, PackageFinding};
use caucus_shared::clock::{to_chrono, to_time};
use caucus_shared::envelope::Priority;
use caucus_shared::outputs::{lenient, or_default};
use caucus_shared::subjects::StreamKind;

use super::super::gates_package::finding_id;
use super::super::inbound::{ResponseRecord, ResponseStore, RESPONSES_BUCKET};
use super::listing::{
    applied_in, apply_answer, apply_applied, mark_late, message_id, source_of, DoneTask,
};
use super::newest::{Listed, Newest};
use super::package::MAX_PACKAGE_FINDINGS;
use super::GateApi;
use crate::workflow::{TaskRunState, WorkflowRecord};

/// Messages read from the item's subject for one package, at most: the
/// lookback bounds the history read; this bounds a burst within it (the
/// oldest beyond it are not listed).
pub const MAX_SCANNED: usize = 50_000;
/// `responses` lookups in flight at once.
const ANSWER_LOOKUPS: usize = 16;
/// Message types the package lists (alerts and others on the subject are
/// not findings).
const FINDING_TYPES: [&str; 2] = ["finding", "finding_with_precedent"];

/// Why the package lists no findings (the package is still answered).
#[derive(Debug, thiserror::Error)]
pub(super) enum FindingsError {
    /// The findings stream cannot be read.
    #[error("findings stream: {0}")]
    Stream(#[from] async_nats::jetstream::context::GetStreamError),
    /// No consumer could be made on it.
    #[error("findings consumer: {0}")]
    Consumer(#[from] async_nats::jetstream::stream::ConsumerError),
    /// Its messages cannot be fetched.
    #[error("reading findings: {0}")]
    Read(#[from] async_nats::jetstream::consumer::StreamError),
}

impl GateApi {
    /// The package's findings, oldest first: see [`GateApi::read_findings`],
    /// then whether each is late, answered and used.
    pub(super) async fn findings(
        &self,
        rec: &WorkflowRecord,
    ) -> Result<Vec<PackageFinding>, FindingsError> {
        let listed = self.read_findings(rec).await?;
        let done = done_tasks(rec);
        let applied: HashMap<String, String> = rec
            .tasks
            .values()
            .filter(|t| t.state == TaskRunState::Completed)
            .filter_map(|t| t.output.as_ref())
            .flat_map(applied_in)
            .map(|a| (a.finding_id, a.how))
            .collect();
        let asked: Vec<String> = listed
            .iter()
            .filter(|l| l.finding.requires_response)
            .filter_map(|l| l.envelope_id.clone())
            .collect();
        let answers = self.answers(asked).await;
        Ok(listed
            .into_iter()
            .map(|l| {
                let mut f = l.finding;
                mark_late(&mut f, &done);
                let id = l.envelope_id.as_deref();
                apply_answer(&mut f, id.and_then(|id| answers.get(id)));
                if let Some(id) = id {
                    apply_applied(&mut f, id, &applied);
                }
                f
            })
            .collect())
    }

    /// The item's findings published by this workflow's tasks, and those
    /// addressed to an agent by anyone, stored within
    /// `coordinator.findings_lookback`: the newest
    /// [`MAX_PACKAGE_FINDINGS`], oldest first.
    async fn read_findings(&self, rec: &WorkflowRecord) -> Result<Vec<Listed>, FindingsError> {
        let js = async_nats::jetstream::new(self.client.clone());
        let stream = js
            .get_stream(self.subjects.stream(StreamKind::Findings))
            .await?;
        let consumer = stream
            .create_consumer(OrderedConfig {
                filter_subject: self.subjects.findings(&rec.item),
                deliver_policy: deliver_policy(self.findings_lookback),
                ..Default::default()
            })
            .await?;
        let pending = consumer.cached_info().num_pending as usize;
        let mut out = Newest::new(MAX_PACKAGE_FINDINGS);
        if pending == 0 {
            return Ok(Vec::new());
        }
        if pending > MAX_SCANNED {
            tracing::warn!(item = %rec.item, pending, max = MAX_SCANNED, "decision package reads only the first findings of the item's lookback");
        }
        let mut msgs = consumer.messages().await?;
        for _ in 0..pending.min(MAX_SCANNED) {
            let next = tokio::time::timeout(self.timeout, msgs.next()).await;
            let Ok(Some(Ok(m))) = next else { break };
            let place = m.info().ok().map(|i| Place {
                stream: i.stream.to_string(),
                sequence: i.stream_sequence,
                stored_at: to_chrono(i.published),
            });
            let msg_id = m
                .headers
                .as_ref()
                .and_then(|h| h.get("Nats-Msg-Id"))
                .map(|id| id.as_str().to_string());
            if let Some(l) = listed(&rec.workflow_id, &m.payload, msg_id.as_deref(), place) {
                out.push(l);
            }
        }
        Ok(out.into_vec())
    }

    /// The `responses` entries of `ids` (missing ones left out). No bucket,
    /// or a lookup that fails, reads as "no answer yet": the package is
    /// still answered.
    async fn answers(&self, ids: Vec<String>) -> HashMap<String, ResponseRecord> {
        if ids.is_empty() {
            return HashMap::new();
        }
        let js = async_nats::jetstream::new(self.client.clone());
        let store = match js
            .get_key_value(self.subjects.bucket(RESPONSES_BUCKET))
            .await
        {
            Ok(kv) => ResponseStore::new(kv),
            Err(e) => {
                tracing::debug!(error = %e, "decision package without answers: no responses bucket");
                return HashMap::new();
            }
        };
        futures::stream::iter(ids)
            .map(|id| {
                let store = store.clone();
                async move {
                    match store.get(&id).await {
                        Ok(rec) => rec.map(|r| (id, r)),
                        Err(e) => {
                            tracing::debug!(finding = %id, error = %e, "no answer read for a finding");
                            None
                        }
                    }
                }
            })
            .buffer_unordered(ANSWER_LOOKUPS)
            .filter_map(|x| async move { x })
            .collect()
            .await
    }
}

/// Where the read starts: `now − lookback` when there is one.
fn deliver_policy(lookback: Option<Duration>) -> DeliverPolicy {
    let start = lookback
        .and_then(|l| chrono::Duration::from_std(l).ok())
        .and_then(|l| chrono::Utc::now().checked_sub_signed(l));
    match start {
        Some(t) => DeliverPolicy::ByStartTime {
            start_time: to_time(t),
        },
        None => DeliverPolicy::All,
    }
}

/// The workflow's completed agent tasks with their completion times
/// (a decided gate is no analysis a finding could have reached).
fn done_tasks(rec: &WorkflowRecord) -> Vec<DoneTask> {
    rec.tasks
        .values()
        .filter(|t| t.state == TaskRunState::Completed && t.gate.is_none())
        .filter_map(|t| {
            Some(DoneTask {
                stage: t.stage.clone(),
                agent_type: t.agent_type.clone(),
                finished_at: t.finished_at?,
            })
        })
        .collect()
}

/// Where JetStream stored a message.
#[derive(Debug, Clone)]
struct Place {
    /// The stream.
    stream: String,
    /// Its sequence in the stream.
    sequence: u64,
    /// When it was stored.
    stored_at: chrono::DateTime<chrono::Utc>,
}

/// A message on the item's subject as the package lists it; `None` when it
/// is not a finding, or not one for this workflow's package
/// ([`source_of`]). Read leniently: a person reviews this package, so a
/// finding of an outside service with an odd field is listed with that
/// field empty rather than left out.
fn listed(
    workflow_id: &str,
    payload: &[u8],
    msg_id: Option<&str>,
    place: Option<Place>,
) -> Option<Listed> {
    let env = serde_json::from_slice::<LooseMessage>(payload).ok()?;
    let envelope_id = match &place {
        Some(p) => Some(message_id(env.id.as_deref(), msg_id, &p.stream, p.sequence)),
        None => env.id.clone().or_else(|| msg_id.map(str::to_string)),
    };
    let kind = env.message_type.as_deref()?;
    if !FINDING_TYPES.contains(&kind) {
        return None;
    }
    let c = env.content;
    let source = source_of(
        workflow_id,
        env.correlation_id.as_deref(),
        c.workflow_id.as_deref(),
        env.to_agent.as_deref(),
    )?;
    // A worker's findings keep one id across their task's runs; any other
    // is named by its envelope id (what its answers name).
    let run_id = match source {
        FindingSource::Agent => msg_id.and_then(finding_id),
        FindingSource::Outside => None,
    };
    let finding = PackageFinding {
        from_agent: env.from_agent.unwrap_or_default(),
        finding: c.finding.unwrap_or_default(),
        confidence: c.confidence,
        evidence: c.evidence.unwrap_or_default(),
        impact: c.impact,
        metric: c.metric,
        value: c.value,
        timestamp: env.timestamp,
        finding_id: run_id.or_else(|| envelope_id.clone()),
        to_agent: env.to_agent.filter(|t| !t.trim().is_empty()),
        priority: env.priority,
        source,
        stored_at: place.map(|p| p.stored_at),
        late: false,
        rerun_stages: Vec::new(),
        requires_response: env.requires_response.unwrap_or(false),
        answered: None,
        used: None,
        answer_note: None,
    };
    Some(Listed {
        finding,
        envelope_id,
    })
}

/// A message on `caucus.findings.<item>` as the package reads it: any
/// field may be missing or odd (outside services publish there too).
#[derive(Debug, Default, serde::Deserialize)]
struct LooseMessage {
    #[serde(default, deserialize_with = "lenient")]
    id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    message_type: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    from_agent: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    to_agent: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    priority: Option<Priority>,
    #[serde(default, deserialize_with = "lenient")]
    requires_response: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    correlation_id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    timestamp: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default, deserialize_with = "or_default")]
    content: LooseFinding,
}

/// A finding's content as the package reads it.
#[derive(Debug, Default, serde::Deserialize)]
struct LooseFinding {
    #[serde(default, deserialize_with = "lenient")]
    workflow_id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    finding: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    confidence: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    evidence: Option<Vec<String>>,
    #[serde(default, deserialize_with = "lenient")]
    impact: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    metric: Option<String>,
    #[serde(default)]
    value: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(v: serde_json::Value, msg_id: Option<&str>) -> Option<Listed> {
        let place = Place {
            stream: "FINDINGS".into(),
            sequence: 42,
            stored_at: chrono::Utc::now(),
        };
        listed(
            "wf-1",
            &serde_json::to_vec(&v).unwrap(),
            msg_id,
            Some(place),
        )
    }

    #[test]
    fn the_seeds_outside_finding_is_listed_with_its_addressee_and_priority() {
        let l = read(
            json!({"id": "m-1", "message_type": "finding", "from_agent": "financial_analyst",
                   "to_agent": "valuation_agent", "priority": "high", "requires_response": true,
                   "content": {"finding": "Abnormal capex increase", "confidence": 0.85,
                               "evidence": ["10-K p.47"], "impact": "Adjust FCF projections"}}),
            None,
        )
        .expect("listed");
        let f = &l.finding;
        assert_eq!(f.source, FindingSource::Outside);
        assert_eq!(f.to_agent.as_deref(), Some("valuation_agent"));
        assert_eq!(f.priority, Some(Priority::High));
        assert!(f.requires_response);
        assert_eq!(f.finding_id.as_deref(), Some("m-1"));
        assert_eq!(l.envelope_id.as_deref(), Some("m-1"));
        assert_eq!(f.evidence, ["10-K p.47"]);
        assert!(f.stored_at.is_some());

        let no_id = read(
            json!({"message_type": "finding", "from_agent": "financial_analyst",
                   "to_agent": "valuation_agent", "content": {"finding": "capex"}}),
            None,
        )
        .expect("listed");
        assert_eq!(
            no_id.envelope_id.as_deref(),
            Some("FINDINGS:42"),
            "a body without an id is named by its place in the stream"
        );
        assert_eq!(no_id.finding.finding_id, no_id.envelope_id);
    }

    #[test]
    fn own_findings_keep_their_run_id_and_others_are_left_out() {
        let own = read(
            json!({"id": "e-7", "message_type": "finding_with_precedent", "from_agent": "valuation",
                   "correlation_id": "wf-1", "priority": "urgent?",
                   "content": {"finding": "target 85", "confidence": "high"}}),
            Some("wf-1/valuation@2:finding:0"),
        )
        .expect("listed");
        assert_eq!(own.finding.source, FindingSource::Agent);
        assert_eq!(
            own.finding.finding_id.as_deref(),
            Some("wf-1/valuation:finding:0")
        );
        assert_eq!(own.envelope_id.as_deref(), Some("e-7"));
        assert_eq!(
            own.finding.priority, None,
            "an unknown priority reads as none"
        );
        assert_eq!(own.finding.confidence, None);

        let alert = json!({"id": "a", "message_type": "alert", "to_agent": "all",
                           "content": {"finding": "x"}});
        assert!(read(alert, None).is_none(), "not a finding");
        let untyped = json!({"id": "a", "to_agent": "all", "content": {"finding": "x"}});
        assert!(read(untyped, None).is_none(), "no message type");
        let theirs = json!({"id": "b", "message_type": "finding", "correlation_id": "wf-2",
                            "content": {"finding": "x"}});
        assert!(
            read(theirs, None).is_none(),
            "another workflow's own finding"
        );
        assert!(listed("wf-1", b"not json", None, None).is_none());
    }
}
