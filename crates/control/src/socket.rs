//! The control socket: a Unix stream socket (mode 0600) on which `wirespeed ctl` and other
//! clients send requests, one per line, and read one JSON reply per line.
//!
//! One thread accepts; each client gets a thread of its own, so a slow or silent client delays
//! nobody else, and at most [`Limits::max_clients`] are served at once (the next one is told so
//! and closed). Every client is hostile: a line longer than [`Limits::max_line`] gets an error and
//! is discarded up to its newline without being stored; a client that takes longer than
//! [`Limits::idle`] to complete a line is told and closed; a client that does not read its replies
//! is closed when a write times out. A file a client loads (`route load BYTES NAME`) follows its
//! line as content: it is handed to the handler as a reader while it arrives, so the switch holds
//! what it parsed, never the bytes; content over [`Limits::max_body`] is refused and the client
//! closed, and what the handler does not read is discarded before the next line. The socket file
//! is created in a private directory, given mode 0600 there and then renamed into place, so it is
//! never reachable with wider permissions; it is removed when the [`ControlSocket`] is dropped (if
//! it is still ours).

use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::dispatch::Handler;
use crate::protocol::{self, LineEvent, LineSplitter, Response};

/// What a client may do.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Longest request line, bytes.
    pub max_line: usize,
    /// Clients served at once.
    pub max_clients: usize,
    /// Longest a client may take to send a complete line (idle or slow).
    pub idle: Duration,
    /// Longest a reply may take to be written (a client that does not read).
    pub write: Duration,
    /// Most content bytes a request may announce (a route or ACL file).
    pub max_body: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_line: protocol::MAX_LINE,
            max_clients: 8,
            idle: Duration::from_secs(60),
            write: Duration::from_secs(5),
            max_body: crate::tables::MAX_FILE_BYTES,
        }
    }
}

/// How often blocked threads look at the stop flag.
const TICK: Duration = Duration::from_millis(50);

/// Why the control socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("control socket {path}: {message}")]
    Setup {
        path: PathBuf,
        message: String,
        fix: String,
    },
    #[error("control socket {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl SocketError {
    /// How to fix it.
    pub fn fix(&self) -> &str {
        match self {
            SocketError::Setup { fix, .. } => fix,
            SocketError::Io { .. } => {
                "check the directory exists and is writable, or set [switch] control_socket"
            }
        }
    }
}

/// A listening control socket and its threads.
pub struct ControlSocket {
    path: PathBuf,
    identity: (u64, u64),
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlSocket {
    /// Creates the socket at `path` (mode 0600) and starts serving `handler`.
    pub fn bind(
        path: &Path,
        limits: Limits,
        handler: Arc<dyn Handler>,
    ) -> Result<ControlSocket, SocketError> {
        ControlSocket::bind_then(path, limits, handler, || Ok(()))
    }

    /// [`ControlSocket::bind`], with `first` run on the control thread before it accepts a
    /// client: the threads that serve clients are started by that thread and inherit what
    /// `first` made of it (the switch drops its capabilities there). When `first` fails, nothing
    /// is served and its error is returned.
    pub fn bind_then(
        path: &Path,
        limits: Limits,
        handler: Arc<dyn Handler>,
        first: impl FnOnce() -> Result<(), SocketError> + Send + 'static,
    ) -> Result<ControlSocket, SocketError> {
        let io = |source| SocketError::Io {
            path: path.to_path_buf(),
            source,
        };
        let listener = create(path)?;
        let metadata = fs::symlink_metadata(path).map_err(io)?;
        listener.set_nonblocking(true).map_err(io)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (started, start) = std::sync::mpsc::sync_channel(1);
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("control".into())
                .spawn(move || {
                    let first = first();
                    let serve = first.is_ok();
                    let _ = started.send(first);
                    if serve {
                        accept_loop(listener, limits, handler, stop);
                    }
                })
                .map_err(io)?
        };
        let socket = ControlSocket {
            path: path.to_path_buf(),
            identity: (metadata.dev(), metadata.ino()),
            stop,
            thread: Some(thread),
        };
        // A thread that ended without a word panicked in `first`. Either way the socket is
        // dropped: the thread is joined and the file removed.
        start.recv().unwrap_or_else(|_| {
            Err(SocketError::Setup {
                path: path.to_path_buf(),
                message: "the control thread stopped before serving".into(),
                fix: "see the message it printed".into(),
            })
        })?;
        Ok(socket)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // Remove the file only if it is still the one this socket created.
        if let Ok(metadata) = fs::symlink_metadata(&self.path)
            && (metadata.dev(), metadata.ino()) == self.identity
        {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Binds a listener at `path` with mode 0600: bound inside a fresh private (0700) directory,
/// chmod'ed there, then renamed into place. A stale socket file (no one listening) is replaced;
/// a live one or any other file is an error.
fn create(path: &Path) -> Result<UnixListener, SocketError> {
    let setup = |message: String, fix: &str| SocketError::Setup {
        path: path.to_path_buf(),
        message,
        fix: fix.to_string(),
    };
    let io = |source| SocketError::Io {
        path: path.to_path_buf(),
        source,
    };
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(setup(
            "not a file path".into(),
            "set [switch] control_socket to a path like /run/wirespeed/switch.sock",
        ));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    if let Ok(metadata) = fs::symlink_metadata(path) {
        if !metadata.file_type().is_socket() {
            return Err(setup(
                "exists and is not a socket".into(),
                "remove the file or set [switch] control_socket to another path",
            ));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(setup(
                "another process is listening on it (another switch?)".into(),
                "stop the other switch, or give this one its own [switch] control_socket",
            ));
        }
        fs::remove_file(path).map_err(io)?;
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(parent)
        .map_err(io)?;
    let private = parent.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&private);
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(io)?;
    let inside = private.join("s");
    let result = UnixListener::bind(&inside).and_then(|listener| {
        fs::set_permissions(&inside, fs::Permissions::from_mode(0o600))?;
        fs::rename(&inside, path)?;
        Ok(listener)
    });
    let _ = fs::remove_file(&inside);
    let _ = fs::remove_dir(&private);
    result.map_err(io)
}

/// Decrements the count of active clients when a client thread ends, however it ends.
struct Active(Arc<AtomicUsize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn accept_loop(
    listener: UnixListener,
    limits: Limits,
    handler: Arc<dyn Handler>,
    stop: Arc<AtomicBool>,
) {
    let active = Arc::new(AtomicUsize::new(0));
    let mut clients: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        clients.retain(|client| !client.is_finished());
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(TICK / 5);
                continue;
            }
            Err(_) => {
                // E.g. EMFILE: wait for descriptors to free up rather than spin.
                std::thread::sleep(TICK);
                continue;
            }
        };
        if active.load(Ordering::Relaxed) >= limits.max_clients {
            refuse(stream, &limits);
            continue;
        }
        active.fetch_add(1, Ordering::Relaxed);
        let guard = Active(Arc::clone(&active));
        let (handler, stop, limits) = (Arc::clone(&handler), Arc::clone(&stop), limits.clone());
        let spawned = std::thread::Builder::new()
            .name("control-client".into())
            .spawn(move || {
                let _guard = guard;
                serve(stream, &limits, handler.as_ref(), &stop);
            });
        // A thread that cannot be started drops its closure: the stream closes, the guard
        // decrements.
        if let Ok(client) = spawned {
            clients.push(client);
        }
    }
    for client in clients {
        let _ = client.join();
    }
}

fn refuse(mut stream: UnixStream, limits: &Limits) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(TICK));
    let reply = Response::error(
        format!(
            "too many control clients (at most {} at once)",
            limits.max_clients
        ),
        "close idle `wirespeed ctl` sessions or try again",
    );
    let _ = stream.write_all(reply.to_line().as_bytes());
}

/// Serves one client until it closes, misbehaves, or the server stops.
fn serve(mut stream: UnixStream, limits: &Limits, handler: &dyn Handler, stop: &AtomicBool) {
    if stream.set_nonblocking(false).is_err()
        || stream.set_read_timeout(Some(TICK)).is_err()
        || stream.set_write_timeout(Some(limits.write)).is_err()
    {
        return;
    }
    let mut splitter = LineSplitter::new(limits.max_line);
    let mut chunk = [0u8; 4096];
    // A client must complete each line within `idle` of the previous one.
    let mut deadline = Instant::now() + limits.idle;
    while !stop.load(Ordering::Relaxed) {
        let read = match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => 0,
            Err(e) if e.kind() == ErrorKind::Interrupted => 0,
            Err(_) => return,
        };
        let mut at = 0;
        while at < read {
            let (used, event) = splitter.feed_line(&chunk[at..read]);
            at += used;
            let (response, close) = match event {
                None => continue,
                Some(LineEvent::TooLong) => (protocol::too_long(limits.max_line), false),
                Some(LineEvent::Line(line)) => match protocol::parse(&line) {
                    Err(error) => (error.into(), false),
                    Ok(request) if request.body_len() > limits.max_body => (
                        Response::error(
                            format!(
                                "the file is {} bytes, more than the {} accepted; closing",
                                request.body_len(),
                                limits.max_body
                            ),
                            "split the file, or aggregate its entries",
                        ),
                        true,
                    ),
                    Ok(request) => {
                        let mut body = Body {
                            buffered: &chunk[at..read],
                            stream: &stream,
                            remaining: request.body_len(),
                            idle: limits.idle,
                            stop,
                        };
                        let response = handler.handle(request, &mut body);
                        // What the handler left (it stopped at an error) is discarded, so
                        // that the next line starts where the client's does.
                        let drained = std::io::copy(&mut body, &mut std::io::sink());
                        at = read - body.buffered.len();
                        (response, drained.is_err())
                    }
                },
            };
            deadline = Instant::now() + limits.idle;
            if stream.write_all(response.to_line().as_bytes()).is_err() || close {
                return;
            }
        }
        if Instant::now() >= deadline {
            let reply = Response::error(
                format!(
                    "no complete request for {} s; closing",
                    limits.idle.as_secs_f64()
                ),
                "send one command per line; connect again when needed",
            );
            let _ = stream.write_all(reply.to_line().as_bytes());
            return;
        }
    }
}

/// The content after a request line, as a reader: first what the last read brought beyond the
/// line, then the stream, never more than the request announced. A client that sends nothing
/// for `idle`, or closes early, ends it with an error; so does the server stopping.
struct Body<'a> {
    buffered: &'a [u8],
    stream: &'a UnixStream,
    remaining: u64,
    idle: Duration,
    stop: &'a AtomicBool,
}

impl Read for Body<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let want = out
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let taken = if self.buffered.is_empty() {
            self.receive(&mut out[..want])?
        } else {
            let taken = want.min(self.buffered.len());
            out[..taken].copy_from_slice(&self.buffered[..taken]);
            self.buffered = &self.buffered[taken..];
            taken
        };
        self.remaining -= taken as u64;
        Ok(taken)
    }
}

impl Body<'_> {
    fn receive(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let deadline = Instant::now() + self.idle;
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Err(std::io::Error::other("the switch is stopping"));
            }
            match self.stream.read(out) {
                Ok(0) => {
                    return Err(std::io::Error::new(
                        ErrorKind::UnexpectedEof,
                        format!(
                            "the client closed the connection {} bytes short of the size it \
                             announced",
                            self.remaining
                        ),
                    ));
                }
                Ok(n) => return Ok(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) =>
                {
                    if Instant::now() >= deadline {
                        return Err(std::io::Error::new(
                            ErrorKind::TimedOut,
                            format!(
                                "no content for {} s, {} bytes short",
                                self.idle.as_secs_f64(),
                                self.remaining
                            ),
                        ));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Sends one request line, then `body` (the content the line announces; empty for most
/// requests), to the socket at `path` and returns the reply line (without its newline): the
/// client side, for `wirespeed ctl` and tests. A switch that refuses the content early may close
/// before taking all of it; its reply is still read and returned.
pub fn request(path: &Path, line: &str, body: &[u8], timeout: Duration) -> std::io::Result<String> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut message = line.trim_end_matches('\n').to_string();
    message.push('\n');
    let sent = stream
        .write_all(message.as_bytes())
        .and_then(|()| stream.write_all(body));
    let mut reply = Vec::new();
    let mut byte = [0u8; 4096];
    loop {
        let n = match stream.read(&mut byte) {
            Ok(n) => n,
            // No reply either: the failed send is the story.
            Err(error) if reply.is_empty() => return Err(sent.err().unwrap_or(error)),
            Err(error) => return Err(error),
        };
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&byte[..n]);
        if reply.contains(&b'\n') {
            break;
        }
    }
    if reply.is_empty() {
        sent?;
    }
    let end = reply
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(reply.len());
    reply.truncate(end);
    String::from_utf8(reply).map_err(|_| std::io::Error::other("the reply is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Request;

    /// Answers every request with `ok`, naming the thread that served it.
    struct ThreadName;

    impl Handler for ThreadName {
        fn handle(&self, _: Request, _: &mut dyn Read) -> Response {
            Response::Ok(serde_json::json!(std::thread::current().name()))
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("wirespeed-socket-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir.join("ctl.sock")
    }

    #[test]
    fn first_runs_on_the_control_thread_before_any_client_is_served() {
        let path = scratch("first");
        let (ran_on, ran) = std::sync::mpsc::channel();
        let socket =
            ControlSocket::bind_then(&path, Limits::default(), Arc::new(ThreadName), move || {
                let _ = ran_on.send(std::thread::current().name().map(String::from));
                Ok(())
            })
            .unwrap();
        assert_eq!(ran.try_recv().unwrap().as_deref(), Some("control"));
        let reply = request(&path, "ping", &[], Duration::from_secs(5)).unwrap();
        assert!(reply.contains("control-client"), "{reply}");
        drop(socket);
        let _ = fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn a_failing_first_serves_nobody_and_removes_the_socket() {
        let path = scratch("refused");
        let refused =
            ControlSocket::bind_then(&path, Limits::default(), Arc::new(ThreadName), || {
                Err(SocketError::Setup {
                    path: PathBuf::from("x"),
                    message: "dropping capabilities failed".into(),
                    fix: "the fix".into(),
                })
            });
        let error = refused.err().unwrap();
        assert!(
            error.to_string().contains("dropping capabilities failed"),
            "{error}"
        );
        assert_eq!(error.fix(), "the fix");
        assert!(!path.exists(), "the socket file was left behind");
        let _ = fs::remove_dir_all(path.parent().unwrap());
    }
}
