//! Issue #17's acceptance, across real processes (nats-server -js,
//! redis-server, caucus-coordinator, caucus-worker): messages from any
//! service reach the agents and people they are for.
//!
//! The outside service here is a plain async_nats client publishing raw
//! JSON text, as a service that knows nothing of caucus would: no caucus
//! type or helper builds what it sends.
//!
//! 1. the seed's finding, published before the workflow exists, reaches
//!    the valuation task in `inputs.findings`, is confirmed to its sender
//!    and is listed in the gate's decision package;
//! 2. a finding nobody answers raises a `response_overdue` alert card;
//! 3. a `request` becomes work and is answered with a finding and a
//!    confirmation;
//! 4. a critical finding after the valuation completed flags the workflow
//!    waiting at its gate and is listed as late in the package (a normal
//!    one after it is late but flags nothing);
//! 5. malformed, oversize and unaddressable findings are dead-lettered with
//!    their reason and do not stall the valid finding behind them;
//! 6. a coordinator that takes over hands a finding it never saw to the
//!    next task, once;
//! 7. an outside service's alert becomes an alert card by its priority;
//! 8. messages stored before any coordinator ran (after `caucus init`) are
//!    still served;
//! 9. the built-in valuation applies the seed's finding, says how in its
//!    confirmation and output, and the package shows it used;
//! 10. a task gets the newest findings addressed to its type (any
//!     spelling, or `all`) about its item, oldest first, at most
//!     `coordinator.findings_per_task`;
//! 11. and at most `coordinator.findings_bytes_per_task` of them, the
//!     oldest left out first;
//! 12. a response awaited by a coordinator that dies is still awaited (and
//!     alerted once) by the one that takes over;
//! 13. a request the coordinator answered raises no overdue card;
//! 14. a re-run of the task (sent back at the gate) does not double the
//!     confirmation;
//! 15. a sender's own id, whatever its characters, names the finding in the
//!     task, the confirmation and the package;
//! 16. a coordinator that takes over keeps the late flags and does not send
//!     their cards again;
//! 17. a finding about an item whose name has a dot (`BRK.B`, subject token
//!     `BRK~2EB`) reaches that item's task.
//!
//! Where: [`findings_to_tasks`] 1, 6, 9–11, 15, 17; [`responses`] 2, 12–14;
//! [`requests_and_alerts`] 3, 7, 8; [`late_findings`] 4, 16;
//! [`dead_letters`] 5.

mod dead_letters;
mod findings_to_tasks;
mod late_findings;
mod requests_and_alerts;
mod responses;
mod support;
