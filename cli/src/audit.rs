//! `caucus audit WORKFLOW`: a research run's audit trail,
//! `timestamp | agent | action | result` per line.

use serde_json::json;

use super::Client;

/// Prints the audit trail (or the reply as JSON).
pub async fn run(client: &Client, workflow_id: &str, as_json: bool) -> anyhow::Result<i32> {
    let r = match client
        .call(
            "coordinator",
            "audit",
            json!({ "workflow_id": workflow_id }),
        )
        .await
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("coordinator.audit: {} ({})", e.message, e.code);
            return Ok(1);
        }
    };
    if as_json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(0);
    }
    println!(
        "# {} {} ({}): {} / {}",
        r["pipeline"].as_str().unwrap_or("?"),
        r["workflow_id"].as_str().unwrap_or("?"),
        r["item"].as_str().unwrap_or("?"),
        r["state"].as_str().unwrap_or("?"),
        r["phase"].as_str().unwrap_or("?")
    );
    println!("timestamp | agent | action | result");
    for line in r["lines"].as_array().into_iter().flatten() {
        println!("{}", line.as_str().unwrap_or(""));
    }
    Ok(0)
}
