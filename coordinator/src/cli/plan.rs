//! `caucus plan`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{Client, PipelineArg};

/// The `pipeline` field of a request: a name, or the parsed file.
pub fn pipeline_value(p: &PipelineArg) -> anyhow::Result<Value> {
    let Some(path) = &p.file else {
        return Ok(Value::String(p.pipeline.clone()));
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let is_json = path.extension().is_some_and(|e| e == "json");
    if is_json {
        return Ok(serde_json::from_str(&text)?);
    }
    let t: toml::Value =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(serde_json::to_value(t)?)
}

/// Parses `AGENT=N` pairs.
pub fn capacities(pairs: &[String]) -> anyhow::Result<BTreeMap<String, u32>> {
    pairs
        .iter()
        .map(|p| {
            let (a, n) = p
                .split_once('=')
                .ok_or_else(|| anyhow::anyhow!("--capacity `{p}`: expected AGENT=N"))?;
            let n: u32 = n
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("--capacity `{p}`: N must be a whole number"))?;
            Ok((a.trim().to_string(), n))
        })
        .collect()
}

pub async fn run(
    client: &Client,
    items: Vec<String>,
    pipeline: &PipelineArg,
    caps: &[String],
    as_json: bool,
) -> anyhow::Result<i32> {
    let body = json!({
        "items": items,
        "pipeline": pipeline_value(pipeline)?,
        "capacities": capacities(caps)?,
    });
    let plan = client.call_ok("coordinator", "plan", body).await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        print!("{}", plan["gantt"].as_str().unwrap_or_default());
    }
    Ok(0)
}
