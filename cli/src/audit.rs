//! `caucus audit WORKFLOW`: a research run's audit trail,
//! `timestamp | agent | action | result` per line.

use caucus_shared::api::client::decode_reply;
use caucus_shared::api::coordinator::audit::{Audit, AuditRequest};
use caucus_shared::api::Operation;

use super::Client;

/// Prints the audit trail (or the reply as JSON).
pub async fn run(client: &Client, workflow_id: &str, as_json: bool) -> anyhow::Result<i32> {
    let req = AuditRequest {
        workflow_id: workflow_id.to_string(),
    };
    let raw = match client
        .call(Audit::SERVICE, Audit::NAME, serde_json::to_value(&req)?)
        .await
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("coordinator.audit: {} ({})", e.message, e.code);
            return Ok(1);
        }
    };
    if as_json {
        println!("{}", serde_json::to_string_pretty(&raw)?);
        return Ok(0);
    }
    let r = decode_reply::<Audit>(raw)
        .map_err(|e| anyhow::anyhow!("coordinator.audit: {} ({})", e.message, e.code))?;
    println!(
        "# {} {} ({}): {} / {}",
        r.pipeline, r.workflow_id, r.item, r.state, r.phase
    );
    println!("timestamp | agent | action | result");
    for line in &r.lines {
        println!("{line}");
    }
    Ok(0)
}
