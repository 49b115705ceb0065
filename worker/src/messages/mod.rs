//! What a worker process hears besides its tasks, on `caucus.msg.*`:
//!
//! - [`broadcast`]: `caucus.msg.all`, read by every process (its own ordered
//!   consumer), kept as the current market regime ([`market`]) and handed to
//!   tasks as `inputs.regime`; applied before the next task starts.
//! - [`inbox`]: `caucus.msg.<agent_type>` for built-in agents (one durable
//!   consumer per type): flush requests and debates ([`debates`]).

pub mod broadcast;
pub mod debates;
pub mod inbox;
pub mod market;

pub use broadcast::Broadcasts;
