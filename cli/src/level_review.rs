//! Text lines for the level reviews of one workflow in `caucus status --tasks`.

use serde_json::Value;

/// One line per reviewed level: conflicts, how many were resolved, and the
/// warnings handed to the next level.
pub fn level_review_lines(w: &Value) -> Vec<String> {
    let levels = w["level_review"]["levels"].as_array();
    levels
        .into_iter()
        .flatten()
        .filter_map(|l| {
            let key = l["review_task"].as_str()?;
            let state = w["tasks"][key]["state"].as_str().unwrap_or("?");
            let conflicts = l["conflicts"].as_array().map_or(0, Vec::len);
            let Some(r) = l.get("review") else {
                return Some(format!("{key}: {state}, {conflicts} conflict(s)"));
            };
            let all = r["conflicts"].as_array().cloned().unwrap_or_default();
            let resolved = all.iter().filter(|c| c["resolved"] == true).count();
            let warnings: Vec<&str> = r["warnings_for_next_level"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let mut line = format!("{key}: {}/{} conflict(s) resolved", resolved, all.len());
            if !warnings.is_empty() {
                line.push_str(&format!("; warnings: {}", warnings.join(" | ")));
            }
            Some(line)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pending_and_done_reviews() {
        let w = json!({
            "tasks": {"review@level-0": {"state": "completed"}, "review@level-1": {"state": "ready"}},
            "level_review": {"levels": [
                {"level": 0, "conflicts": [{"resource": "x", "tasks": ["a", "b"]}],
                 "review_task": "review@level-0",
                 "review": {"conflicts": [{"resource": "x", "resolved": true}],
                            "warnings_for_next_level": ["check x"]}},
                {"level": 1, "review_task": "review@level-1"},
                {"level": 2}
            ]}
        });
        assert_eq!(
            level_review_lines(&w),
            vec![
                "review@level-0: 1/1 conflict(s) resolved; warnings: check x",
                "review@level-1: ready, 0 conflict(s)"
            ]
        );
        assert!(level_review_lines(&json!({})).is_empty());
    }
}
