//! The workspace's policy, as the proxy asks it: the egress rules of the
//! policy the workspace runs under (`policies/*.toml`, `subject =
//! "egress"`) and the person who decides a `confirm`. The gateway owns
//! both (the policy set, the approvals); this crate only knows the
//! [`EgressGate`] trait it implements, the way [`super::events`] reports
//! through [`super::EgressEvents`].
//!
//! The proxy asks [`EgressGate::rule`] for every new destination, and
//! [`EgressGate::confirm`] when the joined decision ([`super::decide`]) is
//! `confirm`: the connection waits for the answer, no longer than the
//! approval's own timeout.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

use super::events::Mode;

/// What a policy rule (or the joined decision) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allow,
    Deny,
    /// Held until a person decides.
    Confirm,
}

/// One new destination, as the policy and the person deciding see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ask {
    /// Lower case, no brackets, no final dot.
    pub host: String,
    pub port: u16,
    /// How it goes out: intercepted, tunnelled, plain HTTP.
    pub mode: Mode,
    /// The page that asked, when the proxy saw it: the `Referer` (or
    /// `Origin`) of a plain-HTTP request. A `CONNECT` is decided before any
    /// request inside it is seen, so its page is not known.
    pub page: Option<String>,
}

impl Ask {
    /// The allowlist entry that allows exactly this destination
    /// (`host:port`, `[v6]:port`): what "allow for this workspace" adds.
    pub fn rule_text(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }
}

/// The egress rule of the workspace's policy that matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ruling {
    pub verdict: Verdict,
    /// `policy#rule-id`.
    pub rule: String,
    pub reason: String,
}

/// What the person decided on a held destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Answer {
    /// This connection only; the next new one asks again.
    Once { approval: String },
    /// This connection, and `rule` (`host:port`) added to the workspace's
    /// egress allowlist for the workspace's lifetime (stored, an event).
    Workspace { approval: String, rule: String },
    /// Denied, expired, or the approval could not be made: why, in words.
    Denied {
        approval: Option<String>,
        reason: String,
    },
}

pub type Asked<'a> = Pin<Box<dyn Future<Output = Option<Ruling>> + Send + 'a>>;
pub type Confirming<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// The workspace's policy and its operators, for the proxy.
pub trait EgressGate: Send + Sync {
    /// The first egress rule of `workspace`'s policy that matches `ask`
    /// (`None`: no egress rule matched; the policy's `default` never
    /// decides egress).
    fn rule<'a>(&'a self, workspace: &'a str, ask: &'a Ask) -> Asked<'a>;

    /// Holds `ask` as a pending approval and waits for a person (bounded
    /// by the approval's timeout: expired is denied). `allowlist` is the
    /// workspace's allowlist now, which an answer `Workspace` extends.
    fn confirm<'a>(
        &'a self,
        workspace: &'a str,
        ask: &'a Ask,
        ruling: &'a Ruling,
        allowlist: &'a super::EgressPolicyDoc,
    ) -> Confirming<'a>;
}

/// No policy rules at all: the allowlist alone decides (tests, and a
/// proxy run without a gateway).
#[derive(Debug, Default)]
pub struct NoRules;

impl EgressGate for NoRules {
    fn rule<'a>(&'a self, _: &'a str, _: &'a Ask) -> Asked<'a> {
        Box::pin(async { None })
    }

    fn confirm<'a>(
        &'a self,
        _: &'a str,
        _: &'a Ask,
        _: &'a Ruling,
        _: &'a super::EgressPolicyDoc,
    ) -> Confirming<'a> {
        Box::pin(async {
            Answer::Denied {
                approval: None,
                reason: "nobody can approve egress here".into(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    //! The proxy asking a workspace's policy, with a gate a test drives:
    //! the real proxy, a real origin on loopback, a scripted resolver.

    use std::sync::{Arc, Mutex};

    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper::{Request, StatusCode};
    use hyper_util::rt::TokioIo;
    use tokio::sync::{mpsc, oneshot};

    use super::super::address::Walls;
    use super::super::events::EgressEvent;
    use super::super::tests::{Harness, harness_with, origin};
    use super::*;

    /// A policy with one egress ruling, and a person answering through a
    /// channel.
    struct Driven {
        ruling: Mutex<Option<Ruling>>,
        asks: mpsc::UnboundedSender<(Ask, oneshot::Sender<Answer>)>,
    }

    impl EgressGate for Driven {
        fn rule<'a>(&'a self, _: &'a str, _: &'a Ask) -> Asked<'a> {
            let ruling = self.ruling.lock().unwrap().clone();
            Box::pin(async move { ruling })
        }

        fn confirm<'a>(
            &'a self,
            _: &'a str,
            ask: &'a Ask,
            _: &'a Ruling,
            _: &'a super::super::EgressPolicyDoc,
        ) -> Confirming<'a> {
            let (tx, rx) = oneshot::channel();
            let _ = self.asks.send((ask.clone(), tx));
            Box::pin(async move {
                rx.await.unwrap_or(Answer::Denied {
                    approval: None,
                    reason: "the test went away".into(),
                })
            })
        }
    }

    type Asks = mpsc::UnboundedReceiver<(Ask, oneshot::Sender<Answer>)>;

    async fn driven(allow: &[&str], ruling: Option<Ruling>) -> (Harness, Arc<Driven>, Asks) {
        let (tx, rx) = mpsc::unbounded_channel();
        let gate = Arc::new(Driven {
            ruling: Mutex::new(ruling),
            asks: tx,
        });
        let h = harness_with(
            allow,
            &[],
            "",
            1 << 20,
            gate.clone(),
            Arc::new(Walls::new(true)),
        )
        .await;
        (h, gate, rx)
    }

    fn ruling(verdict: Verdict, rule: &str) -> Option<Ruling> {
        Some(Ruling {
            verdict,
            rule: rule.into(),
            reason: format!("{rule}: the policy says so"),
        })
    }

    /// `GET url` with a `Referer`, answered in the background.
    fn get_from(
        h: &Harness,
        url: &str,
        referer: &str,
    ) -> tokio::task::JoinHandle<(StatusCode, String)> {
        let client = h.client();
        let req = Request::get(url)
            .header("referer", referer)
            .body(Full::new(Bytes::new()))
            .unwrap();
        tokio::spawn(async move {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(client))
                .await
                .unwrap();
            tokio::spawn(conn);
            let response = sender.send_request(req).await.unwrap();
            let status = response.status();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (status, String::from_utf8_lossy(&body).into_owned())
        })
    }

    fn last_decision(h: &Harness) -> EgressEvent {
        h.decisions().pop().expect("a decision event")
    }

    #[tokio::test]
    async fn a_policy_deny_refuses_what_the_allowlist_allows_without_a_lookup() {
        let port = origin(None).await;
        let allow = [
            format!("origin.test:{port}"),
            format!("127.0.0.1/32:{port}"),
        ];
        let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
        let (h, gate, _asks) = driven(&allow, None).await;
        h.dns
            .script("origin.test", vec![vec!["127.0.0.1".parse().unwrap()]]);
        // Control: the allowlist alone lets it through.
        let (status, _, _) = h.get(&format!("http://origin.test:{port}/")).await;
        assert_eq!(status, StatusCode::OK);
        *gate.ruling.lock().unwrap() = ruling(Verdict::Deny, "strict#no-origin");
        let (status, headers, _) = h.get(&format!("http://origin.test:{port}/")).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let reason = headers["x-cubicle-egress-reason"].to_str().unwrap();
        assert!(
            reason.contains("strict#no-origin: the policy says so"),
            "{reason}"
        );
        assert!(matches!(
            last_decision(&h),
            EgressEvent::Decision { allowed: false, ref rule, .. } if rule == "strict#no-origin"
        ));
        assert_eq!(
            h.dns.lookups("origin.test"),
            1,
            "only the control was looked up"
        );
    }

    #[tokio::test]
    async fn a_confirm_holds_the_connection_until_a_person_answers() {
        let port = origin(None).await;
        let allow = [format!("127.0.0.1/32:{port}")];
        let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
        let (h, _gate, mut asks) = driven(&allow, ruling(Verdict::Confirm, "p#ask")).await;
        h.dns
            .script("new.test", vec![vec!["127.0.0.1".parse().unwrap()]]);
        let url = format!("http://new.test:{port}/");
        // Allowed once: held, not even looked up, until the answer.
        let held = get_from(&h, &url, "http://page.test/asking");
        let (ask, answer) = asks.recv().await.unwrap();
        assert_eq!(ask.host, "new.test");
        assert_eq!(ask.port, port);
        assert_eq!(ask.page.as_deref(), Some("http://page.test/asking"));
        assert_eq!(ask.rule_text(), format!("new.test:{port}"));
        assert!(!held.is_finished(), "answered before a person decided");
        assert_eq!(
            h.dns.lookups("new.test"),
            0,
            "resolved before a person decided"
        );
        answer
            .send(Answer::Once {
                approval: "apr-1".into(),
            })
            .unwrap();
        let (status, body) = held.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(matches!(
            last_decision(&h),
            EgressEvent::Decision { allowed: true, ref rule, ref approval, ref page, .. }
                if rule == "approval:apr-1 (p#ask)" && approval.as_deref() == Some("apr-1")
                    && page.as_deref() == Some("http://page.test/asking")
        ));
        // Once means once: the next connection asks again; denied → 403.
        let again = get_from(&h, &url, "http://page.test/again");
        let (_, answer) = asks.recv().await.unwrap();
        answer
            .send(Answer::Denied {
                approval: Some("apr-2".into()),
                reason: "denied by alice: no".into(),
            })
            .unwrap();
        let (status, body) = again.await.unwrap();
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(body.contains("denied by alice: no"), "{body}");
        // For the workspace: allowed, the allowlist grows (an event), and
        // the next connection is not asked.
        let third = get_from(&h, &url, "http://page.test/third");
        let (ask, answer) = asks.recv().await.unwrap();
        answer
            .send(Answer::Workspace {
                approval: "apr-3".into(),
                rule: ask.rule_text(),
            })
            .unwrap();
        assert_eq!(third.await.unwrap().0, StatusCode::OK);
        assert!(h.events.all().iter().any(|e| matches!(
            e,
            EgressEvent::Widened { rule, approval, .. } if *rule == format!("new.test:{port}") && approval == "apr-3"
        )));
        let (status, _, _) = h.get(&url).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            asks.try_recv().is_err(),
            "asked again after allowed for the workspace"
        );
        assert!(matches!(
            last_decision(&h),
            EgressEvent::Decision { ref rule, .. } if *rule == format!("allowlist:new.test:{port}")
        ));
    }

    #[tokio::test]
    async fn the_proxy_refuses_the_host_and_the_gateway_whatever_the_rules() {
        let port = origin(None).await;
        let allow = [
            format!("127.0.0.1/32:{port}"),
            format!("origin.test:{port}"),
        ];
        let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
        let closed = Arc::new(Walls::new(false));
        let h = harness_with(&allow, &[], "", 1 << 20, Arc::new(NoRules), closed).await;
        h.dns
            .script("origin.test", vec![vec!["127.0.0.1".parse().unwrap()]]);
        for url in [
            format!("http://127.0.0.1:{port}/"),
            format!("http://origin.test:{port}/"),
        ] {
            let (status, headers, _) = h.get(&url).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{url}");
            let reason = headers["x-cubicle-egress-reason"].to_str().unwrap();
            assert!(
                reason.contains("the host's services are never reachable"),
                "{reason}"
            );
        }
        // With the test flag the origin opens; the gateway's port never.
        let open = Arc::new(Walls::new(true));
        let h = harness_with(&allow, &[], "", 1 << 20, Arc::new(NoRules), open.clone()).await;
        let (status, _, _) = h.get(&format!("http://127.0.0.1:{port}/")).await;
        assert_eq!(status, StatusCode::OK, "control: the flag opens the origin");
        open.add_listener(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
        let (status, headers, _) = h.get(&format!("http://127.0.0.1:{port}/")).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let reason = headers["x-cubicle-egress-reason"].to_str().unwrap();
        assert!(reason.contains("gateway's own listening port"), "{reason}");
        let (head, _) = h.connect(&format!("127.0.0.1:{port}")).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    }
}
