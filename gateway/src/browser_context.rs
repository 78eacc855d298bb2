//! The browser context of screen actions: the gateway's own CDP session per
//! workspace, read just before a gated action.

use cubicle_policy::BrowserContext;

use crate::app::AppState;

/// What the browser looked like.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// No browser page (not running, no tab).
    Absent,
    /// The browser did not answer in time, or answered nonsense (why).
    Unreadable(String),
    Known(BrowserContext),
}

/// One CDP session per workspace, opened on first use.
#[derive(Default)]
pub struct Browsers {}

impl Browsers {
    /// The active tab and focused element of workspace `id`'s browser.
    pub async fn context(&self, _state: &AppState, _id: &str) -> Lookup {
        Lookup::Absent
    }

    /// Ends workspace `id`'s session.
    pub fn close(&self, _id: &str) {}
}
