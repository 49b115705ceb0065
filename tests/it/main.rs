//! The cross-process integration tests: one test binary whose modules were each
//! their own binary, so the workspace is linked once instead of once per file.
//! `cargo test -p caucus-tests --test it gates::` runs one module.

mod common;
mod facilitator_common;

mod agent_debates;
mod agent_env;
mod binaries;
mod bounded_records;
mod bounded_replies;
mod capacity_faults;
mod cli;
mod console_actions;
mod console_auth;
mod console_browser;
mod console_pages;
mod correlation_trace;
mod correlator_service;
mod dashboard_queries;
mod dead_worker_capacity;
mod debate_trace;
mod deep_research;
mod execution;
mod facilitator_levels;
mod facilitator_restart;
mod facilitator_sync;
mod failure_correlation_e2e;
mod fenced_leader;
mod findings_sync_gate;
mod gate_review_dry_run;
mod gates;
mod health;
mod identity;
mod level_review;
mod macro_broadcast;
mod metrics_scrape;
mod nats_restart;
mod otlp_metrics;
mod outside_messages;
mod patterns;
mod pause_resume;
mod readme_walkthrough;
mod reconcile;
mod redis_cluster;
mod redis_sentinel;
mod requests;
mod scaling;
mod security_roles;
mod stack_env;
mod submissions;
mod tls;
mod topology_admin;
mod watch_at_gate;
mod worker_confirmations;
mod workflow_trace;
