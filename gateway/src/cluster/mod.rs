//! Past one host: `cubicle node` daemons, one per host, each the whole
//! single-host gateway and runtime of its workspaces, registered in a shared
//! PostgreSQL store ([`cubicle_runtime::cluster`]); and `cubicle edge`
//! replicas in front, which authenticate, place and route by workspace id.
//! Start with [`edge`].

pub mod credential;
pub mod edge;
pub mod membership;
pub mod placement;
pub mod proxy;
