//! `cubicle-recorder` owns what an auditor replays and how it is sealed:
//! the hash chain over the event log ([`audit_chain`]), the signed
//! checkpoints and the key that signs them ([`checkpoint`]), the exported
//! bundle ([`bundle`]) and its offline verification ([`verify`]), and the
//! session video (frames to H.264 in fragmented MP4 segments).
//!
//! It does not store anything in a database or serve HTTP: the runtime
//! seals each event through [`audit_chain::Record::seal`] as it appends it,
//! and the gateway runs the recorders and exports bundles. Nothing here
//! depends on either, so `cubicle audit verify` needs neither a daemon nor
//! a database.
//!
//! Read [`audit_chain::Record`] and [`verify::verify`] first.

pub mod audit_chain;
pub mod bundle;
pub mod checkpoint;
pub mod har;
pub mod verify;
pub mod video;
