//! The web console in a real browser (issue 13's acceptance): Debian's
//! headless `chromium` driven over WebDriver (`chromedriver`, fantoccini)
//! against a real stack — coordinator, facilitator, correlator and worker
//! processes on real NATS and Redis, and a `caucus-console` that requires a
//! login. A person logs in, approves AAPL's review gate with a rationale
//! (recorded under their name), confirms a provisional decision, pauses
//! and resumes a batch from /alerts, and watches the overview update
//! without a reload. Every page visited is kept as a screenshot in
//! `target/console-screenshots/` (and, with `CAUCUS_BLESS=1`, in
//! `docs/console/` for docs/CONSOLE.md).

mod alerts;
mod browser;
mod gates;
mod overview;
mod stack;
