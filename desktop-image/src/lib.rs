//! The guest side of Cubicle, shared by the host: the guest channel protocol.
//!
//! This crate owns the in-workspace supervisor binary `cubicle-guest` (the
//! workspace's first process, see `src/bin/cubicle-guest/`) and the wire
//! protocol the host uses to reach it: the port table ([`ports`]), the
//! `CONNECT <port>` handshake ([`handshake`]) and the control messages
//! ([`control`]), and the microVM init's arguments ([`vm_init`]). It does not own how a workspace is isolated (that is
//! `cubicle-runtime`) nor the image recipe's execution (`cubicle image build`).
//!
//! Read [`handshake`] first: every host→guest stream starts with it, on both
//! the jail and the microVM backend.

pub mod control;
pub mod handshake;
pub mod http_get;
pub mod ports;
pub mod vm_init;
