//! Filling a stored secret into a page's field (`fill_secret`) through the
//! gateway's own CDP session with the workspace's browser (the one
//! [`crate::browser_context`] reads the focus with): the value goes from
//! the daemon to Chromium over the guest channel and never passes through
//! the workspace's user, its files or the agent.
//!
//! Two calls, each one function run in the page's isolated world (page
//! scripts cannot redefine what it calls):
//! - [`find`]: which tab (a visible one whose field the selector, or the
//!   focus, names; the focused tab first) and what the field is, for the
//!   policy to judge with the page's URL.
//! - [`fill`]: the same tab looked at again at the moment of filling, in
//!   the same function that fills, so nothing of the page runs between the
//!   check and the fill: the page must be `https:` on the host that was
//!   judged, which must be one the secret is bound to; the field must be a
//!   password field or an input marked with an `autocomplete` token; then
//!   the value is set with the browser's own setter and `input` and
//!   `change` are dispatched, as typing would.
//!
//! What the screen shows: a password field shows discs, as always; any
//! other field is given `-webkit-text-security: disc` before the value
//! goes in, so screenshots, the live view and the recording show discs
//! too. What it cannot stop: the page's own scripts read the field's value
//! (that is what a form is for), may send it wherever they like, or remove
//! the masking style; a form's `action` may post it to another host (the
//! egress policy still judges where). An agent with the CDP door can read
//! the field back as a page script can (`Runtime.evaluate`), unless a
//! `cdp` rule denies it that. It fills the top document and open shadow
//! roots, not frames.
//!
//! Uploads ([`set_file`]) use the same function to find a file input and
//! hand it a file the guest keeps where only the browser reads it.

use std::future::Future;
use std::pin::Pin;

use cubicle_runtime::any_backend::AnyBackend;
use cubicle_runtime::manager::Manager;
use serde_json::{Value, json};

use chromiumoxide_cdp::cdp::browser_protocol::dom::SetFileInputFilesParams;
use chromiumoxide_cdp::cdp::js_protocol::runtime::{
    CallArgument, CallFunctionOnParams, ReleaseObjectParams, RemoteObject, RemoteObjectSubtype,
};

use crate::browser_context::{BrowserSlot, LookupError, Session};
use crate::cdp::client;

/// The longest selector taken.
pub const MAX_SELECTOR: usize = 1024;

/// Runs in the isolated world with (what is wanted: `secret` or `file`,
/// selector or null, value or null, the secret's hosts, the host judged).
/// With a null value it only finds; a file input, once found again, is
/// returned itself (for `DOM.setFileInputFiles`), a refusal as a string.
const FIELD: &str = r#"function (want, selector, value, hosts, judged) {
  const page = { visible: document.visibilityState === 'visible', focused: document.hasFocus(),
                 url: location.href, host: location.hostname, scheme: location.protocol };
  const refuse = (why) => (want === 'file' && value !== null) ? why : Object.assign(page, { refusal: why });
  let e = null;
  if (selector !== null) {
    try { e = document.querySelector(selector); }
    catch (err) { return refuse('the selector is not valid CSS: ' + err.message); }
    if (!e) return refuse('no element of the page matches the selector');
  } else {
    e = document.activeElement;
    for (let depth = 0; depth < 8 && e && e.shadowRoot && e.shadowRoot.activeElement; depth++) {
      e = e.shadowRoot.activeElement;
    }
    if (!e || e === document.body || e === document.documentElement) {
      return refuse('nothing is focused in the page: focus the field or name it with a selector');
    }
  }
  const tag = e.localName;
  if (tag === 'iframe' || tag === 'frame') return refuse('the field is inside a frame, which is not filled');
  if (tag !== 'input') return refuse('the element is a <' + tag + '>, not an input field');
  const type = String(e.type).toLowerCase();
  if (want === 'file') {
    if (type !== 'file') return refuse('the element is not a file input (<input type=file>)');
    if (e.disabled) return refuse('the file input is disabled');
    page.field = e.multiple ? 'file:multiple' : 'file';
    if (value === null) return page;
    if (page.host !== judged) return refuse('the page moved to ' + page.host + ' after it was judged on ' + judged);
    return e;
  }
  const ac = String(e.getAttribute('autocomplete') || '').trim().toLowerCase();
  let field = null;
  if (type === 'password') field = 'password';
  else if (ac && ac !== 'on' && ac !== 'off' && ['text', 'email', 'tel', 'url', 'search'].includes(type)) {
    field = 'autocomplete:' + ac.slice(0, 64);
  }
  if (field === null) {
    return refuse('the field is neither a password field nor marked with an autocomplete token');
  }
  if (e.disabled || e.readOnly) return refuse('the field is disabled or read-only');
  page.field = field;
  if (value === null) return page;
  if (page.scheme !== 'https:') return refuse('the page is not on https');
  if (page.host !== judged) return refuse('the page moved to ' + page.host + ' after it was judged on ' + judged);
  if (!hosts.includes(page.host)) return refuse('the secret is not bound to ' + page.host);
  if (field !== 'password') e.style.setProperty('-webkit-text-security', 'disc', 'important');
  e.focus();
  const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;
  setter.call(e, value);
  e.dispatchEvent(new Event('input', { bubbles: true }));
  e.dispatchEvent(new Event('change', { bubbles: true }));
  page.filled = true;
  return page;
}"#;

/// What a caller looks for in the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// A field a secret may be filled into.
    Secret,
    /// A file input.
    File,
}

impl Want {
    fn as_str(self) -> &'static str {
        match self {
            Want::Secret => "secret",
            Want::File => "file",
        }
    }
}

/// The tab and field a fill goes to.
#[derive(Debug, Clone)]
pub struct Found {
    /// The tab's target id.
    pub target: String,
    pub url: String,
    /// The URL's host name (no port), lower case.
    pub host: String,
    /// `password` or `autocomplete:<token>`; `file` or `file:multiple`.
    pub field: String,
}

/// Why a fill did not happen.
#[derive(Debug)]
pub enum FillError {
    /// No browser, or no tab on screen.
    NoBrowser,
    /// The browser did not answer as CDP should (why).
    Unreadable(String),
    /// The page or field is not one a secret may go to (why).
    Refused(String),
}

impl FillError {
    /// The API's answer: 409 `no_page` (with `no_page`'s text) or
    /// `refused` ("`done_not`: why"), or the browser's failure.
    pub fn into_op(
        self,
        refused: &'static str,
        done_not: &str,
        no_page: &str,
    ) -> crate::error::OpError {
        use crate::error::{ErrorKind, OpError};
        match self {
            FillError::NoBrowser => OpError::new(ErrorKind::Conflict, "no_page", no_page),
            FillError::Unreadable(why) => OpError::new(
                ErrorKind::Unreachable,
                "browser_unreachable",
                format!("the workspace's browser did not answer as it should: {why}"),
            ),
            FillError::Refused(why) => {
                OpError::new(ErrorKind::Conflict, refused, format!("{done_not}: {why}"))
            }
        }
    }
}

impl From<LookupError> for FillError {
    fn from(err: LookupError) -> Self {
        match err {
            LookupError::NoBrowser => FillError::NoBrowser,
            LookupError::Broken(why) => FillError::Unreadable(why),
        }
    }
}

type Work<'s, T> = Pin<Box<dyn Future<Output = Result<T, LookupError>> + Send + 's>>;

/// The visible tab whose field `selector` (or the focus, when `None`)
/// names, as `want`ed, and what that field is.
pub async fn find(
    manager: &Manager<AnyBackend>,
    slot: &BrowserSlot,
    id: &str,
    want: Want,
    selector: Option<&str>,
) -> Result<Found, FillError> {
    let selector = selector.map(str::to_owned);
    let seen = slot
        .with(manager, id, move |session| -> Work<'_, _> {
            Box::pin(async move { look_all(session, want, selector.as_deref()).await })
        })
        .await?;
    // Visible tabs whose field is fillable; the focused ones, when any are.
    let visible: Vec<(String, Value)> = seen
        .into_iter()
        .filter(|(_, page)| page["visible"] == true)
        .collect();
    let fillable: Vec<usize> = (0..visible.len())
        .filter(|&i| visible[i].1.get("field").is_some())
        .collect();
    let focused: Vec<usize> = fillable
        .iter()
        .copied()
        .filter(|&i| visible[i].1["focused"] == true)
        .collect();
    let index = match (focused.as_slice(), fillable.as_slice()) {
        ([one], _) | ([], [one]) => *one,
        (_, []) => {
            // The focused tab's reason, else the first visible one's.
            let Some((_, page)) = visible
                .iter()
                .find(|(_, page)| page["focused"] == true)
                .or(visible.first())
            else {
                return Err(FillError::NoBrowser);
            };
            let why = page["refusal"].as_str().unwrap_or("no field to fill");
            return Err(FillError::Refused(why.to_owned()));
        }
        _ => {
            return Err(FillError::Refused(format!(
                "{} tabs on screen have such a field: name the field with a selector only one of them matches, or close the others",
                fillable.len()
            )));
        }
    };
    let (target, page) = &visible[index];
    Ok(Found {
        target: target.clone(),
        url: page["url"].as_str().unwrap_or_default().to_owned(),
        host: page["host"].as_str().unwrap_or_default().to_lowercase(),
        field: page["field"].as_str().unwrap_or_default().to_owned(),
    })
}

/// Fills `value` into `found`'s field, checking again that the tab is on
/// `https:` at the host judged, which is one of `hosts`, and that the field
/// is still one a secret may go to. The field as filled, or why not.
pub async fn fill(
    manager: &Manager<AnyBackend>,
    slot: &BrowserSlot,
    id: &str,
    found: &Found,
    selector: Option<&str>,
    value: &str,
    hosts: &[String],
) -> Result<Found, FillError> {
    let args = arguments(json!([
        Want::Secret.as_str(),
        selector,
        value,
        hosts,
        found.host
    ]));
    let target = found.target.clone();
    let page = slot
        .with(manager, id, move |session| -> Work<'_, _> {
            Box::pin(async move {
                let pages = session.pages().await?;
                if !pages.contains(&target) {
                    return Ok(json!({ "refusal": "the tab was closed" }));
                }
                run(session, &target, args).await
            })
        })
        .await?;
    if let Some(why) = page["refusal"].as_str() {
        return Err(FillError::Refused(why.to_owned()));
    }
    if page["filled"] != true {
        return Err(FillError::Unreadable(
            "the page did not say the field was filled".into(),
        ));
    }
    Ok(Found {
        target: found.target.clone(),
        url: page["url"].as_str().unwrap_or_default().to_owned(),
        host: page["host"].as_str().unwrap_or_default().to_lowercase(),
        field: page["field"].as_str().unwrap_or_default().to_owned(),
    })
}

/// Hands the file at `path` (in the guest, where the browser reads it) to
/// `found`'s file input, checking again that the tab is at the host
/// judged and the element still a file input. Why not, if it was not.
pub async fn set_file(
    manager: &Manager<AnyBackend>,
    slot: &BrowserSlot,
    id: &str,
    found: &Found,
    selector: Option<&str>,
    path: &str,
) -> Result<(), FillError> {
    let args = arguments(json!([Want::File.as_str(), selector, true, [], found.host]));
    let target = found.target.clone();
    let path = path.to_owned();
    let refusal = slot
        .with(manager, id, move |session| -> Work<'_, _> {
            Box::pin(async move {
                let pages = session.pages().await?;
                if !pages.contains(&target) {
                    return Ok(Some("the tab was closed".to_owned()));
                }
                let object = call_field(session, &target, args, false).await?;
                let node = object.as_ref().and_then(|object| {
                    let node = object.subtype == Some(RemoteObjectSubtype::Node);
                    object.object_id.clone().filter(|_| node)
                });
                let Some(object_id) = node else {
                    let why = object
                        .and_then(|object| object.value)
                        .and_then(|value| value.as_str().map(str::to_owned))
                        .unwrap_or_else(|| "the page changed while it was read; try again".into());
                    return Ok(Some(why));
                };
                let attached = session.attach(&target).await?;
                let mut hand = SetFileInputFilesParams::new(vec![path]);
                hand.object_id = Some(object_id.clone());
                let set = session.call(&hand, Some(&attached)).await;
                let release = ReleaseObjectParams::new(object_id);
                let _ = session.call(&release, Some(&attached)).await;
                set.map(|_| None)
            })
        })
        .await?;
    match refusal {
        Some(why) => Err(FillError::Refused(why)),
        None => Ok(()),
    }
}

/// Every tab as the field function sees it for `selector`, finding only.
async fn look_all(
    session: &mut Session,
    want: Want,
    selector: Option<&str>,
) -> Result<Vec<(String, Value)>, LookupError> {
    let args = arguments(json!([want.as_str(), selector, null, [], ""]));
    let mut seen = Vec::new();
    for target in session.pages().await? {
        seen.push((target.clone(), run(session, &target, args.clone()).await?));
    }
    Ok(seen)
}

/// The field function's arguments, each given by value.
fn arguments(values: Value) -> Vec<CallArgument> {
    let Value::Array(values) = values else {
        return Vec::new();
    };
    values
        .into_iter()
        .map(|value| CallArgument {
            value: Some(value),
            ..Default::default()
        })
        .collect()
}

/// Calls the field function in tab `target`'s isolated world with `args`;
/// its answer (an object), or a refusal when the page keeps changing
/// under it.
async fn run(
    session: &mut Session,
    target: &str,
    args: Vec<CallArgument>,
) -> Result<Value, LookupError> {
    let answer = call_field(session, target, args, true).await?;
    Ok(match answer.and_then(|object| object.value) {
        Some(value) if value.is_object() => value,
        _ => json!({ "refusal": "the page changed while it was read; try again" }),
    })
}

/// Calls the field function in tab `target`'s isolated world: the
/// answer's remote object (holding its value with `by_value`), or `None`
/// when the page keeps changing under it. A world gone with a navigation
/// is made again once.
async fn call_field(
    session: &mut Session,
    target: &str,
    args: Vec<CallArgument>,
    by_value: bool,
) -> Result<Option<RemoteObject>, LookupError> {
    let attached = session.attach(target).await?;
    for _ in 0..2 {
        let world = session.world(target, &attached).await?;
        let mut call = CallFunctionOnParams::new(FIELD);
        call.execution_context_id = Some(world);
        call.arguments = Some(args.clone());
        call.return_by_value = Some(by_value);
        let id = session.send(&call, Some(&attached)).await?;
        let reply = session.replies(&[id]).await?.pop();
        let answer = reply.map(client::reply_of::<CallFunctionOnParams>);
        if let Some(Ok(answer)) = answer
            && answer.exception_details.is_none()
        {
            return Ok(Some(answer.result));
        }
        session.forget_world(&attached);
    }
    Ok(None)
}
