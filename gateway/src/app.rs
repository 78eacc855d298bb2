//! What every request handler shares: the operations' core and what only
//! the doors need.

use std::ops::Deref;
use std::path::PathBuf;

use crate::ops::Core;

/// The doors' shared state. It reads as the [`Core`] it holds, so a door
/// passes `&state` to an operation.
#[derive(Clone)]
pub struct AppState {
    pub core: Core,
    /// Where the operator page's files are (`web/` of the source tree).
    pub web_dir: PathBuf,
}

impl AppState {
    pub fn new(core: Core, web_dir: PathBuf) -> Self {
        Self { core, web_dir }
    }
}

impl Deref for AppState {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
}
