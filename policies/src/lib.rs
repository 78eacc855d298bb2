//! `cubicle-policy` will own the policy model (allow / deny / confirm rules
//! over CDP methods, navigation targets, exec commands, downloads, egress) and
//! its evaluator, with the default policies as `*.toml` beside this crate.
//!
//! No rule is evaluated yet: this crate is a placeholder so that the
//! dependency direction (gateway → policies, policies knows nothing of HTTP)
//! is fixed from the start.
