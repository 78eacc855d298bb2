//! The egress proxy: the only way out of a workspace. Workspaces have no
//! network interface but loopback; `cubicle-guest` relays
//! `127.0.0.1:3128` inside to this proxy on the host over a reverse
//! channel ([`listener`]). The proxy ([`proxy`], on hyper) asks, for every
//! new destination, the workspace's allowlist ([`policy`], default deny) and
//! the egress rules of its policy ([`gate`]: allow, deny, or `confirm` — held
//! for a person) as one decision, resolves names itself (only names a rule
//! could allow) and checks every address ([`decide`], [`address`]: the
//! gateway's own ports and the host's services stay closed whatever a rule
//! says), connects to exactly the address
//! it checked, intercepts TLS with the installation's CA ([`tls`], trusted
//! inside through [`trust`]) unless a host passes through, sends downloads
//! to [`crate::quarantine`], and reports every decision ([`events`]).
//!
//! Read [`decide::decide`] first, then [`proxy::WorkspaceProxy`].

pub mod address;
pub mod counted;
pub mod decide;
pub mod download;
pub mod events;
pub mod framing;
pub mod gate;
pub mod listener;
pub mod narrow;
pub mod peek;
pub mod policy;
pub mod proxy;
pub mod request_body;
pub mod resolve;
pub mod secrets;
pub mod store;
pub mod tls;
pub mod trust;

pub use address::Walls;
pub use events::{EgressEvent, EgressEvents, Mode};
pub use gate::{Answer, Ask, EgressGate, Ruling, Verdict};
pub use policy::{EgressPolicy, EgressPolicyDoc, PolicyError};
pub use proxy::{Egress, PolicyCell, ProxyLimits, WorkspaceProxy};

#[cfg(test)]
mod tests;
