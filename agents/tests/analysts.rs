//! Built-in analysts on the bundled synthetic data set (pure, no servers).

use std::collections::BTreeMap;

use caucus_agents::analysts::{self, known_agent_types, AnalystOutput, Dataset};
use caucus_shared::task::TaskDispatch;
use serde_json::{json, Value};

fn data() -> &'static Dataset {
    Dataset::bundled().expect("bundled data set parses")
}

fn task(item: &str, stage: &str, inputs: BTreeMap<String, Value>, params: Value) -> TaskDispatch {
    serde_json::from_value(json!({
        "task_id": format!("wf-{item}/{stage}"), "workflow_id": format!("wf-{item}"),
        "item": item, "pipeline": "stock-analysis", "stage": stage, "agent_type": stage,
        "attempt": 1, "inputs": inputs, "params": params,
        "dispatched_at": "2025-11-16T10:30:00Z"
    }))
    .unwrap()
}

/// Dependencies of the built-in stock-analysis pipeline.
fn deps(stage: &str) -> &'static [&'static str] {
    match stage {
        "business" | "strategy" => &["screening"],
        "financial" => &["business"],
        "valuation" => &["financial", "strategy"],
        "report" => &["valuation"],
        _ => &[],
    }
}

/// Runs the whole pipeline for one ticker, feeding outputs forward like the coordinator.
fn pipeline_with(
    item: &str,
    extra: &BTreeMap<String, Value>,
    params: Value,
) -> BTreeMap<String, AnalystOutput> {
    let mut outs: BTreeMap<String, AnalystOutput> = BTreeMap::new();
    for stage in known_agent_types() {
        let mut inputs: BTreeMap<String, Value> = deps(stage)
            .iter()
            .map(|d| (d.to_string(), outs[*d].output.clone()))
            .collect();
        inputs.extend(extra.clone());
        let out = analysts::run(stage, &task(item, stage, inputs, params.clone()), data())
            .unwrap_or_else(|e| panic!("{item} {stage}: {e}"));
        outs.insert(stage.to_string(), out);
    }
    outs
}

fn pipeline(item: &str) -> BTreeMap<String, AnalystOutput> {
    pipeline_with(item, &BTreeMap::new(), Value::Null)
}

/// Tickers whose capex was seeded with a jump, and the year of the jump.
const CAPEX_SEEDED: [(&str, i64); 5] = [
    ("INTC", 2023),
    ("META", 2024),
    ("MSFT", 2024),
    ("NEE", 2024),
    ("TSLA", 2023),
];

/// Tickers seeded with a steady margin trend, so the trailing average
/// (financial) and the trend view (strategy) differ by ≥ 3 points.
const DISAGREEMENT_SEEDED: [&str; 12] = [
    "AMD", "AMZN", "AVGO", "BA", "INTC", "LLY", "META", "NFLX", "NKE", "NVDA", "PFE", "TSLA",
];

fn f64_at(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {pointer} in {v}"))
}

#[test]
fn bundled_data_set_is_synthetic_labelled_and_complete() {
    let d = data();
    assert!(d.is_synthetic());
    assert!(d.note().contains("SYNTHETIC") && d.note().contains("NOT real financial data"));
    let tickers = d.tickers();
    assert!(tickers.len() >= 40, "{} tickers", tickers.len());
    for t in [
        "AAPL", "MSFT", "GOOGL", "AMZN", "TSLA", "META", "NVDA", "BRK.B", "JPM",
    ] {
        assert!(tickers.contains(&t), "{t} missing");
    }
    for t in &tickers {
        let c = d.company(t).unwrap();
        assert_eq!(c.years.len(), 5, "{t}");
        assert_eq!(c.years[0].fiscal_year, 2020);
        assert!(!c.sector.is_empty() && c.price > 0.0);
    }
    // Look-ups are case-insensitive.
    assert_eq!(d.company("brk.b").unwrap().ticker, "BRK.B");
}

#[test]
fn screening_filters_and_scores() {
    let p = pipeline("AAPL");
    let s = &p["screening"].output;
    assert_eq!(s["passed"], json!(true));
    let score = f64_at(s, "/score");
    assert!((0.0..=100.0).contains(&score));
    assert!(s["reasons"].as_array().unwrap().len() >= 4);

    // MCD's synthetic balance sheet has a negative equity proxy, ORCL's too much debt.
    for (t, why) in [
        ("MCD", "FAIL: equity proxy"),
        ("ORCL", "FAIL: debt/equity proxy"),
    ] {
        let out = analysts::run(
            "screening",
            &task(t, "screening", BTreeMap::new(), Value::Null),
            data(),
        )
        .unwrap();
        assert_eq!(out.output["passed"], json!(false));
        let reasons = out.output["reasons"].to_string();
        assert!(reasons.contains(why), "{t}: {reasons}");
        let leverage = out.output["filters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == "max_debt_to_equity");
        assert_eq!(leverage.unwrap()["passed"], json!(false));
    }

    // A minimum revenue above AAPL's fails it, and says why.
    let strict = analysts::run(
        "screening",
        &task(
            "AAPL",
            "screening",
            BTreeMap::new(),
            json!({"min_revenue": 1.0e7}),
        ),
        data(),
    )
    .unwrap();
    assert_eq!(strict.output["passed"], json!(false));
    assert!(strict.output["reasons"][0]
        .as_str()
        .unwrap()
        .starts_with("FAIL: FY2024 revenue"));

    // Regime favourability moves the score by the sector's points.
    let inputs = BTreeMap::from([(
        "regime".to_string(),
        json!({"implications": {"sector_favorability_changes": {"Technology": -15}}}),
    )]);
    let bear = analysts::run(
        "screening",
        &task("AAPL", "screening", inputs, Value::Null),
        data(),
    )
    .unwrap();
    assert!((f64_at(&bear.output, "/score") - (score - 15.0)).abs() < 0.11);
}

#[test]
fn business_growth_and_moat() {
    let c = data().company("AAPL").unwrap();
    let out = analysts::run(
        "business",
        &task("AAPL", "business", BTreeMap::new(), Value::Null),
        data(),
    )
    .unwrap();
    let expected = (c.years[4].revenue / c.years[0].revenue).powf(0.25) - 1.0;
    assert!((f64_at(&out.output, "/revenue_cagr") - expected).abs() < 1e-6);
    let moat = f64_at(&out.output, "/moat_score");
    assert!((0.0..=100.0).contains(&moat));
    assert_eq!(
        out.output["revenue_growth_by_year"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    // V's high, steady margins make a wide moat; WMT's thin margins do not.
    let moat_of = |t: &str| {
        let o = analysts::run(
            "business",
            &task(t, "business", BTreeMap::new(), Value::Null),
            data(),
        )
        .unwrap();
        o.output["moat"].as_str().unwrap().to_string()
    };
    assert_eq!(moat_of("V"), "wide");
    assert_ne!(moat_of("WMT"), "wide");
}

#[test]
fn financial_margins_fcf_and_margin_assumption() {
    let c = data().company("AAPL").unwrap();
    let out = analysts::run(
        "financial",
        &task("AAPL", "financial", BTreeMap::new(), Value::Null),
        data(),
    )
    .unwrap();
    let years = out.output["years"].as_array().unwrap();
    assert_eq!(years.len(), 5);
    for (row, y) in years.iter().zip(&c.years) {
        assert!((f64_at(row, "/free_cash_flow") - (y.operating_cash_flow - y.capex)).abs() < 0.01);
        assert!((f64_at(row, "/gross_margin") - y.gross_profit / y.revenue).abs() < 1e-6);
        assert!((f64_at(row, "/net_margin") - y.net_income / y.revenue).abs() < 1e-6);
        assert!((f64_at(row, "/operating_margin") - y.operating_income / y.revenue).abs() < 1e-6);
    }
    let trailing: f64 = c.years[2..]
        .iter()
        .map(|y| y.operating_income / y.revenue)
        .sum::<f64>()
        / 3.0;
    assert!((f64_at(&out.output, "/operating_margin_assumption/value") - trailing).abs() < 1e-6);
    let margin = out
        .findings
        .iter()
        .find(|f| f.key == "operating_margin")
        .unwrap();
    assert_eq!(margin.metric.as_deref(), Some("operating_margin"));
    assert!((margin.value.unwrap() - trailing).abs() < 1e-6);
}

#[test]
fn capex_anomaly_found_exactly_for_seeded_tickers() {
    for t in data().tickers() {
        let out = analysts::run(
            "financial",
            &task(t, "financial", BTreeMap::new(), Value::Null),
            data(),
        )
        .unwrap();
        let flagged: Vec<&analysts::Finding> = out
            .findings
            .iter()
            .filter(|f| f.key == "capex_anomaly")
            .collect();
        match CAPEX_SEEDED.iter().find(|(s, _)| *s == t) {
            Some((_, year)) => {
                assert_eq!(flagged.len(), 1, "{t}: {flagged:?}");
                let f = flagged[0];
                assert_eq!(f.finding, "Abnormal capex increase");
                assert!((0.0..=1.0).contains(&f.confidence) && f.confidence >= 0.55);
                assert!(
                    f.evidence[0].starts_with(&format!("FY{year} capex ")),
                    "{:?}",
                    f.evidence
                );
                assert!(f.evidence[0].contains("× 3-yr average"), "{:?}", f.evidence);
                assert!(f.value.unwrap() > 1.5);
                assert_eq!(out.output["capex_anomalies"][0]["fiscal_year"], json!(year));
            }
            None => assert!(flagged.is_empty(), "{t} unexpectedly flagged: {flagged:?}"),
        }
    }
}

#[test]
fn margin_disagreement_present_exactly_for_seeded_tickers() {
    let tickers = data().tickers();
    assert!(
        DISAGREEMENT_SEEDED.len() * 4 >= tickers.len(),
        "about a quarter of tickers disagree"
    );
    for t in tickers {
        let fin = analysts::run(
            "financial",
            &task(t, "financial", BTreeMap::new(), Value::Null),
            data(),
        )
        .unwrap();
        let strat = analysts::run(
            "strategy",
            &task(t, "strategy", BTreeMap::new(), Value::Null),
            data(),
        )
        .unwrap();
        let f = f64_at(&fin.output, "/operating_margin_assumption/value");
        let s = f64_at(&strat.output, "/operating_margin_assumption/value");
        let gap = (f - s).abs();
        if DISAGREEMENT_SEEDED.contains(&t) {
            assert!(gap >= 0.03, "{t}: financial {f:.4} vs strategy {s:.4}");
        } else {
            assert!(gap < 0.03, "{t}: unexpected gap {gap:.4}");
        }
        // Both sides publish their view as a finding on the same metric.
        for out in [&fin, &strat] {
            assert!(out
                .findings
                .iter()
                .any(|x| x.metric.as_deref() == Some("operating_margin")));
        }
    }
    // Valuation records the gap it saw between its two inputs.
    let p = pipeline("NVDA");
    assert!(f64_at(&p["valuation"].output, "/assumptions/margin_disagreement") >= 0.03);
    assert_eq!(
        p["valuation"].output["assumptions"]["operating_margin_source"],
        json!("financial")
    );
}

#[test]
fn strategy_roic_trend() {
    let c = data().company("META").unwrap();
    let out = analysts::run(
        "strategy",
        &task("META", "strategy", BTreeMap::new(), Value::Null),
        data(),
    )
    .unwrap();
    let roic = out.output["roic_by_year"].as_array().unwrap();
    for (row, y) in roic.iter().zip(&c.years) {
        assert!(
            (f64_at(row, "/roic") - y.operating_income * 0.79 / y.invested_capital).abs() < 1e-6
        );
    }
    assert_eq!(out.output["roic_trend"]["direction"], json!("improving"));
    assert!(f64_at(&out.output, "/roic_trend/slope_per_year") > 0.0);
    let r2 = f64_at(&out.output, "/roic_trend/r_squared");
    assert!((0.0..=1.0).contains(&r2));
    let intc = analysts::run(
        "strategy",
        &task("INTC", "strategy", BTreeMap::new(), Value::Null),
        data(),
    )
    .unwrap();
    assert_eq!(intc.output["roic_trend"]["direction"], json!("declining"));
}

/// One company with round numbers, so the DCF can be checked by hand.
fn hand_dataset() -> Dataset {
    let year = |fy: i32| {
        json!({"fiscal_year": fy, "revenue": 1000.0, "gross_profit": 400.0, "operating_income": 200.0,
               "net_income": 150.0, "capex": 75.0, "operating_cash_flow": 250.0, "depreciation": 50.0,
               "total_debt": 200.0, "cash": 100.0, "shares_outstanding": 100.0, "invested_capital": 800.0})
    };
    let doc = json!({"_source": "hand-made test figures", "companies": [
        {"ticker": "HAND", "name": "Hand Co", "sector": "Technology", "price": 20.0,
         "years": [year(2022), year(2023), year(2024)]}
    ]});
    Dataset::from_json_str(&doc.to_string(), "test").unwrap()
}

#[test]
fn valuation_dcf_matches_hand_calculation() {
    // Revenue 1000 growing 10 %, margin 20 %, tax 21 %, D&A 5 % of revenue,
    // capex 1.5× D&A, WACC 9 % (Technology) + 1 pt regime = 10 %, g_T 2.5 %.
    // FCF_t = revenue_t × (0.20 × 0.79 + 0.05 − 0.075) = 0.133 × 1000 × 1.1^t,
    // so every explicit year is worth 133 today: PV explicit = 665.
    // TV today = 133 × 1.025 / 0.075 = 1817.6667; EV = 2482.6667;
    // equity = 2482.6667 − 200 + 100 = 2382.6667; per share (100) = 23.83.
    // +1 pt margin: 0.1409 × 1000 → 140.9 × (5 + 13.6667) = 2630.1333 → 25.3013
    // per share, so the sensitivity is 25.3013 − 23.8267 = 1.47.
    let d = hand_dataset();
    let inputs = BTreeMap::from([
        ("business".to_string(), json!({"revenue_cagr": 0.10})),
        (
            "resolved_assumptions".to_string(),
            json!({"operating_margin": 0.20}),
        ),
        (
            "regime".to_string(),
            json!({"name": "BEAR_HIGH_RATES", "discount_rate_adjustment": 0.01}),
        ),
    ]);
    let out = analysts::run(
        "valuation",
        &task("HAND", "valuation", inputs, Value::Null),
        &d,
    )
    .unwrap();
    let v = &out.output;
    assert_eq!(v["target_price"], json!(23.83));
    assert_eq!(f64_at(v, "/dcf/pv_explicit"), 665.0);
    assert_eq!(f64_at(v, "/dcf/pv_terminal"), 1817.67);
    assert_eq!(f64_at(v, "/dcf/enterprise_value"), 2482.67);
    assert_eq!(f64_at(v, "/dcf/equity_value"), 2382.67);
    assert_eq!(f64_at(v, "/dcf/projections/0/fcf"), 146.3);
    assert_eq!(f64_at(v, "/dcf/projections/4/revenue"), 1610.51);
    assert_eq!(f64_at(v, "/sensitivity/per_margin_point"), 1.47);
    assert!(f64_at(v, "/sensitivity/per_discount_point") < 0.0);
    assert_eq!(f64_at(v, "/discount_rate"), 0.1);
    assert_eq!(
        v["assumptions"]["operating_margin_source"],
        json!("resolved_assumptions")
    );
    assert_eq!(v["assumptions"]["revenue_growth_source"], json!("business"));
    assert_eq!(v["assumptions"]["regime"], json!("BEAR_HIGH_RATES"));
    // 23.83 / 20 − 1 = 19.15 % ≥ 15 % → BUY.
    assert_eq!(v["rating"], json!("BUY"));
    assert!((f64_at(v, "/upside") - 0.1915).abs() < 1e-9);
}

#[test]
fn resolved_margin_override_replaces_the_financial_view() {
    let p = pipeline("META");
    let base = &p["valuation"].output;
    let strat_margin = f64_at(&p["strategy"].output, "/operating_margin_assumption/value");
    let extra = BTreeMap::from([(
        "resolved_assumptions".to_string(),
        json!({"operating_margin": strat_margin}),
    )]);
    let resolved = pipeline_with("META", &extra, Value::Null);
    let v = &resolved["valuation"].output;
    assert_eq!(
        v["assumptions"]["operating_margin_source"],
        json!("resolved_assumptions")
    );
    assert_eq!(f64_at(v, "/operating_margin_used"), strat_margin);
    // The strategy view is higher for META, so the target rises.
    assert!(f64_at(v, "/target_price") > f64_at(base, "/target_price"));
}

#[test]
fn regime_broadcast_moves_the_discount_rate_per_sector() {
    let broadcast = json!({
        "event_type": "regime_change", "old_regime": "BULL_LOW_RATES", "new_regime": "BEAR_HIGH_RATES",
        "implications": {"discount_rate_changes": {"Technology": 0.025, "Utilities": 0.015}}
    });
    let extra = BTreeMap::from([("regime".to_string(), broadcast.clone())]);
    let base = pipeline("MSFT");
    let bear = pipeline_with("MSFT", &extra, Value::Null);
    assert_eq!(f64_at(&base["valuation"].output, "/discount_rate"), 0.09);
    assert_eq!(f64_at(&bear["valuation"].output, "/discount_rate"), 0.115);
    assert!(
        f64_at(&bear["valuation"].output, "/target_price")
            < f64_at(&base["valuation"].output, "/target_price")
    );
    // A sector the broadcast does not name keeps its rate; params work too.
    let jnj = pipeline_with("JNJ", &BTreeMap::new(), json!({"regime": broadcast}));
    assert_eq!(f64_at(&jnj["valuation"].output, "/discount_rate"), 0.08);
}

#[test]
fn higher_margin_never_lowers_the_target_price() {
    for t in data().tickers() {
        let p = pipeline(t);
        let v = &p["valuation"].output;
        assert!(f64_at(v, "/sensitivity/per_margin_point") >= 0.0, "{t}");
        let mut last = -1.0;
        for step in 0..8 {
            let margin = 0.02 + 0.05 * f64::from(step);
            let inputs = BTreeMap::from([
                ("financial".to_string(), p["financial"].output.clone()),
                ("strategy".to_string(), p["strategy"].output.clone()),
                (
                    "resolved_assumptions".to_string(),
                    json!({"operating_margin": margin}),
                ),
            ]);
            let out = analysts::run(
                "valuation",
                &task(t, "valuation", inputs, Value::Null),
                data(),
            )
            .unwrap();
            let target = f64_at(&out.output, "/target_price");
            assert!(
                target >= last,
                "{t}: margin {margin} gave {target} < {last}"
            );
            last = target;
        }
    }
}

#[test]
fn report_has_every_stage_the_findings_and_the_target_price() {
    for t in ["META", "AAPL", "BRK.B", "INTC"] {
        let p = pipeline(t);
        let target = f64_at(&p["valuation"].output, "/target_price");
        let r = &p["report"].output;
        let md = r["markdown"].as_str().unwrap();
        let shown = analysts::format::price(target);
        assert!(
            md.contains(&format!("| Target price | {shown} |")),
            "{t}: {md}"
        );
        assert!(md.contains(&format!(
            "**{}**",
            p["valuation"].output["rating"].as_str().unwrap()
        )));
        assert!(md.contains("synthetic"), "{t}: synthetic notice missing");
        for section in [
            "## Screening",
            "## Business",
            "## Financial",
            "## Strategy",
            "## Valuation",
            "## Findings",
        ] {
            assert!(md.contains(section), "{t}: {section} missing");
        }
        assert_eq!(f64_at(r, "/target_price"), target);
    }
    let md = pipeline("META")["report"].output["markdown"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(md.contains("**Abnormal capex increase** (financial"));
}

#[test]
fn report_without_valuation_is_a_permanent_error() {
    let e = analysts::run(
        "report",
        &task("AAPL", "report", BTreeMap::new(), Value::Null),
        data(),
    )
    .unwrap_err();
    assert!(e.permanent);
    assert_eq!(e.error_type, "missing_input");
}

#[test]
fn unknown_ticker_and_agent_type_are_permanent_errors() {
    let e = analysts::run(
        "financial",
        &task("ZZZZ", "financial", BTreeMap::new(), Value::Null),
        data(),
    )
    .unwrap_err();
    assert!(e.permanent);
    assert_eq!(e.error_type, "unknown_ticker");
    assert!(e.message.contains("ZZZZ"));
    let e = analysts::run(
        "astrology",
        &task("AAPL", "astrology", BTreeMap::new(), Value::Null),
        data(),
    )
    .unwrap_err();
    assert!(e.permanent);
    assert_eq!(e.error_type, "unknown_agent_type");
    assert!(e.message.contains("valuation"));
    let wire = e.to_task_error(Some("bundled"));
    assert_eq!(wire.class, caucus_shared::task::ErrorClass::Permanent);
}

#[test]
fn malformed_inputs_are_rejected_not_ignored() {
    let bad_margin = BTreeMap::from([(
        "financial".to_string(),
        json!({"operating_margin_assumption": {"value": "high"}}),
    )]);
    let e = analysts::run(
        "valuation",
        &task("AAPL", "valuation", bad_margin, Value::Null),
        data(),
    )
    .unwrap_err();
    assert_eq!((e.permanent, e.error_type.as_str()), (true, "bad_input"));

    let low_wacc = BTreeMap::from([(
        "resolved_assumptions".to_string(),
        json!({"discount_rate": 0.02}),
    )]);
    let e = analysts::run(
        "valuation",
        &task("AAPL", "valuation", low_wacc, Value::Null),
        data(),
    )
    .unwrap_err();
    assert_eq!(e.error_type, "invalid_assumption");

    let e = analysts::run(
        "screening",
        &task(
            "AAPL",
            "screening",
            BTreeMap::new(),
            json!({"min_revenue": "lots"}),
        ),
        data(),
    )
    .unwrap_err();
    assert_eq!(e.error_type, "bad_input");
    assert!(e.message.contains("min_revenue"));

    let e = analysts::run(
        "valuation",
        &task(
            "AAPL",
            "valuation",
            BTreeMap::new(),
            json!({"regime": "bear"}),
        ),
        data(),
    )
    .unwrap_err();
    assert_eq!(e.error_type, "bad_input");
}

#[test]
fn runs_are_deterministic() {
    for t in ["AAPL", "META", "BRK.B"] {
        let a = pipeline(t);
        let b = pipeline(t);
        for stage in known_agent_types() {
            assert_eq!(a[*stage], b[*stage], "{t} {stage}");
            assert_eq!(
                serde_json::to_string(&a[*stage].output).unwrap(),
                serde_json::to_string(&b[*stage].output).unwrap()
            );
        }
    }
}

#[test]
fn valuation_without_upstream_falls_back_to_the_data_set() {
    let alone = analysts::run(
        "valuation",
        &task("AAPL", "valuation", BTreeMap::new(), Value::Null),
        data(),
    )
    .unwrap();
    let chained = pipeline("AAPL");
    assert_eq!(
        alone.output["assumptions"]["operating_margin_source"],
        json!("dataset (trailing 3-yr average)")
    );
    // Same figures either way, to the cent.
    assert_eq!(
        alone.output["target_price"],
        chained["valuation"].output["target_price"]
    );
}

const CSV_HEADER: &str = "ticker,name,sector,price,fiscal_year,revenue,gross_profit,operating_income,net_income,capex,operating_cash_flow,depreciation,total_debt,cash,shares_outstanding,invested_capital";

#[test]
fn user_data_from_csv_and_json_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("# my own figures\n");
    csv.push_str(CSV_HEADER);
    csv.push('\n');
    for (i, fy) in (2021..=2024).enumerate() {
        let rev = 1000.0 * (1.0 + 0.1 * i as f64);
        csv.push_str(&format!(
            "acme,\"Acme, Inc.\",Industrials,42.5,{fy},{rev},{},{},{},60,{},50,300,80,100,900\n",
            rev * 0.4,
            rev * 0.15,
            rev * 0.1,
            rev * 0.1 + 50.0 + 5.0
        ));
    }
    let csv_path = dir.path().join("mine.csv");
    std::fs::write(&csv_path, &csv).unwrap();
    let d = Dataset::from_path(&csv_path).unwrap();
    assert!(!d.is_synthetic());
    let c = d.company("ACME").unwrap();
    assert_eq!((c.name.as_str(), c.years.len()), ("Acme, Inc.", 4));
    for stage in known_agent_types().iter().take(5) {
        analysts::run(
            stage,
            &task("ACME", stage, BTreeMap::new(), Value::Null),
            &d,
        )
        .unwrap();
    }

    // The JSON shape round-trips through a file, and the bundled file loads by path.
    let json_path = dir.path().join("mine.json");
    std::fs::write(&json_path, analysts::dataset::BUNDLED_JSON).unwrap();
    assert_eq!(
        Dataset::from_path(&json_path).unwrap().tickers(),
        data().tickers()
    );

    // Errors name the problem.
    let bad = dir.path().join("bad.csv");
    std::fs::write(
        &bad,
        format!("{CSV_HEADER}\nACME,Acme,Industrials,42.5,2024,lots,1,1,1,1,1,1,1,1,1,1\n"),
    )
    .unwrap();
    let e = Dataset::from_path(&bad).unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("revenue"), "{e}");
    let missing = dir.path().join("missing.csv");
    std::fs::write(&missing, "ticker,sector,price\n").unwrap();
    assert!(Dataset::from_path(&missing)
        .unwrap_err()
        .to_string()
        .contains("fiscal_year"));
    let one_year = dir.path().join("one.csv");
    std::fs::write(
        &one_year,
        format!("{CSV_HEADER}\nACME,Acme,Industrials,42.5,2024,1,1,1,1,1,1,1,1,1,1,1\n"),
    )
    .unwrap();
    assert!(Dataset::from_path(&one_year)
        .unwrap_err()
        .to_string()
        .contains("at least 2"));
    assert!(matches!(
        Dataset::from_path(dir.path().join("figures.xlsx")),
        Err(analysts::DatasetError::UnsupportedFormat { .. })
    ));
    assert!(matches!(
        Dataset::from_path(dir.path().join("absent.json")),
        Err(analysts::DatasetError::Read { .. })
    ));
}

/// The Python example agent consumes real built-in outputs, and the built-in
/// report consumes its answer: the exec protocol works across languages.
#[test]
fn python_exec_agent_speaks_the_protocol() {
    use std::io::Write;
    use std::process::{Command, Stdio};

    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/examples/exec_agent.py"
    );
    let run_agent = |task: &TaskDispatch| {
        let mut child = match Command::new("python3")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => panic!("python3 is needed for this test: {e}"),
        };
        child
            .stdin
            .take()
            .unwrap()
            .write_all(serde_json::to_string(task).unwrap().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let body: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        (
            out.status.code(),
            body,
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };

    let p = pipeline("META");
    let inputs: BTreeMap<String, Value> = ["financial", "strategy"]
        .iter()
        .map(|s| (s.to_string(), p[*s].output.clone()))
        .collect();
    let (code, out, _) = run_agent(&task("META", "valuation", inputs.clone(), Value::Null));
    assert_eq!(code, Some(0), "{out}");
    // Same perpetuity by hand from the built-in figures.
    let latest = &p["financial"].output["latest"];
    let margin = f64_at(&p["financial"].output, "/operating_margin_assumption/value");
    let growth = f64_at(&p["business"].output, "/revenue_cagr").clamp(-0.05, 0.10);
    let ev = f64_at(latest, "/revenue") * (1.0 + growth) * margin * 0.79 / (0.085 - 0.025);
    let expected = (ev - f64_at(latest, "/net_debt")) / f64_at(latest, "/shares_outstanding");
    assert!(
        (f64_at(&out, "/target_price") - expected).abs() <= 0.005 + 1e-9,
        "{out}"
    );

    // The built-in report accepts the external valuation as its input.
    let report_inputs = BTreeMap::from([("valuation".to_string(), out.clone())]);
    let report = analysts::run(
        "report",
        &task("META", "report", report_inputs, Value::Null),
        data(),
    )
    .unwrap();
    let md = report.output["markdown"].as_str().unwrap();
    assert!(md.contains(&analysts::format::price(f64_at(&out, "/target_price"))));
    assert!(md.contains("## Financial") && md.contains("## Strategy"));

    // Failures: a JSON error on stdout, a non-zero exit, and the text on stderr.
    let (code, err, stderr) = run_agent(&task("META", "valuation", BTreeMap::new(), Value::Null));
    assert_eq!(code, Some(1));
    assert_eq!(err["error"]["class"], json!("permanent"));
    assert_eq!(err["error"]["error_type"], json!("missing_input"));
    assert!(stderr.contains("missing_input"));
    let params = json!({"simulate_error": {"class": "transient", "error_type": "quota_exceeded", "data_source": "koyfin"}});
    let (code, err, _) = run_agent(&task("META", "valuation", inputs, params));
    assert_eq!(code, Some(75));
    assert_eq!(err["error"]["data_source"], json!("koyfin"));
}

#[test]
fn valuation_opens_the_margin_debate_exactly_for_the_seeded_tickers() {
    for t in data().tickers() {
        let p = pipeline(t);
        let v = &p["valuation"];
        let seeded = DISAGREEMENT_SEEDED.contains(&t);
        assert_eq!(v.output["provisional"], json!(seeded), "{t}");
        assert_eq!(v.challenges.len(), usize::from(seeded), "{t}");
        if !seeded {
            assert_eq!(v.output["debate_ids"], json!([]), "{t}");
            continue;
        }
        let d = &v.output["margin_debate"];
        let id = d["debate_id"].as_str().unwrap();
        assert_eq!(v.output["debate_ids"], json!([id]));
        let (f, s) = (
            f64_at(d, "/financial_operating_margin"),
            f64_at(d, "/strategy_operating_margin"),
        );
        // The conservative (lower) margin drives the DCF meanwhile.
        assert_eq!(f64_at(&v.output, "/operating_margin_used"), f.min(s), "{t}");
        let c = &v.challenges[0];
        assert_eq!(c["debate_id"], json!(id));
        assert_eq!(c["challenger"], "strategy");
        assert_eq!(c["challenged"], "financial");
        assert_eq!(c["priority"], "valuation");
        assert_eq!(c["item"], json!(t));
        assert_eq!(c["challenged_position"]["value"], json!(f));
        assert_eq!(c["challenger_position"]["value"], json!(s));
        assert!(c["challenged_position"]["confidence"].as_f64().is_some());
    }
}

#[test]
fn a_resolved_margin_or_a_zero_gap_opens_no_debate() {
    let resolved: BTreeMap<String, Value> = [(
        "resolved_assumptions".to_string(),
        json!({"operating_margin": 0.41}),
    )]
    .into();
    let p = pipeline_with("NVDA", &resolved, Value::Null);
    assert!(p["valuation"].challenges.is_empty());
    assert_eq!(p["valuation"].output["provisional"], json!(false));
    let p = pipeline_with("NVDA", &BTreeMap::new(), json!({"margin_debate_gap": 0.0}));
    assert!(p["valuation"].challenges.is_empty());
    let p = pipeline_with(
        "AAPL",
        &BTreeMap::new(),
        json!({"margin_debate_gap": 0.005}),
    );
    assert_eq!(p["valuation"].challenges.len(), 1);
}

#[test]
fn every_analyst_notes_the_regime_it_ran_under() {
    let regime: BTreeMap<String, Value> = [(
        "regime".to_string(),
        json!({"name": "BEAR_HIGH_RATES", "discount_rate_changes": {"Technology": 0.02},
               "sector_favorability_changes": {"Technology": -15}, "source": "broadcast"}),
    )]
    .into();
    let p = pipeline_with("AAPL", &regime, Value::Null);
    for stage in known_agent_types() {
        let note = &p[*stage].output["market_regime"];
        assert_eq!(note["name"], "BEAR_HIGH_RATES", "{stage}");
        assert_eq!(note["source"], "broadcast", "{stage}");
    }
    let plain = pipeline("AAPL");
    assert!(plain["valuation"].output.get("market_regime").is_none());
    assert!(
        f64_at(&p["valuation"].output, "/discount_rate")
            > f64_at(&plain["valuation"].output, "/discount_rate")
    );
    assert!(
        f64_at(&p["screening"].output, "/score") < f64_at(&plain["screening"].output, "/score")
    );
}

/// A level review in the inputs is context, not an upstream stage: the
/// analysts run unchanged and carry it nowhere.
#[test]
fn a_level_review_input_is_not_an_upstream_stage() {
    let review: BTreeMap<String, Value> = [(
        "level_review".to_string(),
        json!({"level": 0, "conflicts": [], "summary": "fine",
               "fixes_applied": [], "warnings_for_next_level": ["x"], "duration_ms": 3}),
    )]
    .into();
    let with = pipeline_with("AAPL", &review, Value::Null);
    let without = pipeline("AAPL");
    for stage in known_agent_types() {
        assert_eq!(
            with[*stage].output, without[*stage].output,
            "{stage} changed by a level review input"
        );
        assert!(with[*stage].output["upstream"]
            .get("level_review")
            .is_none());
    }
}
