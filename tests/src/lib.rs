//! Cross-process integration tests live in `tests/tests/`.
