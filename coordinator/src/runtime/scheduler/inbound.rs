//! Findings addressed to agent types: held for the next tasks of their
//! item, attached at dispatch, and flagging workflows that already ran
//! the addressee's task when a high or critical one arrives late.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use caucus_shared::inbound::InputFinding;
use caucus_shared::messages::Addressee;
use caucus_shared::task::TaskDispatch;

use super::Scheduler;
use crate::runtime::inbound::classify::flags_when_late;
use crate::runtime::inbound::{FindingsIndex, LateFinding, LATE_FINDING};
use crate::workflow::{TaskRunState, WorkflowFlag, GATE_AGENT};

/// The agent types of the built-in pipelines.
fn builtin_agent_types() -> &'static BTreeSet<String> {
    static TYPES: OnceLock<BTreeSet<String>> = OnceLock::new();
    TYPES.get_or_init(|| {
        crate::pipeline::builtin_names()
            .into_iter()
            .filter_map(crate::pipeline::builtin)
            .flat_map(|spec| spec.stages.into_iter().filter_map(|s| s.agent))
            .collect()
    })
}

impl Scheduler {
    /// Hands out addressed findings from now on.
    pub fn set_findings(&mut self, index: FindingsIndex) {
        self.findings = Some(index);
    }

    /// Puts each dispatch's findings into its inputs.
    pub(super) fn attach_findings(&self, dispatches: &mut [TaskDispatch]) {
        if let Some(ix) = &self.findings {
            for d in dispatches {
                ix.attach(d);
            }
        }
    }

    /// Whether some pipeline, worker or workflow knows `agent_type`.
    fn knows_agent_type(&self, agent_type: &str) -> bool {
        let same = |t: &String| t.eq_ignore_ascii_case(agent_type);
        builtin_agent_types().iter().any(same)
            || self.capacity_snapshot().keys().any(same)
            || self
                .engine
                .workflows()
                .any(|r| r.stages.iter().any(|s| same(&s.agent_type)))
    }

    /// Holds `finding` for the addressee's next tasks on `item` and flags
    /// the item's unfinished workflows whose addressee task completed
    /// before it was stored (high or critical findings); the flags are
    /// stored before this returns. Returns how many workflows were
    /// flagged, or why the addressee is unknown: a `to_agent` that names
    /// no agent type of a pipeline, a worker or a workflow is refused
    /// unless `any_addressee` (a request's answer, addressed to whoever
    /// asked, which may be an outside service).
    pub(super) async fn hold_finding(
        &mut self,
        item: String,
        addressee: Addressee,
        finding: InputFinding,
        any_addressee: bool,
    ) -> Result<usize, String> {
        if let Some(t) = addressee.agent_type() {
            if !any_addressee && !self.knows_agent_type(t) {
                return Err(format!(
                    "to_agent `{}` names agent type `{t}`, which no pipeline, worker or workflow has",
                    finding.to_agent
                ));
            }
        }
        // A request's answer is what its requester asked for, not news
        // about an analysis that already ran.
        let late = flags_when_late(finding.priority) && !any_addressee;
        let flag = late.then(|| self.late_flags(&item, &addressee, &finding));
        if let Some(ix) = self.findings.as_mut() {
            ix.insert(&item, addressee, finding);
        }
        let Some(flagged) = flag else { return Ok(0) };
        if flagged.is_empty() {
            return Ok(0);
        }
        self.persist().await;
        // One card per finding, naming every workflow it flagged (the
        // card's id is the finding's).
        let workflows: Vec<(String, String)> = flagged.iter().map(|(_, w)| w.clone()).collect();
        self.flag_alert(&flagged[0].0, &workflows).await;
        Ok(flagged.len())
    }

    /// Flags the unfinished workflows of `item` in which a task of the
    /// addressee completed before `finding` was stored.
    fn late_flags(
        &mut self,
        item: &str,
        addressee: &Addressee,
        finding: &InputFinding,
    ) -> Vec<(WorkflowFlag, (String, String))> {
        let now = self.clock.now();
        let ids: Vec<String> = self
            .engine
            .workflows()
            .filter(|r| r.item == item && !r.state.is_terminal())
            .map(|r| r.workflow_id.clone())
            .collect();
        let mut out = Vec::new();
        for id in ids {
            let Some(rec) = self.engine.get_mut(&id) else {
                continue;
            };
            let stages: BTreeSet<String> = rec
                .tasks
                .values()
                .filter(|t| {
                    t.agent_type != GATE_AGENT
                        && addressee.includes(&t.agent_type)
                        && t.state == TaskRunState::Completed
                        && t.finished_at.is_some_and(|f| f < finding.stored_at)
                })
                .map(|t| t.stage.clone())
                .collect();
            if stages.is_empty() {
                continue;
            }
            let detail = LateFinding {
                id: finding.id.clone(),
                from_agent: finding.from_agent.clone(),
                to_agent: finding.to_agent.clone(),
                priority: finding.priority,
                finding: finding.text().to_string(),
                impact: finding.impact().map(str::to_string),
                stages: stages.into_iter().collect(),
                stored_at: finding.stored_at,
            };
            let flag = WorkflowFlag {
                kind: LATE_FINDING.to_string(),
                at: now,
                detail: serde_json::to_value(&detail).expect("a late finding serialises"),
            };
            if rec.add_flag(flag.clone()) {
                out.push((flag, (id.clone(), rec.item.clone())));
                self.dirty.insert(id);
            }
        }
        out
    }
}
