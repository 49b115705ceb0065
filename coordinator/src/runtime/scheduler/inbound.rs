//! Findings addressed to agent types: held for the next tasks of their
//! item, attached at dispatch, and flagging workflows that already ran
//! the addressee's task when a high or critical one arrives late.

use std::collections::BTreeSet;

use caucus_shared::inbound::InputFinding;
use caucus_shared::messages::Addressee;
use caucus_shared::task::TaskDispatch;

use super::Scheduler;
use crate::runtime::inbound::classify::flags_when_late;
use crate::runtime::inbound::{FindingsIndex, LateFinding, LATE_FINDING};
use crate::workflow::{TaskRunState, WorkflowFlag, GATE_AGENT};

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

    /// Holds `finding` for the addressee's next tasks on `item` and flags
    /// the item's unfinished workflows whose addressee task completed
    /// before it was stored (high or critical findings); the flags are
    /// stored before this returns. Returns how many workflows were
    /// flagged. A `to_agent` that names no agent type (an outside service,
    /// such as a requester receiving its answer) is held like any other:
    /// no task of that type asks for it.
    pub(super) async fn hold_finding(
        &mut self,
        item: String,
        addressee: Addressee,
        finding: InputFinding,
    ) -> usize {
        let late = flags_when_late(finding.priority);
        let flag = late.then(|| self.late_flags(&item, &addressee, &finding));
        if let Some(ix) = self.findings.as_mut() {
            ix.insert(&item, addressee, finding);
        }
        let Some(flagged) = flag else { return 0 };
        if flagged.is_empty() {
            return 0;
        }
        self.persist().await;
        for (flag, wf) in &flagged {
            self.flag_alert(flag, std::slice::from_ref(wf)).await;
        }
        flagged.len()
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
