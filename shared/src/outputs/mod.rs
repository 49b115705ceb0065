//! The shapes of task inputs and outputs that two crates read: the
//! built-in agents (caucus-agents) write them, the coordinator checks them
//! (the research quality gates, the level review) and the next agents read
//! them back as their inputs.
//!
//! - [`research`]: the deep-research phases' outputs (discovery,
//!   consolidation, validation, analysis, synthesis).
//! - [`review`]: the level review: the reviewer's params and output, and
//!   the normalised review next-level tasks receive.
//!
//! Outputs come from any agent (`exec:` and `http:` handlers speak the same
//! shapes), so readers are as forgiving as the rules that read them: a
//! field of the wrong type reads as absent ([`lenient`]), a list entry of
//! the wrong shape as an empty entry ([`items`]), and only a
//! `schema_version` other than 1 is refused ([`decode`]).

pub mod research;
pub mod review;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Version of the stored/wire outputs that carry a `schema_version`.
pub const OUTPUT_SCHEMA_VERSION: u32 = 1;

/// `schema_version` when a body has none.
pub(crate) fn schema_v1() -> u32 {
    OUTPUT_SCHEMA_VERSION
}

/// Why an output could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The output says it has another version of the shape.
    #[error("unsupported schema_version {found} (this build reads {OUTPUT_SCHEMA_VERSION})")]
    UnsupportedSchemaVersion {
        /// The `schema_version` as given (JSON).
        found: Value,
    },
    /// The output does not have the shape (only fields read strictly can
    /// cause this).
    #[error("{0}")]
    Shape(#[from] serde_json::Error),
}

/// Reads an output of type `T` from `v`: a `schema_version` of 1 (or none)
/// is read, any other refused, like [`crate::task::TaskDispatch::decode`];
/// a value that is not an object reads as `T::default()` (every field
/// absent), as a missing output reads to the gates.
pub fn decode<T: DeserializeOwned + Default>(v: &Value) -> Result<T, OutputError> {
    let Value::Object(m) = v else {
        return Ok(T::default());
    };
    match m.get("schema_version") {
        None => {}
        // `1.0` is 1 too (Python's json writes floats so).
        Some(n) if n.as_f64() == Some(f64::from(OUTPUT_SCHEMA_VERSION)) => {}
        Some(other) => {
            return Err(OutputError::UnsupportedSchemaVersion {
                found: other.clone(),
            })
        }
    }
    if m.get("schema_version")
        .is_some_and(|n| n.as_u64().is_none())
    {
        // Read `1.0` as the integer the types hold.
        let mut m = m.clone();
        m.insert("schema_version".into(), OUTPUT_SCHEMA_VERSION.into());
        return Ok(T::deserialize(&Value::Object(m))?);
    }
    Ok(T::deserialize(v)?)
}

/// Field deserializer: a value of the wrong type reads as `None` (as
/// `v["field"].as_str()` would), so one odd field of another agent's output
/// does not make the whole output unreadable.
pub fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let v = Value::deserialize(d)?;
    Ok(T::deserialize(&v).ok())
}

/// Field deserializer: a value of the wrong type reads as `T::default()`.
pub fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    Ok(lenient(d)?.unwrap_or_default())
}

/// Field deserializer for lists: not a list reads as `None`; an entry of
/// the wrong shape reads as `T::default()`, so counts stay right.
pub fn items<'de, D, T>(d: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let Value::Array(a) = Value::deserialize(d)? else {
        return Ok(None);
    };
    Ok(Some(
        a.iter()
            .map(|x| T::deserialize(x).unwrap_or_default())
            .collect(),
    ))
}

/// A JSON value as plain JSON text, for serialising an output built from
/// plain structs (maps with string keys only: cannot fail).
pub fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).expect("outputs have string map keys, so they serialise")
}

#[cfg(test)]
mod tests;
