//! `partitions`: who owns each partition of the workflow space, under
//! which fencing epoch, and how many unfinished workflows it holds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::api::{Empty, Operation, OperationDoc};

/// `coordinator.partitions`: any instance answers; the owner's scheduler
/// counts its workflows (a non-owner asks it).
pub struct Partitions;

impl Operation for Partitions {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "partitions";
    const SUMMARY: &'static str =
        "each partition's owner (instance id), fencing epoch and unfinished workflows";
    const ERRORS: &'static [&'static str] = &[CODE_UNAVAILABLE];
    type Request = Empty;
    type Reply = PartitionsReply;
}

/// Error code of a coordinator that cannot read the partition locks
/// (Redis unreachable) or is shutting down mid-request.
const CODE_UNAVAILABLE: &str = "unavailable";

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[OperationDoc::of::<Partitions>()];

/// The `partitions` reply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionsReply {
    /// Every partition, by its number in decimal (`"0"` … `"P-1"`).
    pub partitions: BTreeMap<String, PartitionInfo>,
}

/// One partition in the `partitions` reply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionInfo {
    /// The instance id of the coordinator holding the partition's lock;
    /// `null` while nobody holds it (a handover, or no coordinator runs).
    pub owner: Option<String>,
    /// The fencing epoch last handed out with the partition's lock: the
    /// owner's while it is held (0 before anyone ever held it).
    pub epoch: u64,
    /// Unfinished workflows the owner's scheduler holds; `null` when
    /// nobody owns the partition or its owner did not answer in time
    /// (ask again).
    pub workflows: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The shape issue #14 specifies: `{"partitions": {"<p>": {"owner",
    /// "epoch", "workflows"}}}`, nulls included.
    #[test]
    fn the_reply_has_the_documented_shape() {
        let mut reply = PartitionsReply::default();
        reply.partitions.insert(
            "0".into(),
            PartitionInfo {
                owner: Some("coordinator-0123456789ab".into()),
                epoch: 3,
                workflows: Some(12),
            },
        );
        reply.partitions.insert(
            "1".into(),
            PartitionInfo {
                owner: None,
                epoch: 0,
                workflows: None,
            },
        );
        let v = serde_json::to_value(&reply).unwrap();
        assert_eq!(
            v,
            json!({"partitions": {
                "0": {"owner": "coordinator-0123456789ab", "epoch": 3, "workflows": 12},
                "1": {"owner": null, "epoch": 0, "workflows": null}
            }})
        );
        assert_eq!(serde_json::from_value::<PartitionsReply>(v).unwrap(), reply);
    }
}
