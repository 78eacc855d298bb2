//! What the host needs of the workspace image: the guest channel protocol
//! and the recipes.
//!
//! The protocol is how the host reaches the in-workspace supervisor
//! `cubicle-guest` (the workspace's first process, its own crate in
//! `guest/`, which this one does not pull in): the port table ([`ports`]),
//! the `CONNECT <port>` handshake ([`handshake`]), the control messages
//! ([`control`]), the microVM init's arguments ([`vm_init`]) and the fresh
//! identity a restored microVM is given ([`identity`]). The
//! recipes ([`recipe`]) are the image's and the microVM kernel's, as text.
//! It does not own how a workspace is isolated (that is `cubicle-runtime`)
//! nor the recipes' execution (`cubicle image build`).
//!
//! Read [`handshake`] first: every host→guest stream starts with it, on both
//! the jail and the microVM backend.

pub mod control;
pub mod handshake;
pub mod http_get;
pub mod identity;
pub mod ports;
pub mod recipe;
pub mod splice;
pub mod vm_init;
