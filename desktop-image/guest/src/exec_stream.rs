//! `exec_stream`: after the request line, the control stream carries
//! [`ExecEvent`] lines to the host (`started`, then `stdout`/`stderr`
//! chunks, then `exit` or `error`) and [`ExecInput`] lines from it (stdin
//! chunks, stdin EOF). The host hanging up, or sending anything else, kills
//! the command's process group.

use std::convert::Infallible;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use cubicle_image::control::{
    ErrorCode, ErrorReply, ExecEvent, ExecInput, ExecRequest, MAX_EVENT_LINE, STREAM_CHUNK,
};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Take};
use tokio::process::ChildStdin;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;

use crate::exec;

/// Output events waiting for a slow host, per command.
const QUEUED_EVENTS: usize = 8;

/// Runs `request`, streaming over `input`/`output` until it ends.
pub async fn serve<R, W>(request: ExecRequest, mut input: BufReader<Take<R>>, mut output: W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    if request.stdin.is_some() {
        let reply = ErrorReply::new(
            ErrorCode::BadRequest,
            "stdin: the streaming form takes stdin as input lines, not in the request",
        );
        let _ = send(&mut output, &ExecEvent::Error(reply)).await;
        return;
    }
    let mut running = match exec::spawn(&request, true) {
        Ok(running) => running,
        Err(err) => {
            let _ = send(&mut output, &ExecEvent::Error(err.into())).await;
            return;
        }
    };
    if send(&mut output, &ExecEvent::Started).await.is_err() {
        return;
    }
    let stdin = running.child.stdin.take();
    let (ended_tx, ended_rx) = watch::channel(None);
    let (events_tx, events_rx) = mpsc::channel(QUEUED_EVENTS);
    let hangup = Notify::new();
    let stdout = pump(
        running.child.stdout.take(),
        false,
        events_tx.clone(),
        ended_rx.clone(),
    );
    let stderr = pump(running.child.stderr.take(), true, events_tx, ended_rx);
    let writer = write_events(events_rx, &mut output, &hangup);
    let waiter = async {
        let ended = running.wait(hangup.notified()).await;
        let _ = ended_tx.send(Some(Instant::now()));
        ended
    };
    let work = async { tokio::join!(waiter, stdout, stderr, writer).0 };
    let (status, timed_out) = tokio::select! {
        ended = work => ended,
        never = read_input(&mut input, stdin, &hangup) => match never {},
    };
    let exit = running.exit(status, timed_out);
    let _ = send(&mut output, &ExecEvent::Exit(exit)).await;
}

async fn send<W: AsyncWrite + Unpin>(output: &mut W, event: &ExecEvent) -> std::io::Result<()> {
    let mut line = serde_json::to_string(event).map_err(std::io::Error::other)?;
    line.push('\n');
    output.write_all(line.as_bytes()).await
}

/// Sends `pipe`'s output as events in chunks of at most [`STREAM_CHUNK`].
async fn pump(
    pipe: Option<impl AsyncRead + Unpin>,
    stderr: bool,
    events: mpsc::Sender<ExecEvent>,
    mut ended: watch::Receiver<Option<Instant>>,
) {
    let Some(mut pipe) = pipe else {
        return;
    };
    let mut buf = vec![0u8; STREAM_CHUNK];
    while let Some(n) = exec::next_chunk(&mut pipe, &mut buf, &mut ended).await {
        let data = B64.encode(&buf[..n]);
        let event = if stderr {
            ExecEvent::Stderr { data }
        } else {
            ExecEvent::Stdout { data }
        };
        if events.send(event).await.is_err() {
            return;
        }
    }
}

/// Writes queued events to the host; a failed write is a hang-up.
async fn write_events<W: AsyncWrite + Unpin>(
    mut events: mpsc::Receiver<ExecEvent>,
    output: &mut W,
    hangup: &Notify,
) {
    while let Some(event) = events.recv().await {
        if send(output, &event).await.is_err() {
            hangup.notify_one();
            return;
        }
    }
}

/// Forwards the host's stdin lines until the host hangs up or breaks the
/// protocol, then signals `hangup`; never returns.
async fn read_input<R: AsyncRead + Unpin>(
    input: &mut BufReader<Take<R>>,
    mut stdin: Option<ChildStdin>,
    hangup: &Notify,
) -> Infallible {
    loop {
        let mut line = String::new();
        input.get_mut().set_limit(MAX_EVENT_LINE as u64 + 1);
        match input.read_line(&mut line).await {
            Ok(n) if n > 0 && line.ends_with('\n') => {}
            _ => break,
        }
        match serde_json::from_str::<ExecInput>(&line) {
            Ok(ExecInput::Stdin { data }) => {
                let Ok(bytes) = B64.decode(data) else { break };
                if let Some(pipe) = stdin.as_mut()
                    && pipe.write_all(&bytes).await.is_err()
                {
                    // The command closed its stdin; later chunks are dropped.
                    stdin = None;
                }
            }
            Ok(ExecInput::StdinEof) => stdin = None,
            Err(_) => break,
        }
    }
    hangup.notify_one();
    std::future::pending().await
}
