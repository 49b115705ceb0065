//! Which services administer the topology and which only bind to it.

/// The services that run under a NATS user without the right to create or
/// update streams, buckets and durable consumers: they bind
/// ([`super::bind`]) and wait for the coordinator or `caucus init`.
pub const BINDING_SERVICES: [&str; 3] = ["worker", "facilitator", "correlator"];

/// What a service does with the topology at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopologyRole {
    /// Creates or updates every stream (the coordinator; also test and
    /// tool processes using the service scaffolding).
    Administer,
    /// Waits for the streams to exist and changes nothing.
    Bind,
}

impl TopologyRole {
    /// [`TopologyRole::Bind`] for [`BINDING_SERVICES`],
    /// [`TopologyRole::Administer`] otherwise.
    pub fn of(service: &str) -> TopologyRole {
        if BINDING_SERVICES.contains(&service) {
            TopologyRole::Bind
        } else {
            TopologyRole::Administer
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_restricted_services_bind() {
        assert_eq!(TopologyRole::of("coordinator"), TopologyRole::Administer);
        for s in BINDING_SERVICES {
            assert_eq!(TopologyRole::of(s), TopologyRole::Bind);
        }
    }
}
