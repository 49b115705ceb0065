//! `caucus broadcast`: publish a macro event to every agent, the same
//! `system_critical` alert the built-in `macro` agent sends, on
//! `caucus.msg.all`. Events the seed does not call system-critical (a
//! regime change at 0.8 confidence or less, a rate move under 25 bps) are
//! refused with the reason.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use async_nats::HeaderMap;

use caucus_shared::messages::{MacroBroadcast, MacroEvent};
use caucus_shared::subjects::Subjects;

use super::Client;

/// The `broadcast` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct BroadcastArgs {
    /// `regime_change` or `rate_announcement`.
    #[arg(long = "event", value_name = "EVENT")]
    pub event: String,
    /// The regime before the change, e.g. BULL_LOW_RATES.
    #[arg(long)]
    pub old_regime: Option<String>,
    /// The regime after the change, e.g. BEAR_HIGH_RATES (regime changes).
    #[arg(long)]
    pub new_regime: Option<String>,
    /// Confidence in the event, 0..=1 (regime changes need > 0.8).
    #[arg(long)]
    pub confidence: f64,
    /// Size of a rate move in basis points (rate announcements; 25+).
    #[arg(long, allow_hyphen_values = true)]
    pub rate_change_bps: Option<f64>,
    /// Discount-rate change for every sector, as a fraction (0.01 = +1 pt).
    #[arg(long, allow_hyphen_values = true)]
    pub discount_rate_change: Option<f64>,
    /// Discount-rate change of one sector, e.g. `Technology=0.025` (repeatable).
    #[arg(long = "sector-discount", value_name = "SECTOR=DELTA")]
    pub sector_discount: Vec<String>,
    /// Screening score change of one sector, e.g. `Technology=-15` (repeatable).
    #[arg(
        long = "sector-score",
        value_name = "SECTOR=POINTS",
        allow_hyphen_values = true
    )]
    pub sector_score: Vec<String>,
    /// Sender name.
    #[arg(long, default_value = "macro_analyst")]
    pub from: String,
}

fn sector_map(flag: &str, pairs: &[String]) -> anyhow::Result<BTreeMap<String, f64>> {
    pairs
        .iter()
        .map(|p| {
            let (k, v) = p
                .split_once('=')
                .with_context(|| format!("--{flag} {p:?}: expected SECTOR=NUMBER"))?;
            let x: f64 = v
                .trim()
                .parse()
                .with_context(|| format!("--{flag} {p:?}: {v:?} is not a number"))?;
            Ok((k.trim().to_string(), x))
        })
        .collect()
}

impl BroadcastArgs {
    /// The event these flags describe.
    pub fn event(&self) -> anyhow::Result<MacroBroadcast> {
        let b = MacroBroadcast {
            event_type: MacroEvent::parse(&self.event).map_err(anyhow::Error::msg)?,
            old_regime: self.old_regime.clone(),
            new_regime: self.new_regime.clone(),
            confidence: self.confidence,
            rate_change_bps: self.rate_change_bps,
            discount_rate_adjustment: self.discount_rate_change,
            discount_rate_changes: sector_map("sector-discount", &self.sector_discount)?,
            sector_favorability_changes: sector_map("sector-score", &self.sector_score)?,
            recommended_actions: Vec::new(),
        };
        b.validate().map_err(anyhow::Error::msg)?;
        Ok(b)
    }
}

/// Publishes the broadcast; prints its id (or the envelope with `--json`).
pub async fn run(
    client: &Client,
    subjects: &Subjects,
    args: &BroadcastArgs,
    as_json: bool,
) -> anyhow::Result<i32> {
    let event = args.event()?;
    if let Err(why) = event.is_system_critical() {
        bail!("not broadcast: {why}");
    }
    let env = event.envelope(&args.from).map_err(anyhow::Error::msg)?;
    let js = async_nats::jetstream::new(client.nats().clone());
    let mut headers = HeaderMap::new();
    headers.insert("Nats-Msg-Id", env.id.as_str());
    let subject = subjects.msg_all();
    js.publish_with_headers(subject.clone(), headers, env.to_bytes())
        .await
        .with_context(|| format!("publish on {subject}"))?
        .await
        .with_context(|| format!("publish on {subject}"))?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&env)?);
    } else {
        println!(
            "broadcast {} on {subject}: {} {}",
            env.id,
            event.event_type.as_str(),
            event.new_regime.as_deref().unwrap_or_default()
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: BroadcastArgs,
    }

    #[test]
    fn flags_become_the_seed_broadcast() {
        let t = T::try_parse_from([
            "t",
            "--event",
            "regime_change",
            "--new-regime",
            "BEAR_HIGH_RATES",
            "--confidence",
            "0.9",
            "--discount-rate-change",
            "0.01",
            "--sector-score",
            "Technology=-15",
        ])
        .unwrap();
        let b = t.a.event().unwrap();
        assert!(b.is_system_critical().is_ok());
        assert_eq!(b.sector_favorability_changes["Technology"], -15.0);
        assert_eq!(b.flat_adjustment(), 0.01);
        let t =
            T::try_parse_from(["t", "--event", "regime_change", "--confidence", "0.9"]).unwrap();
        assert!(t.a.event().unwrap_err().to_string().contains("new_regime"));
        let t = T::try_parse_from([
            "t",
            "--event",
            "regime_change",
            "--new-regime",
            "X",
            "--confidence",
            "0.9",
            "--sector-score",
            "Tech",
        ])
        .unwrap();
        assert!(t
            .a
            .event()
            .unwrap_err()
            .to_string()
            .contains("SECTOR=NUMBER"));
    }
}
