//! Running slots of batches that span partitions: a batch's concurrency
//! limit is one number, while each partition's coordinator resumes its
//! own workflows of the batch (docs/PARTITIONS.md, "Batches").
//!
//! One HASH per batch, `P:{batch:B}:running`, field = a workflow of the
//! batch resumed and not finished yet, value = its partition. A slot is
//! taken only while the hash has fewer fields than the limit; each
//! partition's owner makes its own fields (value = its partition) match
//! what its workflows do (removing those that finished, paused or
//! failed), also right after it took the partition over, so no slot
//! outlives its workflow's run.

use super::keys;
use super::scripts::{self, check_id, run};
use super::RedisPool;
use crate::Error;

/// The running slots of every batch under one key prefix.
#[derive(Clone)]
pub struct BatchSlots {
    pool: RedisPool,
    prefix: String,
}

impl std::fmt::Debug for BatchSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchSlots")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl BatchSlots {
    /// Slots under `prefix` (must match `[A-Za-z0-9_.:-]+`).
    pub fn new(pool: RedisPool, prefix: &str) -> Result<Self, Error> {
        keys::validate_name("key prefix", prefix)?;
        Ok(BatchSlots {
            pool,
            prefix: prefix.to_string(),
        })
    }

    /// Takes a slot of `batch_id` for `workflow_id` (of `partition`) if
    /// fewer than `limit` workflows of the batch run; `true` when it holds
    /// one now (a workflow that held one already keeps it).
    pub async fn acquire(
        &self,
        batch_id: &str,
        workflow_id: &str,
        limit: u32,
        partition: u32,
    ) -> Result<bool, Error> {
        let k = keys::batch_running_key(&self.prefix, batch_id)?;
        check_id("workflow id", workflow_id)?;
        let mut call = scripts::BATCH_ACQUIRE.prepare_invoke();
        call.key(k).arg(workflow_id).arg(limit).arg(partition);
        let (granted, _running): (i64, i64) = run(&self.pool, &call).await?;
        Ok(granted == 1)
    }

    /// Makes `partition`'s slots of `batch_id` exactly `running`, in one
    /// step: every other slot of the partition goes (whoever took it),
    /// those of `running` are present. Returns the workflows of the batch
    /// running after it, over every partition.
    pub async fn sync(
        &self,
        batch_id: &str,
        partition: u32,
        running: &[String],
    ) -> Result<u32, Error> {
        let k = keys::batch_running_key(&self.prefix, batch_id)?;
        for id in running {
            check_id("workflow id", id)?;
        }
        let mut call = scripts::BATCH_SYNC.prepare_invoke();
        call.key(k).arg(partition);
        for id in running {
            call.arg(id);
        }
        let n: i64 = run(&self.pool, &call).await?;
        Ok(u32::try_from(n.max(0)).unwrap_or(u32::MAX))
    }

    /// The workflows of `batch_id` holding a slot (a read, for operators
    /// and tests).
    pub async fn running(&self, batch_id: &str) -> Result<Vec<String>, Error> {
        let k = keys::batch_running_key(&self.prefix, batch_id)?;
        let mut cmd = ::redis::cmd("HKEYS");
        cmd.arg(k);
        let mut ids: Vec<String> = scripts::query(&self.pool, &cmd).await?;
        ids.sort();
        Ok(ids)
    }
}
