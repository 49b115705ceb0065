//! Handing an addressed finding to the scheduler that holds the item's
//! tasks: the term's own with one partition; every partition's with
//! several (each holds it for its own workflows of the item), the finding
//! being refused only when none can take it (docs/PARTITIONS.md, item 5).

use serde::{Deserialize, Serialize};

use caucus_shared::api::Operation;
use caucus_shared::inbound::InputFinding;
use caucus_shared::messages::Addressee;

use crate::runtime::commands::{ask, AskError, Command};
use crate::runtime::route::Router;

use super::Inbound;

/// The internal operation each partition's owner answers: hold this
/// finding for the item's tasks (never in the catalog).
pub struct HoldFinding;

impl Operation for HoldFinding {
    const SERVICE: &'static str = "coordinator";
    const NAME: &'static str = "hold_finding";
    const SUMMARY: &'static str = "hold an addressed finding for an item's tasks (internal)";
    const ERRORS: &'static [&'static str] = &[];
    const MUTATES: bool = true;
    type Request = HoldRequest;
    type Reply = HoldReply;
}

/// What to hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HoldRequest {
    /// The item.
    pub item: String,
    /// Who it is for (`all` or an agent type).
    pub addressee: String,
    /// The finding, as tasks receive it.
    pub finding: InputFinding,
    /// Accept any addressee (a request's answer to its requester).
    pub any_addressee: bool,
}

/// One partition's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HoldReply {
    /// Workflows it flagged, when it took the finding.
    pub flagged: Option<usize>,
    /// Why it could not, otherwise.
    pub refused: Option<String>,
}

/// Makes [`HoldFinding`] answerable by this instance's schedulers.
pub fn register(router: &Router) {
    router.register::<HoldFinding, _, _>(|h, r: HoldRequest| async move {
        let addressee = Addressee::parse(&r.addressee).unwrap_or(Addressee::All);
        let held = ask(&h, |reply| Command::Finding {
            item: r.item,
            addressee,
            finding: r.finding,
            any_addressee: r.any_addressee,
            reply,
        })
        .await?;
        Ok(match held {
            Ok(n) => HoldReply {
                flagged: Some(n),
                refused: None,
            },
            Err(why) => HoldReply {
                flagged: None,
                refused: Some(why),
            },
        })
    });
}

/// Why a finding could not be handed over now (retried later).
pub enum NotHeld {
    /// The term's scheduler stopped.
    Gone,
    /// Another failure, to retry.
    Later(String),
}

/// Hands the finding over: `Ok(Ok(flagged))` when a scheduler took it,
/// `Ok(Err(why))` when none can.
pub async fn hold(
    inbound: &Inbound,
    item: String,
    addressee: Addressee,
    finding: InputFinding,
    any_addressee: bool,
) -> Result<Result<usize, String>, NotHeld> {
    let Some(router) = &inbound.partitions else {
        return match ask(&inbound.scheduler, |reply| Command::Finding {
            item,
            addressee,
            finding,
            any_addressee,
            reply,
        })
        .await
        {
            Ok(r) => Ok(r),
            Err(AskError::Closed) => Err(NotHeld::Gone),
            Err(e) => Err(NotHeld::Later(format!("{e:?}"))),
        };
    };
    let req = HoldRequest {
        item,
        addressee: addressee.to_string(),
        finding,
        any_addressee,
    };
    let replies = router
        .call_all::<HoldFinding>(&req)
        .await
        .map_err(|e| NotHeld::Later(e.to_string()))?;
    let flagged: Vec<usize> = replies.iter().filter_map(|r| r.flagged).collect();
    if flagged.is_empty() {
        let why = replies
            .into_iter()
            .find_map(|r| r.refused)
            .unwrap_or_else(|| "no partition holds a task it is for".into());
        return Ok(Err(why));
    }
    Ok(Ok(flagged.iter().sum()))
}
