//! A binding debate resolution settles an assumption: tasks that used
//! another value run again.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::super::{TaskRunState, WorkflowRecord, WorkflowState};
use super::impact::ImpactParams;
use super::rerun::{RerunOutcome, RerunRequest};

impl WorkflowRecord {
    /// A debate settled `metric` at `value` (a binding resolution): every
    /// later dispatch gets it, and each completed task of a stage declaring
    /// `params.impact` with `used` (a JSON pointer to the value its output
    /// says it used) that used another value runs again, followed by its
    /// completed dependents (gates excepted). `None` when nothing changed.
    pub fn settle_assumption(
        &mut self,
        metric: &str,
        value: f64,
        reason: String,
        requested_by: String,
        now: DateTime<Utc>,
    ) -> Option<RerunOutcome> {
        if self.state == WorkflowState::Failed {
            return None;
        }
        let already = self
            .resolved_assumptions
            .get(metric)
            .and_then(Value::as_f64)
            .is_some_and(|v| (v - value).abs() < 1e-12);
        let stale: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.state == TaskRunState::Completed)
            .filter(|(_, t)| {
                let Some(imp) = self
                    .stages
                    .iter()
                    .find(|s| s.name == t.stage)
                    .and_then(|s| ImpactParams::of(&s.params))
                else {
                    return false;
                };
                let used = imp
                    .used
                    .as_deref()
                    .and_then(|p| t.output.as_ref()?.pointer(p))
                    .and_then(Value::as_f64);
                imp.uses(metric) && used.is_some_and(|u| (u - value).abs() > 1e-9)
            })
            .map(|(k, _)| k.clone())
            .collect();
        if stale.is_empty() && already {
            return None;
        }
        let stages: BTreeSet<String> = stale.iter().map(|k| self.tasks[k].stage.clone()).collect();
        let after = self.downstream_of(&stages);
        let followers: Vec<String> = self
            .tasks
            .iter()
            .filter(|(k, t)| {
                !stale.contains(k)
                    && after.contains(&t.stage)
                    && t.state == TaskRunState::Completed
                    && !self.is_gate_task(t)
            })
            .map(|(k, _)| k.clone())
            .collect();
        let mut groups = vec![stale];
        if !followers.is_empty() {
            groups.push(followers);
        }
        groups.retain(|g| !g.is_empty());
        self.request_rerun(
            RerunRequest {
                reason,
                requested_by,
                groups,
                assumptions: BTreeMap::from([(metric.to_string(), json!(value))]),
                estimates: Vec::new(),
            },
            now,
        )
        .ok()
    }
}
