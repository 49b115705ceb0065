//! Cross-process integration tests live in `tests/it/`: one test binary,
//! `it`, with a module per area (`cargo test -p caucus-tests --test it gates::`).
