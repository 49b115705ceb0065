//! `caucus debates`, `caucus debate <id>` and `caucus decide <id>`: the
//! facilitator's debates and expert queues from the terminal.

use serde_json::{json, Value};

use super::Client;

/// Filters of `caucus debates`.
#[derive(Debug, Clone, clap::Args)]
pub struct ListArgs {
    /// Only this state (awaiting_ack, awaiting_evidence, awaiting_verdict,
    /// mediating, awaiting_human, provisional, resolved, …).
    #[arg(long)]
    pub state: Option<String>,
    /// Only this level (1..=5).
    #[arg(long)]
    pub level: Option<u8>,
    /// Only this workflow.
    #[arg(long)]
    pub workflow: Option<String>,
    /// Only this item.
    #[arg(long)]
    pub item: Option<String>,
}

/// Flags of `caucus decide` (a level-3 expert decision).
#[derive(Debug, Clone, clap::Args)]
pub struct DecideArgs {
    /// The debate.
    pub debate_id: String,
    /// The expert deciding.
    #[arg(long)]
    pub expert: String,
    /// The side whose position stands: challenger or challenged.
    #[arg(long)]
    pub side: Option<String>,
    /// Why.
    #[arg(long, default_value = "")]
    pub rationale: String,
    /// The expert cannot take it: the conservative default applies (level 4).
    #[arg(long)]
    pub unavailable: bool,
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// `caucus debates`: open and recent debates plus each expert's load.
pub async fn list(client: &Client, a: ListArgs, as_json: bool) -> anyhow::Result<i32> {
    let mut body = json!({});
    if let Some(s) = a.state {
        body["state"] = json!(s);
    }
    if let Some(l) = a.level {
        body["level"] = json!(l);
    }
    if let Some(w) = a.workflow {
        body["workflow_id"] = json!(w);
    }
    if let Some(i) = a.item {
        body["item"] = json!(i);
    }
    let (debates, load) = tokio::try_join!(
        client.call_ok("facilitator", "debates", body),
        client.call_ok("facilitator", "expert_load", json!({})),
    )?;
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"debates": debates["debates"], "expert_load": load})
            )?
        );
        return Ok(0);
    }
    let list = debates["debates"].as_array().cloned().unwrap_or_default();
    println!("{} debate(s), queue order:", list.len());
    for d in &list {
        println!(
            "  {:<18} L{} {:<17} {:<13} {} vs {}  {}{}",
            text(&d["debate_id"]),
            text(&d["level"]),
            text(&d["state"]),
            text(&d["priority"]),
            text(&d["challenger"]),
            text(&d["challenged"]),
            text(&d["topic"]),
            match d["expert"].as_str() {
                Some(e) => format!("  (expert {e})"),
                None => String::new(),
            }
        );
    }
    let experts: Vec<String> = load
        .as_object()
        .map(|m| m.iter().map(|(e, l)| format!("{e} {}", text(l))).collect())
        .unwrap_or_default();
    println!(
        "experts: {}",
        if experts.is_empty() {
            "none configured".to_string()
        } else {
            experts.join(", ")
        }
    );
    Ok(0)
}

/// `caucus debate <id>`: one debate in full.
pub async fn show(client: &Client, id: &str) -> anyhow::Result<i32> {
    let d = client
        .call_ok("facilitator", "debate", json!({"debate_id": id}))
        .await?;
    println!("{}", serde_json::to_string_pretty(&d)?);
    Ok(0)
}

/// `caucus decide <id>`: an expert's level-3 decision.
pub async fn decide(client: &Client, a: DecideArgs, as_json: bool) -> anyhow::Result<i32> {
    let mut body = json!({
        "debate_id": a.debate_id,
        "expert": a.expert,
        "rationale": a.rationale,
        "unavailable": a.unavailable,
    });
    if let Some(s) = a.side {
        body["side"] = json!(s);
    }
    let r = client.call_ok("facilitator", "decide", body).await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "{}: {} at level {} ({})",
            text(&r["debate"]["debate_id"]),
            text(&r["resolution"]["label"]),
            text(&r["resolution"]["level"]),
            text(&r["resolution"]["final_position"]["statement"]),
        );
    }
    Ok(0)
}
