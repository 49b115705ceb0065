//! `caucus plan`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use caucus_shared::api::coordinator::plan::{PlanOp, PlanRequest};
use caucus_shared::api::Operation;

use super::{Client, PipelineArg};
use caucus_shared::pipeline::PipelineSpec;

/// The `pipeline` field of a request: a name, or the parsed file.
pub fn pipeline_value(p: &PipelineArg) -> anyhow::Result<Value> {
    let Some(path) = &p.file else {
        return Ok(Value::String(p.pipeline.clone()));
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    parse_pipeline_file(path, &text)
}

/// A pipeline file's text as the request's inline spec: JSON for a `.json`
/// file, TOML otherwise. Its shape is checked here, so a typo is reported
/// in the format the file is written in, with its line and column (the
/// coordinator, which receives JSON, could only say "json").
pub fn parse_pipeline_file(path: &Path, text: &str) -> anyhow::Result<Value> {
    let is_json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if is_json {
        return match serde_json::from_str::<PipelineSpec>(text) {
            Err(e) if e.is_syntax() || e.is_eof() => {
                Err(anyhow::anyhow!("{}: invalid JSON: {e}", path.display()))
            }
            Err(e) => Err(anyhow::anyhow!(
                "{}: invalid pipeline spec (JSON): {e}",
                path.display()
            )),
            Ok(_) => Ok(serde_json::from_str(text)?),
        };
    }
    let t: toml::Value = toml::from_str(text).map_err(|e| {
        anyhow::anyhow!("{}: invalid TOML: {}", path.display(), toml_error(text, &e))
    })?;
    if let Err(e) = toml::from_str::<PipelineSpec>(text) {
        anyhow::bail!(
            "{}: invalid pipeline spec (TOML): {}",
            path.display(),
            toml_error(text, &e)
        );
    }
    Ok(serde_json::to_value(t)?)
}

/// A toml error as `line L, column C: message` (the message alone when the
/// error has no position).
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim_end();
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {msg}")
        }
        None => msg.to_string(),
    }
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
    let req = PlanRequest {
        items,
        pipeline: pipeline_value(pipeline)?,
        capacities: capacities(caps)?,
    };
    if as_json {
        // The reply as it came, fields this CLI does not know included.
        let body = serde_json::to_value(&req)?;
        let plan = client.call_ok("coordinator", PlanOp::NAME, body).await?;
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        let plan = client.op_ok::<PlanOp>(&req).await?;
        print!("{}", plan.gantt);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "name = \"p\"\n[capacities]\na = 1\n[[stages]]\nname = \"one\"\nagent = \"a\"\nexpected_duration = 2\n";

    #[test]
    fn a_toml_file_becomes_the_inline_spec() {
        let v = parse_pipeline_file(Path::new("p.toml"), GOOD).unwrap();
        assert_eq!(v["name"], "p");
        assert_eq!(v["stages"][0]["agent"], "a");
        assert!(PipelineSpec::from_json(v).is_ok());
    }

    #[test]
    fn a_toml_typo_is_reported_as_toml_with_its_position() {
        let typo = GOOD.replace("expected_duration", "expected_duraton");
        let e = parse_pipeline_file(Path::new("bad.toml"), &typo)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("bad.toml: invalid pipeline spec (TOML): line 7, column 1: "),
            "{e}"
        );
        assert!(e.contains("expected_duraton"), "{e}");
        assert!(!e.contains("json") && !e.contains("JSON"), "{e}");
        let syntax = GOOD.replace("name = \"one\"", "name = \"one");
        let e = parse_pipeline_file(Path::new("bad.toml"), &syntax)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("bad.toml: invalid TOML: line 5, column "),
            "{e}"
        );
        let wrong_type = GOOD.replace("a = 1", "a = \"one\"");
        let e = parse_pipeline_file(Path::new("bad.toml"), &wrong_type)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("bad.toml: invalid pipeline spec (TOML): line 3, column 5: "),
            "{e}"
        );
    }

    #[test]
    fn a_json_file_is_reported_as_json() {
        let ok = r#"{"name": "p", "stages": [{"name": "one", "agent": "a"}]}"#;
        let v = parse_pipeline_file(Path::new("p.json"), ok).unwrap();
        assert_eq!(v["stages"][0]["name"], "one");
        let typo = "{\"name\": \"p\",\n \"stagse\": []}";
        let e = parse_pipeline_file(Path::new("bad.json"), typo)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("bad.json: invalid pipeline spec (JSON): unknown field `stagse`"),
            "{e}"
        );
        assert!(e.contains("line 2 column"), "{e}");
        let e = parse_pipeline_file(Path::new("bad.json"), "{\"name\": ")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.json: invalid JSON: "), "{e}");
    }
}
