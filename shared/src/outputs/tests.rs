use serde_json::json;

use super::research::{
    AnalysisOutput, DiscoveryOutput, Section, SynthesisOutput, ValidationOutput,
};
use super::{decode, to_value, OutputError};

#[test]
fn a_built_in_shape_round_trips_unchanged() {
    let out = json!({
        "schema_version": 1, "agent_type": "research_discovery", "topic": "t", "stream": 2,
        "aspect": "background",
        "sources": [{"id": "s2-1", "title": "x", "url": "https://a.org/t", "domain": "a.org",
                     "aspect": "background", "credibility": 72, "stream": 2, "lang": "en"}],
        "search_history": ["t background"], "progress": {"items_done": 1, "items_total": 1},
        "writes": [{"key": "streams/stream-2/progress.md", "value": "done"}],
    });
    let d: DiscoveryOutput = decode(&out).unwrap();
    assert_eq!(d.domains(), vec!["a.org"]);
    assert_eq!(to_value(&d), out);
}

#[test]
fn odd_fields_read_as_absent_and_odd_entries_as_empty() {
    let v: ValidationOutput = decode(&json!({
        "sources": [{"validated": "yes", "credibility": "high"}, 3], "partial": true
    }))
    .unwrap();
    let s = v.sources.unwrap();
    assert_eq!(s.len(), 2);
    assert!(!s[0].is_validated() && s[0].credibility.is_none());
    assert_eq!(v.partial, Some(true));
    let a: AnalysisOutput = decode(&json!({"patterns": "none", "insights": [{}]})).unwrap();
    assert!(a.patterns.is_none());
    assert_eq!(a.insights.unwrap().len(), 1);
    assert_eq!(
        decode::<SynthesisOutput>(&json!(null)).unwrap(),
        SynthesisOutput::default()
    );
}

#[test]
fn sections_are_texts_or_lists() {
    let s: SynthesisOutput = decode(&json!({"sections": {
        "a": "text", "b": [], "c": ["x"], "d": 3, "e": "  "
    }}))
    .unwrap();
    let empty = |n: &str| s.section(n).is_none_or(Section::is_empty);
    assert!(!empty("a") && empty("b") && !empty("c") && empty("d") && empty("e") && empty("f"));
    assert_eq!(s.section("c").unwrap().bullets(), "- x\n");
}

#[test]
fn another_schema_version_is_refused() {
    let e = decode::<DiscoveryOutput>(&json!({"schema_version": 2})).unwrap_err();
    assert!(
        matches!(e, OutputError::UnsupportedSchemaVersion { .. }),
        "{e}"
    );
    assert!(decode::<DiscoveryOutput>(&json!({"schema_version": 1})).is_ok());
    assert!(decode::<DiscoveryOutput>(&json!({"schema_version": 1.0})).is_ok());
    assert!(decode::<DiscoveryOutput>(&json!({"schema_version": "1"})).is_err());
}
