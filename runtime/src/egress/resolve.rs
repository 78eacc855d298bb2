//! Name resolution for the proxy, behind a trait so tests can play a DNS
//! server that changes its answer between two lookups (rebinding).

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

/// How long one lookup may take.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

pub type Lookup<'a> = Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'a>>;

/// Turns a host name into addresses.
pub trait Resolve: Send + Sync {
    fn lookup<'a>(&'a self, name: &'a str) -> Lookup<'a>;
}

/// The host's resolver (getaddrinfo: /etc/hosts, then DNS).
#[derive(Debug, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn lookup<'a>(&'a self, name: &'a str) -> Lookup<'a> {
        Box::pin(async move {
            let found = tokio::time::timeout(LOOKUP_TIMEOUT, tokio::net::lookup_host((name, 0)))
                .await
                .map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("looking up {name} took over {LOOKUP_TIMEOUT:?}"),
                    )
                })??;
            let mut addrs: Vec<IpAddr> = Vec::new();
            for addr in found {
                if !addrs.contains(&addr.ip()) {
                    addrs.push(addr.ip());
                }
            }
            Ok(addrs)
        })
    }
}

/// A name's answers in order, and how many lookups were made.
type Script = (Vec<Vec<IpAddr>>, usize);

/// A resolver with fixed answers, for tests: each name has a list of
/// answers, handed out one per lookup (the last one repeats), so a test
/// can make a name change its address between two lookups. Names it does
/// not know fail as NXDOMAIN would.
#[derive(Debug, Default)]
pub struct ScriptedResolver {
    answers: Mutex<HashMap<String, Script>>,
}

impl ScriptedResolver {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `name`'s answers, in the order they are given out.
    pub fn script(&self, name: &str, answers: Vec<Vec<IpAddr>>) {
        self.answers
            .lock()
            .expect("the resolver's lock is never held across a panic")
            .insert(name.to_ascii_lowercase(), (answers, 0));
    }

    /// How many lookups of `name` were made.
    pub fn lookups(&self, name: &str) -> usize {
        self.answers
            .lock()
            .expect("the resolver's lock is never held across a panic")
            .get(name)
            .map_or(0, |(_, n)| *n)
    }

    /// A `name=ip[,ip...][;ip...]` file, one name per line (`;` separates
    /// successive answers), as `cubicle serve --egress-test-hosts` takes it.
    pub fn from_text(text: &str) -> Result<Self, String> {
        let resolver = Self::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, rest) = line
                .split_once('=')
                .ok_or_else(|| format!("line {}: expected name=ip,...", n + 1))?;
            let answers = rest
                .split(';')
                .map(|answer| {
                    answer
                        .split(',')
                        .map(|ip| ip.trim().parse::<IpAddr>())
                        .collect::<Result<Vec<_>, _>>()
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("line {}: {e}", n + 1))?;
            resolver.script(name.trim(), answers);
        }
        Ok(resolver)
    }
}

impl Resolve for ScriptedResolver {
    fn lookup<'a>(&'a self, name: &'a str) -> Lookup<'a> {
        let mut answers = self
            .answers
            .lock()
            .expect("the resolver's lock is never held across a panic");
        let found = answers.get_mut(name).and_then(|(list, used)| {
            let answer = list.get(*used).or(list.last()).cloned();
            *used += 1;
            answer
        });
        Box::pin(async move {
            found.ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{name}: no such host (test resolver)"),
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn scripted_answers_change_per_lookup() {
        let r = ScriptedResolver::from_text("# test\nrebind.test=127.0.0.1;127.0.0.2\n").unwrap();
        let first = r.lookup("rebind.test").await.unwrap();
        let second = r.lookup("rebind.test").await.unwrap();
        let third = r.lookup("rebind.test").await.unwrap();
        assert_eq!(first, vec!["127.0.0.1".parse::<IpAddr>().unwrap()]);
        assert_eq!(second, third);
        assert_eq!(r.lookups("rebind.test"), 3);
        assert!(r.lookup("other.test").await.is_err());
        assert!(ScriptedResolver::from_text("x").is_err());
    }

    #[tokio::test]
    async fn the_system_resolver_knows_localhost() {
        let found = SystemResolver.lookup("localhost").await.unwrap();
        assert!(found.iter().all(|ip| ip.is_loopback()), "{found:?}");
    }
}
