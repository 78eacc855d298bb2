//! Both RFB handshakes are done by the gateway itself. Towards Xvnc it is a
//! shared client with security None and finishes the handshake before it
//! reads a byte from the viewer; towards the viewer it is the server: it
//! offers None and replays Xvnc's ServerInit. So a viewer that stops or lies
//! mid-handshake never reaches Xvnc, whose blacklist counts half handshakes
//! as security failures and would then refuse every connection from the
//! guest channel (the agent's included) for a while.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::rfb_parse::Kind;

/// The version the gateway speaks on both sides.
pub const VERSION: &[u8; 12] = b"RFB 003.008\n";
/// How long either handshake may take unless the daemon says otherwise
/// (`cubicle serve --display-handshake-seconds`).
pub const LIMIT: Duration = Duration::from_secs(10);
static CONFIGURED: OnceLock<Duration> = OnceLock::new();

/// Sets how long either handshake may take, once, at daemon start (an
/// emulated host's displays answer tens of times slower).
pub fn set_limit(limit: Duration) {
    let _ = CONFIGURED.set(limit);
}

/// How long either handshake may take.
pub fn limit() -> Duration {
    CONFIGURED.get().copied().unwrap_or(LIMIT)
}
/// Longest desktop name accepted from Xvnc.
const MAX_NAME: u32 = 4096;
/// Longest failure reason read from Xvnc.
const MAX_REASON: u32 = 1024;

/// Why the handshake with the workspace's display failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("RFB handshake with the display failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the display does not speak RFB 3.x (it sent {0:?})")]
    NotRfb(String),
    #[error("the display refused the connection: {0}")]
    Refused(String),
    #[error("the display does not offer security type None (it offers {0:?})")]
    NoNone(Vec<u8>),
    #[error("the display's desktop name is {0} bytes long (at most {MAX_NAME})")]
    Name(u32),
    #[error("the display did not finish the RFB handshake within {0:?}")]
    Timeout(Duration),
}

/// Handshakes with Xvnc as a shared client; returns its ServerInit message.
pub async fn with_display<S>(stream: &mut S) -> Result<Vec<u8>, HandshakeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let limit = limit();
    tokio::time::timeout(limit, display(stream))
        .await
        .map_err(|_| HandshakeError::Timeout(limit))?
}

async fn display<S>(stream: &mut S) -> Result<Vec<u8>, HandshakeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut version = [0u8; 12];
    stream.read_exact(&mut version).await?;
    if !version.starts_with(b"RFB 003.") {
        return Err(HandshakeError::NotRfb(
            String::from_utf8_lossy(&version).into_owned(),
        ));
    }
    stream.write_all(VERSION).await?;
    let count = stream.read_u8().await?;
    if count == 0 {
        return Err(HandshakeError::Refused(reason(stream).await?));
    }
    let mut types = vec![0u8; usize::from(count)];
    stream.read_exact(&mut types).await?;
    if !types.contains(&1) {
        return Err(HandshakeError::NoNone(types));
    }
    stream.write_u8(1).await?;
    if stream.read_u32().await? != 0 {
        return Err(HandshakeError::Refused(reason(stream).await?));
    }
    stream.write_u8(1).await?; // ClientInit: shared
    let mut init = vec![0u8; 24];
    stream.read_exact(&mut init).await?;
    let name = u32::from_be_bytes([init[20], init[21], init[22], init[23]]);
    if name > MAX_NAME {
        return Err(HandshakeError::Name(name));
    }
    init.resize(24 + name as usize, 0);
    stream.read_exact(&mut init[24..]).await?;
    Ok(init)
}

async fn reason<S: AsyncRead + Unpin>(stream: &mut S) -> Result<String, HandshakeError> {
    let len = stream.read_u32().await?.min(MAX_REASON);
    let mut text = vec![0u8; len as usize];
    stream.read_exact(&mut text).await?;
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// Where the viewer's handshake is.
#[derive(Debug, Default)]
pub struct ViewerHandshake {
    minor: u16,
}

impl ViewerHandshake {
    /// The gateway's answer to one handshake message from the viewer, if any.
    pub fn answer(&mut self, kind: Kind, server_init: &[u8]) -> Option<Vec<u8>> {
        match kind {
            Kind::ProtocolVersion { minor } => {
                self.minor = minor;
                // 3.3: the server decides (None); 3.7+: a list to choose from.
                Some(if minor == 3 {
                    vec![0, 0, 0, 1]
                } else {
                    vec![1, 1]
                })
            }
            // RFB 3.8 reports the result of security None; earlier ones do not.
            Kind::SecurityChoice => (self.minor >= 8).then(|| vec![0, 0, 0, 0]),
            Kind::ClientInit => Some(server_init.to_vec()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake Xvnc that sends `script` and records what it gets.
    async fn against(script: Vec<u8>) -> (Result<Vec<u8>, HandshakeError>, Vec<u8>) {
        let (mut ours, mut theirs) = tokio::io::duplex(4096);
        let server = tokio::spawn(async move {
            theirs.write_all(&script).await.unwrap();
            theirs.shutdown().await.unwrap();
            let mut got = Vec::new();
            let _ = theirs.read_to_end(&mut got).await;
            got
        });
        let result = with_display(&mut ours).await;
        drop(ours);
        (result, server.await.unwrap())
    }

    fn server_init(name: &str) -> Vec<u8> {
        let mut init = vec![5, 0, 3, 32];
        init.extend_from_slice(&[0; 16]);
        init.extend_from_slice(&(name.len() as u32).to_be_bytes());
        init.extend_from_slice(name.as_bytes());
        init
    }

    #[tokio::test]
    async fn completes_a_shared_none_handshake() {
        let mut script = b"RFB 003.008\n\x02\x02\x01\0\0\0\0".to_vec();
        script.extend(server_init("ws-1"));
        let (result, sent) = against(script).await;
        assert_eq!(result.unwrap(), server_init("ws-1"));
        assert_eq!(sent, b"RFB 003.008\n\x01\x01");
    }

    #[tokio::test]
    async fn refusals_carry_xvnc_reason() {
        let mut script = b"RFB 003.008\n\x00".to_vec();
        script.extend_from_slice(&26u32.to_be_bytes());
        script.extend_from_slice(b"Too many security failures");
        let (result, _) = against(script).await;
        let message = result.unwrap_err().to_string();
        assert!(message.ends_with("Too many security failures"), "{message}");
        let (result, _) = against(b"SSH-2.0-nope\n".to_vec()).await;
        assert!(matches!(result, Err(HandshakeError::NotRfb(_))));
        let (result, _) = against(b"RFB 003.008\n\x01\x02".to_vec()).await;
        assert!(matches!(result, Err(HandshakeError::NoNone(_))));
    }

    #[test]
    fn viewers_get_none_and_the_displays_server_init() {
        let init = server_init("ws-1");
        let mut v38 = ViewerHandshake::default();
        assert_eq!(
            v38.answer(Kind::ProtocolVersion { minor: 8 }, &init),
            Some(vec![1, 1])
        );
        assert_eq!(
            v38.answer(Kind::SecurityChoice, &init),
            Some(vec![0, 0, 0, 0])
        );
        assert_eq!(v38.answer(Kind::ClientInit, &init), Some(init.clone()));
        let mut v37 = ViewerHandshake::default();
        v37.answer(Kind::ProtocolVersion { minor: 7 }, &init);
        assert_eq!(v37.answer(Kind::SecurityChoice, &init), None);
        let mut v33 = ViewerHandshake::default();
        let answer = v33.answer(Kind::ProtocolVersion { minor: 3 }, &init);
        assert_eq!(answer, Some(vec![0, 0, 0, 1]));
    }
}
