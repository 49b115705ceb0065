//! Flags from broadcasts: every unfinished workflow is flagged for
//! re-evaluation, and people get one card about it.

use serde_json::json;

use super::Scheduler;
use crate::runtime::publish;

impl Scheduler {
    /// Flags every unfinished workflow for re-evaluation (a macro
    /// broadcast); returns how many were flagged.
    pub(super) async fn flag_unfinished(&mut self, flag: crate::workflow::WorkflowFlag) -> usize {
        let ids: Vec<String> = self
            .engine
            .workflows()
            .filter(|r| !r.state.is_terminal())
            .map(|r| r.workflow_id.clone())
            .collect();
        let mut flagged: Vec<(String, String)> = Vec::new();
        for id in ids {
            if let Some(r) = self.engine.get_mut(&id) {
                if r.add_flag(flag.clone()) {
                    flagged.push((id.clone(), r.item.clone()));
                    self.dirty.insert(id);
                }
            }
        }
        let n = flagged.len();
        if n > 0 {
            self.flag_alert(&flag, &flagged).await;
        }
        n
    }

    /// One card for people when a broadcast flags analyses in progress
    /// (the seed: regime changes are sent to the gate dashboards). Its id
    /// is fixed per broadcast, so a redelivered broadcast sends no second one.
    pub(super) async fn flag_alert(
        &self,
        flag: &crate::workflow::WorkflowFlag,
        flagged: &[(String, String)],
    ) {
        /// Workflows named in one card, at most.
        const LISTED: usize = 100;
        let actions = if flag.kind == crate::runtime::inbound::LATE_FINDING {
            "a finding arrived after the analysis it concerns: review it at the gate and re-run the stages it names"
        } else {
            "review in-progress analyses for regime sensitivity"
        };
        let card = publish::alert(
            "workflows_flagged",
            "warning",
            json!({
                "kind": flag.kind,
                "count": flagged.len(),
                "workflows": flagged
                    .iter()
                    .take(LISTED)
                    .map(|(w, i)| json!({"workflow_id": w, "item": i}))
                    .collect::<Vec<_>>(),
                "detail": flag.detail,
                "actions": [actions],
            }),
        );
        let msg_id = format!(
            "alert:flagged:{}",
            flag.detail["id"].as_str().unwrap_or("unknown")
        );
        if let Err(e) =
            publish::publish(&self.js, self.subjects.alerts("warning"), &card, &msg_id).await
        {
            tracing::warn!(error = %e, "flag alert not sent");
        }
    }
}
