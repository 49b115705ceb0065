//! The `facilitator.*` control API: one typed handler per operation of
//! [`caucus_shared::api::facilitator`] (requests, replies and error codes
//! are documented there and in docs/DEBATES.md).

use std::collections::BTreeMap;
use std::sync::Arc;

use caucus_shared::api::facilitator::{
    AddTrackRecords, BriefScore, Credibility, DebateReply, Debates, DebatesReply, Decide,
    DecideReply, ExpertLoad, GateReview, GateReviewReply, GetDebate, Message, MessageReply,
    Provisional, ProvisionalDecision, ProvisionalReply, Regime, RegimeReply, TrackRecordReply,
};
use caucus_shared::envelope::Envelope;
use caucus_shared::nats::ApiError;
use caucus_shared::service::Service;

use super::engine::Facilitator;
use super::error::ServiceError;
use crate::credibility::{score, CredibilityQuery, CredibilityScore};
use crate::debate::{Debate, DebateState, GateAction};

/// `d` as `facilitator.provisional` lists it.
fn provisional_entry(d: &Debate) -> ProvisionalDecision {
    let r = d.resolution.as_ref();
    let p = r.and_then(|r| r.provisional_details.as_ref());
    let brief = |s: &CredibilityScore| BriefScore {
        score: s.score,
        ci: s.interval.half_width,
        data_points: s.sample_size,
    };
    let (challenger, challenged) = (&d.challenge.challenger, &d.challenge.challenged);
    let credibility = d.assessment.as_ref().map(|a| {
        BTreeMap::from([
            (challenger.clone(), a.challenger.as_ref().map(brief)),
            (challenged.clone(), a.challenged.as_ref().map(brief)),
        ])
    });
    ProvisionalDecision {
        debate_id: d.debate_id.clone(),
        topic: d.challenge.disputed_finding.clone(),
        workflow_id: d.challenge.workflow_id.clone(),
        item: d.challenge.item.clone(),
        label: r.map(|r| r.label.clone()),
        conservative_position: r.and_then(|r| r.final_position.clone()),
        alternatives: p.map(|p| p.alternatives.clone()).unwrap_or_default(),
        rationale: p.map(|p| p.conservative_rationale.clone()),
        rule: p.map(|p| p.rule.clone()),
        override_window_deadline: p.map(|p| p.review_deadline),
        downstream_dependencies: p
            .map(|p| p.downstream_dependencies.clone())
            .unwrap_or_default(),
        positions: BTreeMap::from([
            (challenger.clone(), d.challenger_position.clone()),
            (challenged.clone(), d.challenged_position.clone()),
        ]),
        credibility,
    }
}

/// `n provisional decision(s) require(s) review`.
fn provisional_message(n: usize) -> String {
    let (s, verb_s) = if n == 1 { ("", "s") } else { ("s", "") };
    format!("{n} provisional decision{s} require{verb_s} review")
}

/// The id the re-debate of `d` gets: its root id with `-r<generation + 1>`.
fn redebate_id(d: &Debate) -> String {
    let root = d
        .debate_id
        .strip_suffix(&format!("-r{}", d.generation))
        .filter(|_| d.generation > 0)
        .unwrap_or(&d.debate_id);
    format!("{root}-r{}", d.generation + 1)
}

/// `facilitator.debates`: filtered, in queue order, one page.
async fn debates(
    f: &Facilitator,
    req: caucus_shared::api::facilitator::DebatesRequest,
) -> Result<DebatesReply, ApiError> {
    let page = req.page()?;
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
    let (debates, next_cursor) = page.take(out.into_iter().map(Debate::summary));
    Ok(DebatesReply {
        debates,
        total,
        next_cursor,
    })
}

/// `facilitator.track_record`: validates every record, then appends them
/// agent by agent.
async fn track_record(
    f: &Facilitator,
    records: Vec<crate::credibility::TrackRecord>,
) -> Result<TrackRecordReply, ApiError> {
    let mut by_agent: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for r in records {
        crate::credibility::validate(&r).map_err(|e| ApiError::bad_request(e.to_string()))?;
        by_agent.entry(r.agent.clone()).or_default().push(r);
    }
    let mut agents = BTreeMap::new();
    let mut added = 0;
    for (agent, recs) in by_agent {
        added += recs.len();
        let n = f
            .tracks
            .append(&agent, &recs)
            .await
            .map_err(ServiceError::from)?;
        agents.insert(agent, n);
    }
    Ok(TrackRecordReply { added, agents })
}

/// `facilitator.credibility`: the score under the asked (or current) regime.
async fn credibility(
    f: &Facilitator,
    req: caucus_shared::api::facilitator::CredibilityRequest,
) -> Result<CredibilityScore, ApiError> {
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
    score(&req.agent, &records, &q, f.clock.now(), &f.params)
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

/// Registers every operation on `svc`.
pub fn install(svc: &mut Service, fac: Arc<Facilitator>) {
    let f = fac.clone();
    svc.op::<Debates, _, _>(move |req| {
        let f = f.clone();
        async move { debates(&f, req).await }
    });
    let f = fac.clone();
    svc.op::<GetDebate, _, _>(move |req| {
        let f = f.clone();
        async move {
            let (d, _) = f
                .debates
                .get(&req.debate_id)
                .await
                .map_err(ServiceError::from)?
                .ok_or_else(|| ApiError::not_found(format!("no debate `{}`", req.debate_id)))?;
            let metric = d.metric();
            Ok(DebateReply {
                debate: d.into(),
                metric,
            })
        }
    });
    let f = fac.clone();
    svc.op::<ExpertLoad, _, _>(move |_req| {
        let f = f.clone();
        async move { Ok(f.expert_load().await?) }
    });
    let f = fac.clone();
    svc.op::<Decide, _, _>(move |req| {
        let f = f.clone();
        async move {
            let d = f.decide(&req).await?;
            Ok(DecideReply {
                debate: d.summary(),
                resolution: d.resolution,
            })
        }
    });
    let f = fac.clone();
    svc.op::<GateReview, _, _>(move |req| {
        let f = f.clone();
        async move {
            let (d, impact) = f.gate_review(&req).await?;
            let redebate_id =
                matches!(req.action, GateAction::Redebate { .. }).then(|| redebate_id(&d));
            Ok(GateReviewReply {
                debate: d.summary(),
                resolution: d.resolution,
                impact,
                redebate_id,
            })
        }
    });
    let f = fac.clone();
    svc.op::<Provisional, _, _>(move |req| {
        let f = f.clone();
        async move {
            let list = f
                .provisional(req.workflow_id.as_deref(), req.item.as_deref())
                .await?;
            Ok(ProvisionalReply {
                count: list.len(),
                message: provisional_message(list.len()),
                decisions: list.iter().map(provisional_entry).collect(),
            })
        }
    });
    let f = fac.clone();
    svc.op::<AddTrackRecords, _, _>(move |req| {
        let f = f.clone();
        async move { track_record(&f, req.records).await }
    });
    let f = fac.clone();
    svc.op::<Credibility, _, _>(move |req| {
        let f = f.clone();
        async move { credibility(&f, req).await }
    });
    let f = fac.clone();
    svc.op::<Regime, _, _>(move |_req| {
        let f = f.clone();
        async move {
            let r = f.regime.record().await;
            Ok(RegimeReply {
                regime: r.regime,
                source: r.source,
                broadcast_id: r.broadcast_id,
                from_agent: r.from_agent,
                since: r.since,
            })
        }
    });
    let f = fac;
    svc.op::<Message, _, _>(move |v| {
        let f = f.clone();
        async move {
            // Re-encoded so Envelope::decode answers its specific codes.
            let bytes = serde_json::to_vec(&v).map_err(|e| ApiError::bad_request(e.to_string()))?;
            let env = Envelope::decode(&bytes, usize::MAX).map_err(ServiceError::from)?;
            let d = f.handle(&env).await?;
            Ok(MessageReply {
                debate: d.summary(),
                open: d.state.is_open(),
                provisional: d.state == DebateState::Provisional,
            })
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provisional_message_agrees_with_the_count() {
        assert_eq!(
            provisional_message(1),
            "1 provisional decision requires review"
        );
        assert_eq!(
            provisional_message(2),
            "2 provisional decisions require review"
        );
    }
}
