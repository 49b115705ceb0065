//! The status reply: a page of workflows or the ones asked for by id,
//! with the load and the capacities.

use caucus_shared::api::coordinator::status::{StatusReply, WorkflowView};

use super::{
    parse_status_cursor, status_cursor, Scheduler, StatusFilter, STATUS_DEFAULT_LIMIT,
    STATUS_MAX_LIMIT,
};
use crate::runtime::views;
use crate::workflow::{WorkflowRecord, WorkflowState};

impl Scheduler {
    pub(super) async fn status(&self, f: &StatusFilter) -> StatusReply {
        let states: Vec<WorkflowState> = f
            .states
            .iter()
            .filter_map(|s| WorkflowState::parse(s))
            .collect();
        let wanted = |r: &WorkflowRecord| states.is_empty() || states.contains(&r.state);
        let mut list: Vec<WorkflowView> = Vec::new();
        let mut next_cursor: Option<String> = None;
        if f.ids.is_empty() {
            // A page, in (created_at, workflow_id) order, without outputs.
            let limit = f
                .limit
                .unwrap_or(STATUS_DEFAULT_LIMIT)
                .clamp(1, STATUS_MAX_LIMIT);
            let after = f.cursor.as_deref().and_then(parse_status_cursor);
            let mut recs: Vec<&WorkflowRecord> = self
                .engine
                .workflows()
                .filter(|r| wanted(r))
                .filter(|r| match &after {
                    Some((ms, id)) => (r.created_at.timestamp_millis(), &r.workflow_id) > (*ms, id),
                    None => true,
                })
                .collect();
            recs.sort_by(|a, b| {
                (a.created_at.timestamp_millis(), &a.workflow_id)
                    .cmp(&(b.created_at.timestamp_millis(), &b.workflow_id))
            });
            if recs.len() > limit {
                next_cursor = Some(status_cursor(recs[limit - 1]));
                recs.truncate(limit);
            }
            for r in recs {
                list.push(views::workflow_view_with(r, f.tasks, false));
            }
        } else {
            for id in &f.ids {
                let stored;
                let r = match self.engine.get(id) {
                    Some(r) => r,
                    None => match self.store.get(id).await {
                        Ok(Some((r, _))) => {
                            stored = r;
                            &stored
                        }
                        _ => continue,
                    },
                };
                if wanted(r) {
                    list.push(views::workflow_view_with(r, f.tasks, true));
                }
            }
        }
        let now = self.clock.now();
        let caps = self
            .capacities
            .read()
            .map(|c| c.iter().map(|(a, n)| (a.clone(), *n)).collect())
            .unwrap_or_default();
        let mut reply = views::status_reply(list, next_cursor, self.engine.load(now), caps);
        // One pass over the held workflows: the overview's counts cost no
        // page reads, even with 10,000 held.
        for r in self.engine.workflows() {
            *reply
                .counts
                .entry(views::state_view(r.state).as_str().to_string())
                .or_default() += 1;
        }
        reply
    }
}
