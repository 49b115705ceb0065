//! Positions and values in words, shared by the decision package and the
//! provisional-decision section (their own module: each of those two uses
//! the other's neighbour, never the other).

use maud::{html, Markup};

use caucus_shared::messages::Position;

/// A position in words, with its value and confidence.
pub(crate) fn position(p: &Position) -> Markup {
    html! {
        span class="position" {
            (p.statement)
            @if let Some(m) = &p.metric { " (" (m) @if let Some(v) = &p.value { " = " (value(v)) } ")" }
            @if let Some(c) = p.confidence { ", confidence " (format!("{c:.2}")) }
        }
    }
}

/// A JSON value for people: strings without quotes.
pub(crate) fn value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
