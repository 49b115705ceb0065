//! Pipelines that ship with caucus, embedded from `coordinator/pipelines/`.

use super::PipelineSpec;

/// (name, TOML source) of every built-in pipeline.
const BUILTINS: &[(&str, &str)] = &[
    (
        "stock-analysis",
        include_str!("../../pipelines/stock-analysis.toml"),
    ),
    (
        "deep-research",
        include_str!("../../pipelines/deep-research.toml"),
    ),
];

/// Names of the built-in pipelines.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTINS.iter().map(|(name, _)| *name).collect()
}

/// The built-in pipeline called `name`, or `None` if there is none.
pub fn builtin(name: &str) -> Option<PipelineSpec> {
    let (_, source) = BUILTINS.iter().find(|(n, _)| *n == name)?;
    // The sources are compiled in and checked by the tests below, so a parse
    // failure here is a build defect, not bad input.
    Some(PipelineSpec::from_toml(source).expect("built-in pipeline spec parses"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{validate, StageKind};

    #[test]
    fn every_builtin_parses_validates_and_is_named_as_listed() {
        for name in builtin_names() {
            let spec = builtin(name).unwrap();
            assert_eq!(spec.name, name);
            validate(&spec, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(builtin("nope").is_none());
    }

    #[test]
    fn stock_analysis_matches_the_design() {
        let spec = builtin("stock-analysis").unwrap();
        let deps = |s: &str| spec.stage(s).unwrap().depends_on.clone();
        let names: Vec<&str> = spec.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "screening",
                "business",
                "financial",
                "strategy",
                "valuation",
                "review",
                "report"
            ]
        );
        assert!(deps("screening").is_empty());
        assert_eq!(deps("business"), ["screening"]);
        assert_eq!(deps("financial"), ["business"]);
        assert_eq!(deps("strategy"), ["screening"]);
        assert_eq!(deps("valuation"), ["financial", "strategy"]);
        assert_eq!(deps("review"), ["valuation"]);
        assert_eq!(deps("report"), ["review", "valuation"]);
        for stage in &spec.stages {
            if stage.name == "review" {
                assert_eq!(
                    stage.kind,
                    StageKind::Gate,
                    "a human gate before the report"
                );
                assert_eq!(stage.agent, None);
                continue;
            }
            assert_eq!(stage.agent.as_deref(), Some(stage.name.as_str()));
            assert_eq!(stage.kind, StageKind::Task);
        }
        let cap = |a: &str| spec.capacities[a];
        assert_eq!(
            [
                cap("screening"),
                cap("business"),
                cap("financial"),
                cap("strategy"),
                cap("valuation"),
                cap("report")
            ],
            [5, 3, 2, 3, 1, 3]
        );
        let dur = |s: &str| spec.stage(s).unwrap().expected_duration;
        assert_eq!(
            [
                dur("screening"),
                dur("business"),
                dur("financial"),
                dur("strategy"),
                dur("valuation"),
                dur("report")
            ],
            [2.0, 2.0, 2.0, 2.0, 1.0, 1.0]
        );
    }

    #[test]
    fn deep_research_phases() {
        let spec = builtin("deep-research").unwrap();
        let names: Vec<&str> = spec.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "discover",
                "consolidate",
                "validate",
                "analyze",
                "synthesize"
            ]
        );
        let discover = spec.stage("discover").unwrap();
        assert_eq!(discover.fan_out, Some(5));
        assert_eq!(discover.agent.as_deref(), Some("research_discovery"));
        // The seed: failed streams are not retried automatically.
        assert_eq!(discover.retry.max_attempts, 1);
        for stage in &spec.stages {
            assert!(stage.agent.as_deref().unwrap().starts_with("research_"));
            assert!(stage.expected_duration <= stage.timeout.unwrap());
        }
        assert_eq!(spec.timeout, Some(90.0));
    }
}
