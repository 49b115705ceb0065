//! The `facilitator.*` control API.
//!
//! | operation | body | answer |
//! |---|---|---|
//! | `debates` | `{state?, level?, workflow_id?, item?}` | `{debates: [summary]}` |
//! | `debate` | `{debate_id}` | the stored debate |
//! | `expert_load` | `{}` | `{"<expert>": "2/3", …}` |
//! | `decide` | `{debate_id, expert, side? \| position?, rationale?, unavailable?}` | `{debate, resolution}` |
//! | `gate_review` | `{debate_id, action: confirm\|override\|redebate, reviewer, side?, position?, rationale?, context?, analyses?}` | `{debate, resolution, impact?, redebate_id?}` |
//! | `provisional` | `{workflow_id?, item?}` | `{count, message, decisions}` |
//! | `track_record` | `{records: [TrackRecord]}` | `{added, agents: {agent: total}}` |
//! | `credibility` | `{agent, context?, regime?}` | the agent's score |
//! | `regime` | `{}` | `{regime, source, broadcast_id?, from_agent?, since?}` |
//! | `message` | a debate envelope | `{debate}` (errors come back, e.g. `snapshot_mismatch`) |

use std::collections::BTreeMap;
use std::sync::Arc;

use caucus_shared::envelope::Envelope;
use caucus_shared::nats::ApiError;
use caucus_shared::service::Service;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::engine::Facilitator;
use super::error::ServiceError;
use super::requests::*;
use crate::credibility::{score, CredibilityQuery};
use crate::debate::{Debate, DebateState};

fn body<T: DeserializeOwned>(v: Value) -> Result<T, ApiError> {
    let v = if v.is_null() { json!({}) } else { v };
    serde_json::from_value(v).map_err(|e| ApiError::bad_request(e.to_string()))
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<Value, ApiError> {
    serde_json::to_value(v).map_err(|e| ApiError::internal(e.to_string()))
}

fn provisional_entry(d: &Debate) -> Value {
    let r = d.resolution.as_ref();
    let p = r.and_then(|r| r.provisional_details.as_ref());
    let scores = d.assessment.as_ref().map(|a| {
        json!({
            d.challenge.challenger.clone(): a.challenger.as_ref().map(|s| json!({"score": s.score, "ci": s.interval.half_width, "data_points": s.sample_size})),
            d.challenge.challenged.clone(): a.challenged.as_ref().map(|s| json!({"score": s.score, "ci": s.interval.half_width, "data_points": s.sample_size})),
        })
    });
    json!({
        "debate_id": d.debate_id,
        "topic": d.challenge.disputed_finding,
        "workflow_id": d.challenge.workflow_id,
        "item": d.challenge.item,
        "label": r.map(|r| r.label.clone()),
        "conservative_position": r.and_then(|r| r.final_position.clone()),
        "alternatives": p.map(|p| p.alternatives.clone()).unwrap_or_default(),
        "rationale": p.map(|p| p.conservative_rationale.clone()),
        "rule": p.map(|p| p.rule.clone()),
        "override_window_deadline": p.map(|p| p.review_deadline),
        "downstream_dependencies": p.map(|p| p.downstream_dependencies.clone()).unwrap_or_default(),
        "positions": {
            d.challenge.challenger.clone(): d.challenger_position,
            d.challenge.challenged.clone(): d.challenged_position,
        },
        "credibility": scores,
    })
}

/// Registers every operation on `svc`.
pub fn install(svc: &mut Service, fac: Arc<Facilitator>) {
    let f = fac.clone();
    svc.route("debates", move |v| {
        let f = f.clone();
        async move {
            let req: ListRequest = body(v)?;
            let all = f.debates.list().await.map_err(ServiceError::from)?;
            let mut out: Vec<&Debate> = all
                .iter()
                .filter(|d| req.state.as_deref().is_none_or(|s| d.state.as_str() == s))
                .filter(|d| req.level.is_none_or(|l| d.level == l))
                .filter(|d| {
                    req.workflow_id
                        .as_deref()
                        .is_none_or(|w| d.challenge.workflow_id.as_deref() == Some(w))
                })
                .filter(|d| {
                    req.item
                        .as_deref()
                        .is_none_or(|i| d.challenge.item.as_deref() == Some(i))
                })
                .collect();
            // Queue order: open debates by priority class, then arrival.
            out.sort_by_key(|d| {
                (
                    !d.state.is_open(),
                    crate::debate::routing::queue_rank(d.challenge.priority),
                    d.opened_at,
                )
            });
            let total = out.len();
            let (list, next) = req.page()?.take(out.into_iter().map(DebateSummary::of));
            let mut reply = json!({ "debates": list, "total": total });
            if let Some(c) = next {
                reply["next_cursor"] = json!(c);
            }
            Ok(reply)
        }
    });
    let f = fac.clone();
    svc.route("debate", move |v| {
        let f = f.clone();
        async move {
            let req: GetRequest = body(v)?;
            let (d, _) = f
                .debates
                .get(&req.debate_id)
                .await
                .map_err(ServiceError::from)?
                .ok_or_else(|| ApiError::not_found(format!("no debate `{}`", req.debate_id)))?;
            let mut reply = to_json(&d)?;
            // What it is about, by the one shared rule (coordinator and CLI
            // read this field rather than deciding again).
            reply["metric"] = serde_json::json!(d.metric());
            Ok(reply)
        }
    });
    let f = fac.clone();
    svc.route("expert_load", move |_v| {
        let f = f.clone();
        async move { to_json(&f.expert_load().await?) }
    });
    let f = fac.clone();
    svc.route("decide", move |v| {
        let f = f.clone();
        async move {
            let req: DecideRequest = body(v)?;
            let d = f.decide(&req).await?;
            Ok(json!({ "debate": DebateSummary::of(&d), "resolution": d.resolution }))
        }
    });
    let f = fac.clone();
    svc.route("gate_review", move |v| {
        let f = f.clone();
        async move {
            let req: GateReviewRequest = body(v)?;
            let (d, impact) = f.gate_review(&req).await?;
            let redebate_id = matches!(req.action, crate::debate::GateAction::Redebate { .. })
                .then(|| {
                    let g = d.generation + 1;
                    let root = d
                        .debate_id
                        .strip_suffix(&format!("-r{}", d.generation))
                        .filter(|_| d.generation > 0)
                        .unwrap_or(&d.debate_id);
                    format!("{root}-r{g}")
                });
            Ok(json!({
                "debate": DebateSummary::of(&d),
                "resolution": d.resolution,
                "impact": impact,
                "redebate_id": redebate_id,
            }))
        }
    });
    let f = fac.clone();
    svc.route("provisional", move |v| {
        let f = f.clone();
        async move {
            let req: ProvisionalRequest = body(v)?;
            let list = f.provisional(req.workflow_id.as_deref(), req.item.as_deref()).await?;
            let n = list.len();
            Ok(json!({
                "count": n,
                "message": format!("{n} provisional decision{} require{} review", if n == 1 { "" } else { "s" }, if n == 1 { "s" } else { "" }),
                "decisions": list.iter().map(provisional_entry).collect::<Vec<_>>(),
            }))
        }
    });
    let f = fac.clone();
    svc.route("track_record", move |v| {
        let f = f.clone();
        async move {
            let req: TrackRecordRequest = body(v)?;
            let mut by_agent: BTreeMap<String, Vec<_>> = BTreeMap::new();
            for r in req.records {
                r.validate()
                    .map_err(|e| ApiError::bad_request(e.to_string()))?;
                by_agent.entry(r.agent.clone()).or_default().push(r);
            }
            let mut totals = BTreeMap::new();
            let mut added = 0;
            for (agent, recs) in by_agent {
                added += recs.len();
                let n = f
                    .tracks
                    .append(&agent, &recs)
                    .await
                    .map_err(ServiceError::from)?;
                totals.insert(agent, n);
            }
            Ok(json!({ "added": added, "agents": totals }))
        }
    });
    let f = fac.clone();
    svc.route("credibility", move |v| {
        let f = f.clone();
        async move {
            let req: CredibilityRequest = body(v)?;
            let records = f
                .tracks
                .records(&req.agent)
                .await
                .map_err(ServiceError::from)?;
            let current = f.regime.get().await;
            let regime = req
                .regime
                .or_else(|| (!current.is_empty()).then_some(current));
            let q = CredibilityQuery {
                context: req.context,
                regime,
            };
            let s = score(&req.agent, &records, &q, f.clock.now(), &f.params)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            to_json(&s)
        }
    });
    let f = fac.clone();
    svc.route("regime", move |_v| {
        let f = f.clone();
        async move { to_json(&f.regime.record().await) }
    });
    let f = fac;
    svc.route("message", move |v| {
        let f = f.clone();
        async move {
            let bytes = serde_json::to_vec(&v).map_err(|e| ApiError::bad_request(e.to_string()))?;
            let env = Envelope::decode(&bytes, usize::MAX).map_err(ServiceError::from)?;
            let d = f.handle(&env).await?;
            Ok(json!({ "debate": DebateSummary::of(&d), "open": d.state.is_open(), "provisional": d.state == DebateState::Provisional }))
        }
    });
}
