//! The person at the gates while a demo batch runs.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use caucus_shared::api::client::decode_reply;
use caucus_shared::api::coordinator::gates::{
    Gate, GateRequest, GateReview, GateReviewRequest, Gates, GatesRequest,
};
use caucus_shared::api::Operation;

use crate::Client;

/// What the demo's reviewer did at the gates.
#[derive(Debug, Default)]
pub struct Reviewed {
    /// Provisional decisions confirmed, as `ITEM debate_id`.
    pub confirmed: Vec<String>,
    /// The first decision package that needed a review, as printed.
    pub first_package: Option<String>,
}

/// Plays the person at the gates until `stop`: a gate whose workflow has
/// provisional decisions waits for a review (automatic approval only goes
/// through when nothing needs review), so this confirms each conservative
/// default; the gate then approves itself.
pub async fn review_gates(client: Client, ids: Vec<String>, stop: CancellationToken) -> Reviewed {
    let mut out = Reviewed::default();
    while !stop.is_cancelled() {
        for wf in open_gates_of(&client, &ids).await {
            review(&client, &wf, &mut out).await;
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_millis(150)) => {}
        }
    }
    out
}

/// Workflows of `ids` with an open gate.
async fn open_gates_of(client: &Client, ids: &[String]) -> Vec<String> {
    let open = client
        .op::<Gates>(&GatesRequest::default())
        .await
        .map(|r| r.gates)
        .unwrap_or_default();
    open.into_iter()
        .map(|g| g.workflow_id)
        .filter(|wf| ids.contains(wf))
        .collect()
}

/// Confirms every provisional decision at `wf`'s gate; keeps the first
/// package that had any.
async fn review(client: &Client, wf: &str, out: &mut Reviewed) {
    let request = GateRequest {
        workflow_id: wf.to_string(),
        gate: None,
    };
    // The package as it came, for the printed copy; read through its type.
    let Ok(raw) = client
        .call(
            Gate::SERVICE,
            Gate::NAME,
            serde_json::to_value(&request).unwrap_or_default(),
        )
        .await
    else {
        return;
    };
    let Ok(pkg) = decode_reply::<Gate>(raw.clone()) else {
        return;
    };
    let decisions = pkg.provisional.decisions;
    if decisions.is_empty() {
        return;
    }
    if out.first_package.is_none() {
        out.first_package = Some(crate::gate::render_package(&raw));
    }
    for d in decisions {
        let review = GateReviewRequest {
            workflow_id: wf.to_string(),
            debate_id: d.debate_id.clone(),
            action: "confirm".into(),
            reviewer: Some("demo-reviewer".into()),
            side: None,
            position: None,
            rationale: None,
            context: None,
            analyses: None,
            dry_run: false,
        };
        if client.op::<GateReview>(&review).await.is_ok() {
            out.confirmed.push(format!("{} {}", pkg.item, d.debate_id));
        }
    }
}

/// Items of `confirmed` entries (`ITEM debate_id`).
pub fn confirmed_items(r: &Reviewed) -> Vec<&str> {
    r.confirmed
        .iter()
        .filter_map(|c| c.split(' ').next())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confirmed_entries_name_their_items() {
        let r = Reviewed {
            confirmed: vec!["AMD margin-1".into(), "BRK.B margin-2".into()],
            first_package: None,
        };
        assert_eq!(confirmed_items(&r), ["AMD", "BRK.B"]);
    }

    #[test]
    fn a_reviewer_that_saw_nothing_reports_nothing() {
        let r = Reviewed::default();
        assert!(confirmed_items(&r).is_empty());
        assert!(r.first_package.is_none());
    }
}
