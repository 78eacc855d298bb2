//! The control service on guest port 1024: JSON lines in, JSON lines out.
//! See [`cubicle_image::control`] for the ops; an `exec_stream` request
//! turns the rest of the connection over to [`crate::exec_stream`].

use cubicle_image::control::{ErrorCode, ErrorReply, MAX_REQUEST, Request};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

use crate::supervisor::Supervisor;
use crate::{exec, exec_stream, files, profile, uploads, user};

/// Serves one control connection: a Unix stream in the jail, a vsock
/// stream in a microVM.
pub async fn serve<S>(stream: S, supervisor: &Supervisor)
where
    S: AsyncRead + AsyncWrite,
{
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(read.take(u64::MAX));
    loop {
        let mut line = String::new();
        lines.get_mut().set_limit(MAX_REQUEST as u64 + 1);
        match lines.read_line(&mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if !line.ends_with('\n') {
            let reply = ErrorReply::new(
                ErrorCode::TooLarge,
                format!("request longer than {MAX_REQUEST} bytes"),
            );
            let _ = write.write_all(encode(&reply).as_bytes()).await;
            return;
        }
        let reply = match serde_json::from_str::<Request>(&line) {
            Ok(Request::ExecStream(request)) => {
                return exec_stream::serve(request, lines, write).await;
            }
            Ok(request) => answer(request, supervisor).await,
            Err(err) => encode(&ErrorReply::new(
                ErrorCode::BadRequest,
                format!("bad control request: {err}"),
            )),
        };
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

async fn answer(request: Request, supervisor: &Supervisor) -> String {
    match request {
        Request::Health => encode(&supervisor.health()),
        Request::Exec(request) => reply(exec::run(request).await),
        Request::ExecStream(_) => encode(&ErrorReply::new(
            ErrorCode::BadRequest,
            "exec_stream takes over its connection",
        )),
        Request::ReadFile(request) => blocking(move || files::read(request)).await,
        Request::WriteFile(request) => blocking(move || files::write(request)).await,
        Request::ListDir(request) => blocking(move || files::list(request)).await,
        Request::Stat(request) => blocking(move || files::stat(request)).await,
        Request::Delete(request) => blocking(move || files::delete(request)).await,
        Request::StageUpload(request) => {
            // As the services' id: the user must not reach the file.
            let root = supervisor.uploads.clone();
            let stage = move || uploads::stage(&root, request).map_err(ErrorReply::from);
            match tokio::task::spawn_blocking(stage).await {
                Ok(result) => reply(result),
                Err(err) => encode(&ErrorReply::new(
                    ErrorCode::Io,
                    format!("staging the upload failed: {err}"),
                )),
            }
        }
        Request::ProfileSave(request) => {
            let places = &supervisor.profile;
            reply(
                profile::save(supervisor, places, request)
                    .await
                    .map_err(ErrorReply::from),
            )
        }
        Request::ProfileLoad(request) => {
            let places = &supervisor.profile;
            reply(
                profile::load(supervisor, places, request)
                    .await
                    .map_err(ErrorReply::from),
            )
        }
        Request::ProfileChunk(request) => {
            let places = supervisor.profile.clone();
            services_blocking(move || profile::chunk(&places, request)).await
        }
        Request::ProfilePut(request) => {
            let places = supervisor.profile.clone();
            services_blocking(move || profile::put(&places, request)).await
        }
    }
}

/// Runs a file system op off the async threads, with the user's file ids
/// (so the user's permissions hold, and what it creates is the user's).
async fn blocking<T, F>(op: F) -> String
where
    T: Serialize + Send + 'static,
    F: FnOnce() -> Result<T, files::FilesError> + Send + 'static,
{
    let as_user = move || match user::FilesAsUser::begin() {
        Ok(_as_user) => op().map_err(ErrorReply::from),
        Err(err) => Err(ErrorReply::new(ErrorCode::Io, err.to_string())),
    };
    match tokio::task::spawn_blocking(as_user).await {
        Ok(result) => reply(result),
        Err(err) => encode(&ErrorReply::new(
            ErrorCode::Io,
            format!("file operation failed: {err}"),
        )),
    }
}

/// Runs a profile op off the async threads, with the services' own ids.
async fn services_blocking<T, F>(op: F) -> String
where
    T: Serialize + Send + 'static,
    F: FnOnce() -> Result<T, profile::ProfileError> + Send + 'static,
{
    match tokio::task::spawn_blocking(op).await {
        Ok(result) => reply(result.map_err(ErrorReply::from)),
        Err(err) => encode(&ErrorReply::new(
            ErrorCode::Io,
            format!("the profile op failed: {err}"),
        )),
    }
}

fn reply<T: Serialize>(result: Result<T, ErrorReply>) -> String {
    match result {
        Ok(value) => encode(&value),
        Err(err) => encode(&err),
    }
}

/// One reply line.
fn encode<T: Serialize>(value: &T) -> String {
    let mut text = serde_json::to_string(value).unwrap_or_else(|err| {
        let message = format!("cannot encode reply: {err}");
        serde_json::json!({ "error": message, "code": "io" }).to_string()
    });
    text.push('\n');
    text
}
