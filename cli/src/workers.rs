//! `caucus workers`.

use caucus_shared::api::coordinator::partitions::{Partitions, PartitionsReply};
use caucus_shared::api::coordinator::workers::{Workers, WorkersReply};
use caucus_shared::api::{Empty, Operation};

use super::render::{duration, table, Align::Left, Align::Right};
use super::Client;

pub async fn run(client: &Client, as_json: bool) -> anyhow::Result<i32> {
    if as_json {
        // The reply as it came, fields this CLI does not know included,
        // with the `partitions` reply's map as one more field (replies
        // gain fields without notice, so scripts reading `agents` are
        // unaffected).
        let mut v = client
            .call_ok("coordinator", Workers::NAME, serde_json::Value::Null)
            .await?;
        if let Some(p) = partitions(client).await {
            let p = serde_json::to_value(p)?;
            if let (Some(obj), Some(map)) = (v.as_object_mut(), p.get("partitions")) {
                obj.insert("partitions".into(), map.clone());
            }
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    let reply = client.op_ok::<Workers>(&Empty {}).await?;
    print!("{}", render(&reply));
    if let Some(p) = partitions(client).await {
        print!("{}", render_partitions(&p));
    }
    Ok(0)
}

/// The `coordinator.partitions` reply; `None`, with a note on stderr, when
/// the coordinator could not say (the workers table is still worth
/// printing: a coordinator older than the operation answers
/// `unknown_operation`).
async fn partitions(client: &Client) -> Option<PartitionsReply> {
    match client.op::<Partitions>(&Empty {}).await {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("partitions: not shown: {}: {}", e.code, e.message);
            None
        }
    }
}

/// The text table of a `coordinator.partitions` reply, after a blank line:
/// per partition its owner (instance id), fencing epoch and unfinished
/// workflows.
pub fn render_partitions(v: &PartitionsReply) -> String {
    let mut parts: Vec<(&String, _)> = v.partitions.iter().collect();
    // Numerically: "10" after "9".
    parts.sort_by_key(|(p, _)| (p.len(), p.as_str()));
    let rows: Vec<Vec<String>> = parts
        .into_iter()
        .map(|(p, i)| {
            vec![
                p.clone(),
                i.owner.clone().unwrap_or_else(|| "none".into()),
                i.epoch.to_string(),
                i.workflows.map_or_else(|| "?".into(), |n| n.to_string()),
            ]
        })
        .collect();
    let mut out = String::from("\n");
    out.push_str(&table(
        &[
            ("partition", Right),
            ("owner", Left),
            ("epoch", Right),
            ("workflows", Right),
        ],
        &rows,
    ));
    if v.partitions.values().any(|i| i.owner.is_none()) {
        out.push_str(
            "owner none: no coordinator holds the partition now (a handover, or none runs)\n",
        );
    }
    if v.partitions
        .values()
        .any(|i| i.owner.is_some() && i.workflows.is_none())
    {
        out.push_str("workflows ?: the owner did not answer in time; run it again\n");
    }
    out
}

/// The text table of a `coordinator.workers` reply: per agent type its
/// capacity (live workers' slots, capped), the leases held now (Redis), the
/// tasks the scheduler has in flight, the task queue, ready tasks and the
/// oldest ready task's wait; columns as wide as their widest cell.
pub fn render(v: &WorkersReply) -> String {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for a in &v.agents {
        let workers: Vec<String> = a
            .workers
            .iter()
            .map(|w| {
                let missed = if w.heartbeat_missed {
                    " (missed heartbeat)"
                } else {
                    ""
                };
                format!("{}×{}{missed}", w.worker_id, w.slots)
            })
            .collect();
        let mut capacity = a.capacity.to_string();
        if let Some(cap) = a.cap {
            capacity.push_str(&format!(" (cap {cap})"));
        }
        let wait = if a.ready > 0 {
            duration(a.oldest_wait_ms)
        } else {
            "-".into()
        };
        if a.recovering_ms > 0 {
            notes.push(format!(
                "{}: recovering after a Redis restart, no new lease for {}",
                a.agent_type,
                duration(i64::try_from(a.recovering_ms).unwrap_or(i64::MAX))
            ));
        }
        rows.push(vec![
            a.agent_type.clone(),
            capacity,
            a.in_use.to_string(),
            a.in_flight.to_string(),
            a.queue_depth.to_string(),
            a.ready.to_string(),
            wait,
            if workers.is_empty() {
                "none".into()
            } else {
                workers.join(", ")
            },
        ]);
    }
    let mut out = if rows.is_empty() {
        "no agent types: no worker is registered and no task is waiting\n".to_string()
    } else {
        table(
            &[
                ("agent", Left),
                ("capacity", Right),
                ("leased", Right),
                ("in flight", Right),
                ("queued", Right),
                ("ready", Right),
                ("oldest wait", Right),
                ("workers", Left),
            ],
            &rows,
        )
    };
    for n in notes {
        out.push_str(&n);
        out.push('\n');
    }
    match &v.bottleneck {
        Some(b) => out.push_str(&format!(
            "live bottleneck: {} (oldest ready task waiting {}, {} ready); about {} more slot(s) would clear it\n",
            b.agent_type,
            duration(b.oldest_wait_ms),
            b.ready,
            b.more_slots,
        )),
        None => out.push_str("live bottleneck: none (no ready task is waiting)\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    fn render(v: &Value) -> String {
        super::render(&serde_json::from_value(v.clone()).expect("a workers reply"))
    }

    #[test]
    fn columns_fit_long_agent_types_and_leases_are_shown() {
        let v = json!({
            "agents": [
                {"agent_type": "fundamental_analysis_long_name", "capacity": 3, "cap": null,
                 "in_use": 0, "in_flight": 0, "queue_depth": 0, "ready": 0,
                 "oldest_wait_ms": 0, "recovering_ms": 0,
                 "workers": [{"worker_id": "w-1", "slots": 3, "heartbeat_missed": false}]},
                {"agent_type": "valuation", "capacity": 1, "cap": 1,
                 "in_use": 1, "in_flight": 1, "queue_depth": 4, "ready": 2,
                 "oldest_wait_ms": 4210, "recovering_ms": 0,
                 "workers": [{"worker_id": "w-2", "slots": 2, "heartbeat_missed": true}]},
            ],
            "bottleneck": {"agent_type": "valuation", "oldest_wait_ms": 4210, "ready": 2, "more_slots": 2},
        });
        assert_eq!(
            render(&v),
            "agent                            capacity  leased  in flight  queued  ready  oldest wait  workers\n\
             fundamental_analysis_long_name          3       0          0       0      0            -  w-1×3\n\
             valuation                       1 (cap 1)       1          1       4      2         4.2s  w-2×2 (missed heartbeat)\n\
             live bottleneck: valuation (oldest ready task waiting 4.2s, 2 ready); about 2 more slot(s) would clear it\n"
        );
    }

    #[test]
    fn partitions_follow_the_table_numerically_with_unknowns_explained() {
        let v: super::PartitionsReply = serde_json::from_value(json!({"partitions": {
            "10": {"owner": "coordinator-bbbbbbbbbbbb", "epoch": 12, "workflows": 0},
            "0": {"owner": "coordinator-aaaaaaaaaaaa", "epoch": 3, "workflows": 41},
            "2": {"owner": null, "epoch": 7, "workflows": null},
            "9": {"owner": "coordinator-aaaaaaaaaaaa", "epoch": 4, "workflows": null},
        }}))
        .expect("a partitions reply");
        assert_eq!(
            super::render_partitions(&v),
            "\n\
             partition  owner                     epoch  workflows\n\
             \x20       0  coordinator-aaaaaaaaaaaa      3         41\n\
             \x20       2  none                          7          ?\n\
             \x20       9  coordinator-aaaaaaaaaaaa      4          ?\n\
             \x20      10  coordinator-bbbbbbbbbbbb     12          0\n\
             owner none: no coordinator holds the partition now (a handover, or none runs)\n\
             workflows ?: the owner did not answer in time; run it again\n"
        );
    }

    #[test]
    fn no_agents_and_recovery() {
        let out = render(&json!({"agents": [], "bottleneck": null}));
        assert!(out.starts_with("no agent types"), "{out}");
        let out = render(&json!({"agents": [
            {"agent_type": "a", "capacity": 1, "in_use": 0, "recovering_ms": 12000, "workers": []}
        ], "bottleneck": null}));
        assert!(
            out.contains("a: recovering after a Redis restart, no new lease for 12.0s"),
            "{out}"
        );
    }
}
