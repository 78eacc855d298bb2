//! `cubicle-gateway`: the HTTP and WebSocket front of Cubicle, and the
//! `cubicle` binary (`serve`, `image build`, `doctor`, `token`).
//!
//! It owns authentication ([`auth`]), the JSON API ([`api`]), the live view's
//! RFB-over-WebSocket bridge ([`vnc`]) and the operator page ([`web`]). It does
//! not own workspaces' lifecycle or state (that is `cubicle-runtime`). Every
//! door (REST, WebSockets, MCP, the CDP proxy, the live view) is an adapter
//! over the operations core ([`ops`]): parse, call, render.
//!
//! Read [`ops`] and [`router::router`] first.

pub mod actions;
pub mod api;
pub mod app;
pub mod approvals;
pub mod auth;
pub mod browser_context;
pub mod browser_downloads;
pub mod browser_fill;
pub mod cdp;
pub mod cdp_proxy;
pub mod cluster;
pub mod control;
pub mod egress;
pub mod error;
pub mod gates;
pub mod health;
pub mod host;
pub mod listener;
pub mod mcp;
pub mod openapi;
pub mod ops;
pub mod replay;
pub mod revocation;
pub mod router;
pub mod screen;
pub mod slots;
pub mod vnc;
pub mod web;
pub mod webhooks;
pub mod wire;
