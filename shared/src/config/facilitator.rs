//! `[facilitator]`: the facilitator process (debates, credibility, expert
//! queues, sync lock, provisional decisions).
//!
//! Every duration and threshold of the seeds' debate protocol is a field, so
//! tests shrink them (`CAUCUS_FACILITATOR_ACK_TIMEOUT=300ms`) instead of
//! waiting.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One year (365.25 days) and one month (a twelfth of it), as humantime
/// counts them, so the defaults print as `2years` and `6months`.
const YEAR: Duration = Duration::from_secs(31_557_600);
const MONTH: Duration = Duration::from_secs(2_630_016);

/// Facilitator settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FacilitatorConfig {
    /// Period of the active/standby leadership lease: a standby takes over
    /// within this after the active instance dies.
    #[serde(with = "humantime_serde")]
    pub leader_lease: Duration,

    /// Level 1: the challenged agent acknowledges within this (seed: 15 min).
    #[serde(with = "humantime_serde")]
    pub ack_timeout: Duration,
    /// Level 1: evidence is due this long after the challenge (seed: 1 h).
    /// A challenge's `escalation_timer` can shorten it, never lengthen it.
    #[serde(with = "humantime_serde")]
    pub evidence_timeout: Duration,
    /// Level 1: the challenger's verdict is due by the evidence deadline, or
    /// this long after late evidence arrived, whichever is later.
    #[serde(with = "humantime_serde")]
    pub verdict_grace: Duration,
    /// Level 2: facilitator mediation must finish within this (seed: 1 h);
    /// if credibility cannot be computed by then, the debate goes to level 3.
    #[serde(with = "humantime_serde")]
    pub mediation_timeout: Duration,
    /// Level 3: a human expert decides within this (seed: 6 h).
    #[serde(with = "humantime_serde")]
    pub human_timeout: Duration,
    /// Level 4: a provisional decision's review deadline when no next gate is
    /// known (seed: 24 h).
    #[serde(with = "humantime_serde")]
    pub fallback_window: Duration,

    /// Pre-debate sync: longest wait for participants to flush (seed: 2 s).
    #[serde(with = "humantime_serde")]
    pub flush_timeout: Duration,
    /// Pre-debate sync: TTL of the sync lock (a crashed facilitator's lock
    /// lapses after this). Must exceed `flush_timeout`.
    #[serde(with = "humantime_serde")]
    pub sync_lock_ttl: Duration,
    /// Pre-debate sync: longest wait to take the participants' locks.
    #[serde(with = "humantime_serde")]
    pub sync_lock_wait: Duration,

    /// Human experts debates are routed to (workload-aware: least loaded first).
    pub experts: Vec<String>,
    /// Concurrent debates per expert (seed: 3).
    pub expert_max_concurrent: u32,
    /// Lifetime of an expert-queue entry; it must outlive `human_timeout`
    /// so a waiting debate keeps its slot, and lets a crashed facilitator's
    /// entries lapse.
    #[serde(with = "humantime_serde")]
    pub expert_slot_ttl: Duration,

    /// Level 2: data points each agent needs in a similar context (seed: 15).
    pub min_data_points: u32,
    /// Level 2: floor of the credibility differential (seed: 0.25).
    pub min_differential: f64,
    /// Wilson score z (seed: 1.96).
    pub wilson_z: f64,
    /// Temporal decay half-life of track records (seed: 2 years).
    #[serde(with = "humantime_serde")]
    pub credibility_half_life: Duration,
    /// Regime samples needed for the 70/30 regime weighting (seed: 50).
    pub regime_min_samples: u32,
    /// A trend counts only when its R² exceeds this (seed: 0.3).
    pub trend_min_r2: f64,
    /// How far a significant trend is extrapolated (seed: 6 months).
    #[serde(with = "humantime_serde")]
    pub trend_horizon: Duration,
    /// Records per rolling-accuracy window for the trend regression.
    pub trend_window: u32,
    /// Share of a debate's context dimensions a record must match to count
    /// as "similar context" (0..=1).
    pub context_match_threshold: f64,
    /// Weight of context-specific accuracy when the context has enough data
    /// (seed 001: 30 %).
    pub context_weight: f64,
    /// Market regime used for regime-specific credibility when a debate does
    /// not name one (e.g. `BULL_LOW_RATES`); empty = no regime adjustment.
    pub current_regime: String,
    /// Track records kept per agent (oldest dropped first).
    pub max_track_records: u32,

    /// Downstream impact: price change per relative margin change (1.0 =
    /// price proportional to margin: 1 point of margin ≈ 10 % of price at a
    /// 10 % margin; the seed's 25 % → 28 % example gives +12 %).
    pub margin_price_elasticity: f64,
    /// Downstream impact: risk-score change per relative assumption change.
    pub risk_sensitivity: f64,

    /// How often stored deadlines are checked.
    #[serde(with = "humantime_serde")]
    pub timer_tick: Duration,
    /// How long a delivered debate message may stay unacked before redelivery.
    #[serde(with = "humantime_serde")]
    pub ack_wait: Duration,
    /// Age after which finished debates are dropped from the KV bucket.
    #[serde(with = "humantime_serde")]
    pub debate_retention: Duration,
}

impl Default for FacilitatorConfig {
    fn default() -> Self {
        FacilitatorConfig {
            leader_lease: Duration::from_secs(10),
            ack_timeout: Duration::from_secs(15 * 60),
            evidence_timeout: Duration::from_secs(60 * 60),
            verdict_grace: Duration::from_secs(15 * 60),
            mediation_timeout: Duration::from_secs(60 * 60),
            human_timeout: Duration::from_secs(6 * 60 * 60),
            fallback_window: Duration::from_secs(24 * 60 * 60),
            flush_timeout: Duration::from_secs(2),
            sync_lock_ttl: Duration::from_secs(10),
            sync_lock_wait: Duration::from_secs(10),
            experts: vec!["expert".into()],
            expert_max_concurrent: 3,
            expert_slot_ttl: Duration::from_secs(7 * 60 * 60),
            min_data_points: 15,
            min_differential: 0.25,
            wilson_z: 1.96,
            credibility_half_life: YEAR * 2,
            regime_min_samples: 50,
            trend_min_r2: 0.3,
            trend_horizon: MONTH * 6,
            trend_window: 10,
            context_match_threshold: 0.6,
            context_weight: 0.3,
            current_regime: String::new(),
            max_track_records: 2000,
            margin_price_elasticity: 1.0,
            risk_sensitivity: 0.4,
            timer_tick: Duration::from_secs(1),
            ack_wait: Duration::from_secs(30),
            debate_retention: MONTH * 3,
        }
    }
}
