//! Names that become NATS subject tokens (agent types, stage names).

/// True when `name` is a valid subject token: non-empty, `[a-z0-9_-]+`.
pub fn is_valid_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}
