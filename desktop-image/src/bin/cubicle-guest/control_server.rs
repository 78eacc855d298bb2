//! The control service on guest port 1024: JSON lines in, JSON lines out.

use cubicle_guest::control::{ErrorReply, MAX_REQUEST, Request};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::supervisor::Supervisor;

pub async fn serve(stream: UnixStream, supervisor: &Supervisor) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read.take(u64::MAX));
    loop {
        let mut line = String::new();
        lines.get_mut().set_limit(MAX_REQUEST as u64 + 1);
        match lines.read_line(&mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let reply = if !line.ends_with('\n') {
            error(format!("request longer than {MAX_REQUEST} bytes"))
        } else {
            answer(&line, supervisor)
        };
        if write.write_all(reply.as_bytes()).await.is_err() || !line.ends_with('\n') {
            return;
        }
    }
}

fn answer(line: &str, supervisor: &Supervisor) -> String {
    let reply = match serde_json::from_str::<Request>(line) {
        Ok(Request::Health) => serde_json::to_string(&supervisor.health()),
        Err(err) => return error(format!("bad control request: {err}")),
    };
    match reply {
        Ok(mut text) => {
            text.push('\n');
            text
        }
        Err(err) => error(format!("cannot encode reply: {err}")),
    }
}

fn error(message: String) -> String {
    let reply = ErrorReply { error: message };
    let mut text = serde_json::to_string(&reply).unwrap_or_else(|_| "{}".into());
    text.push('\n');
    text
}
