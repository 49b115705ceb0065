//! Small checks shared by the content types; each returns the reason text
//! that ends up in `DecodeError::InvalidContent`.

/// `value` must be a finite number within 0..=1.
pub(crate) fn unit_interval(field: &str, value: f64) -> Result<(), String> {
    if value.is_finite() && (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(format!("{field}: must be within 0..=1, got {value}"))
    }
}

/// Like [`unit_interval`] for an optional value.
pub(crate) fn opt_unit_interval(field: &str, value: Option<f64>) -> Result<(), String> {
    value.map_or(Ok(()), |v| unit_interval(field, v))
}

/// `value` must contain something other than white space.
pub(crate) fn non_empty(field: &str, value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        Err(format!("{field}: must not be empty"))
    } else {
        Ok(())
    }
}

/// The list must have at least one element.
pub(crate) fn non_empty_list<T>(field: &str, value: &[T]) -> Result<(), String> {
    if value.is_empty() {
        Err(format!("{field}: must list at least one entry"))
    } else {
        Ok(())
    }
}
