//! `caucus debates`, `caucus debate <id>` and `caucus decide <id>`: the
//! facilitator's debates and expert queues from the terminal.

use caucus_shared::api::facilitator::{
    DebateRequest, Debates, DebatesReply, DebatesRequest, Decide, DecideRequest, ExpertLoad,
    ExpertLoadReply, GetDebate, Side,
};
use caucus_shared::api::Empty;
use serde_json::Value;

use super::render::{table, Align::Left};
use super::Client;

mod show;

pub use show::render_debate;

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
    /// Debates per page (default 200, at most 500).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Where the page starts: the cursor the previous page printed.
    #[arg(long)]
    pub cursor: Option<String>,
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
    pub side: Option<Side>,
    /// Why.
    #[arg(long, default_value = "")]
    pub rationale: String,
    /// The expert cannot take it: the conservative default applies (level 4).
    #[arg(long)]
    pub unavailable: bool,
}

/// `caucus debates`: open and recent debates plus each expert's load.
pub async fn list(client: &Client, a: ListArgs, as_json: bool) -> anyhow::Result<i32> {
    let req = DebatesRequest {
        state: a.state,
        level: a.level,
        workflow_id: a.workflow,
        item: a.item,
        limit: a.limit,
        cursor: a.cursor,
    };
    if as_json {
        let body = serde_json::to_value(&req)?;
        let (debates, load) = tokio::try_join!(
            client.call_ok("facilitator", "debates", body),
            client.call_ok(
                "facilitator",
                "expert_load",
                Value::Object(Default::default())
            ),
        )?;
        println!(
            "{}",
            serde_json::to_string_pretty(&with_load(debates, load))?
        );
        return Ok(0);
    }
    let (debates, load) = tokio::try_join!(
        client.op_ok::<Debates>(&req),
        client.op_ok::<ExpertLoad>(&Empty {}),
    )?;
    print!("{}", render_list(&debates, &load));
    if let Some(c) = &debates.next_cursor {
        println!("more debates: caucus debates --cursor {c} (with the same filters)");
    }
    Ok(0)
}

/// The `--json` of `caucus debates`: the page as it came (with
/// `next_cursor`, null on the last page) and the experts' load.
fn with_load(debates: Value, load: Value) -> Value {
    let mut out = match debates {
        Value::Object(m) => m,
        other => return other,
    };
    out.entry("next_cursor").or_insert(Value::Null);
    out.insert("expert_load".into(), load);
    Value::Object(out)
}

/// A `facilitator.debates` reply and the expert load as a table in queue
/// order, columns as wide as their widest cell.
pub fn render_list(debates: &DebatesReply, load: &ExpertLoadReply) -> String {
    let list = &debates.debates;
    let mut out = if debates.total > list.len() {
        // The facilitator pages its list: this is one page.
        format!(
            "{} of {} debate(s), queue order:\n",
            list.len(),
            debates.total
        )
    } else {
        format!("{} debate(s), queue order:\n", list.len())
    };
    if !list.is_empty() {
        let rows: Vec<Vec<String>> = list
            .iter()
            .map(|d| {
                vec![
                    d.debate_id.clone(),
                    format!("L{}", d.level),
                    d.state.as_str().to_string(),
                    d.priority.as_str().to_string(),
                    format!("{} vs {}", d.challenger, d.challenged),
                    d.expert.clone().unwrap_or_else(|| "-".into()),
                    d.topic.clone(),
                ]
            })
            .collect();
        let t = table(
            &[
                ("debate", Left),
                ("level", Left),
                ("state", Left),
                ("priority", Left),
                ("challenger vs challenged", Left),
                ("expert", Left),
                ("topic", Left),
            ],
            &rows,
        );
        for l in t.lines() {
            out.push_str(&format!("  {l}\n"));
        }
    }
    let experts: Vec<String> = load.iter().map(|(e, l)| format!("{e} {l}")).collect();
    out.push_str(&format!(
        "experts: {}\n",
        if experts.is_empty() {
            "none configured".to_string()
        } else {
            experts.join(", ")
        }
    ));
    out
}

/// `caucus debate <id>`: one debate in full.
pub async fn show(client: &Client, id: &str, as_json: bool) -> anyhow::Result<i32> {
    let req = DebateRequest {
        debate_id: id.to_string(),
    };
    if as_json {
        let d = client
            .call_ok("facilitator", "debate", serde_json::to_value(&req)?)
            .await?;
        println!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        let d = client.op_ok::<GetDebate>(&req).await?;
        print!("{}", render_debate(&d));
    }
    Ok(0)
}

/// `caucus decide <id>`: an expert's level-3 decision.
pub async fn decide(client: &Client, a: DecideArgs, as_json: bool) -> anyhow::Result<i32> {
    let req = DecideRequest {
        debate_id: a.debate_id,
        expert: a.expert,
        side: a.side,
        position: None,
        rationale: a.rationale,
        unavailable: a.unavailable,
    };
    if as_json {
        let r = client
            .call_ok("facilitator", "decide", serde_json::to_value(&req)?)
            .await?;
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(0);
    }
    let r = client.op_ok::<Decide>(&req).await?;
    let res = r.resolution.as_ref();
    println!(
        "{}: {} at level {} ({})",
        r.debate.debate_id,
        res.map_or("-".into(), |r| r.label.clone()),
        res.map_or("-".into(), |r| r.level.to_string()),
        res.and_then(|r| r.final_position.as_ref())
            .map_or("-".into(), |p| p.statement.clone()),
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_list_is_a_table_in_queue_order() {
        let line = |id: &str,
                    level: u8,
                    state: &str,
                    prio: &str,
                    who: [&str; 2],
                    expert: Option<&str>,
                    topic: &str| {
            json!({"debate_id": id, "challenge_id": id, "level": level, "state": state,
                   "priority": prio, "challenger": who[0], "challenged": who[1],
                   "expert": expert, "topic": topic, "snapshot_id": "snap_1",
                   "provisional": false, "opened_at": "2026-11-25T14:00:00Z"})
        };
        let debates: DebatesReply = serde_json::from_value(json!({"total": 3, "next_cursor": "2", "debates": [
            line("wf-1234-margin", 3, "awaiting_human", "critical-path", ["strategy", "financial"], Some("alice"), "operating margin 25%"),
            line("CH-2", 1, "awaiting_ack", "supporting", ["a", "b"], None, "t"),
        ]}))
        .unwrap();
        let load =
            ExpertLoadReply::from([("alice".into(), "1/3".into()), ("bob".into(), "0/3".into())]);
        assert_eq!(
            render_list(&debates, &load),
            "2 of 3 debate(s), queue order:\n  \
             debate          level  state           priority       challenger vs challenged  expert  topic\n  \
             wf-1234-margin  L3     awaiting_human  critical-path  strategy vs financial     alice   operating margin 25%\n  \
             CH-2            L1     awaiting_ack    supporting     a vs b                    -       t\n\
             experts: alice 1/3, bob 0/3\n"
        );
        let empty: DebatesReply =
            serde_json::from_value(json!({"debates": [], "total": 0})).unwrap();
        assert_eq!(
            render_list(&empty, &ExpertLoadReply::new()),
            "0 debate(s), queue order:\nexperts: none configured\n"
        );
    }

    #[test]
    fn the_json_list_keeps_the_page_and_adds_the_load() {
        let out = with_load(json!({"debates": [], "total": 0}), json!({"alice": "0/3"}));
        assert_eq!(
            out,
            json!({"debates": [], "total": 0, "next_cursor": null, "expert_load": {"alice": "0/3"}})
        );
    }
}
