//! The control socket over a real Unix socket, with fake workers at the other end of real
//! command channels: replies, hostile clients (garbage, oversized lines, too many clients, slow
//! and silent clients), a worker that never answers, the socket's mode and its removal.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use wirespeed_control::config::{AppConfig, FibKind, RouterConfig, RouterInterface};
use wirespeed_control::dispatch::Dispatcher;
use wirespeed_control::socket::{ControlSocket, Limits, request};
use wirespeed_dataplane::command::{
    self, AppCommand, AppReply, Command, ReplyBody, Retired, Table, WorkerEnd,
};
use wirespeed_dataplane::worker::WorkerSnapshot;
use wirespeed_io::{Backend, PortInfo, PortStats};

/// A fake worker: answers like a worker with one port and a "fake" app that knows routes.
fn fake_worker(mut end: WorkerEnd, index: usize, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut iterations = 0;
        while !stop.load(Ordering::Relaxed) {
            iterations += 1;
            end.serve(|command| match command {
                Command::Ping => ReplyBody::Pong { iterations },
                Command::Snapshot => {
                    let mut snapshot = WorkerSnapshot::default();
                    snapshot.counters.rx_packets = 100 + index as u64;
                    snapshot.ports.push((
                        PortInfo {
                            name: format!("p{index}"),
                            backend: Backend::Memory,
                            mac: [0; 6],
                            mtu: 1500,
                            queues: 1,
                            link_up: true,
                            mode: "ring".into(),
                        },
                        PortStats {
                            rx_packets: 7,
                            ..PortStats::default()
                        },
                    ));
                    snapshot.app.push(("fake.hits", 3));
                    ReplyBody::Snapshot(Box::new(snapshot))
                }
                Command::Inject(injection) => ReplyBody::Injected {
                    sent: injection.outputs.len(),
                    injection,
                },
                Command::App(command) => ReplyBody::App {
                    app: "fake",
                    reply: match command {
                        AppCommand::ShowRoutes => AppReply::Table(Table {
                            columns: vec!["prefix".into()],
                            rows: vec![vec![format!("10.{index}.0.0/16")]],
                        }),
                        AppCommand::RouteAddV4 { .. } => AppReply::Done,
                        AppCommand::ReplaceFib(routes) => AppReply::Retired(Retired::Fib(routes)),
                        AppCommand::ReplaceAcl(_) => AppReply::Done,
                        AppCommand::NeighbourAdd(n) if n.port != format!("p{index}") => {
                            AppReply::Refused(format!("no port named {}", n.port))
                        }
                        AppCommand::NeighbourAdd(_) => AppReply::Done,
                        _ => AppReply::Unsupported,
                    },
                },
            });
            std::thread::sleep(Duration::from_micros(200));
        }
    })
}

struct Setup {
    socket: Option<ControlSocket>,
    path: PathBuf,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    /// The socket's directory, named by the test's process: removed when the test ends.
    dir: PathBuf,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.socket.take();
        self.stop.store(true, Ordering::Relaxed);
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `answering` fake workers plus, with `stuck`, one more whose requests nobody serves.
fn setup(name: &str, answering: usize, stuck: bool, limits: Limits) -> (Setup, Option<WorkerEnd>) {
    setup_app(name, answering, stuck, limits, None)
}

/// [`setup`] for a switch running `app` (the workers stay fake).
fn setup_app(
    name: &str,
    answering: usize,
    stuck: bool,
    limits: Limits,
    app: Option<&AppConfig>,
) -> (Setup, Option<WorkerEnd>) {
    let dir = std::env::temp_dir().join(format!("wirespeed-control-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("sub").join("ctl.sock");
    let stop = Arc::new(AtomicBool::new(false));
    let mut ends = Vec::new();
    let mut workers = Vec::new();
    for index in 0..answering {
        let (control, worker) = command::channel(command::RING_CAPACITY);
        ends.push(control);
        workers.push(fake_worker(worker, index, Arc::clone(&stop)));
    }
    let mut held = None;
    if stuck {
        let (control, worker) = command::channel(command::RING_CAPACITY);
        ends.push(control);
        held = Some(worker);
    }
    let mut dispatcher = Dispatcher::new(ends, Duration::from_millis(300));
    if let Some(app) = app {
        dispatcher = dispatcher.with_app(app);
    }
    let socket = ControlSocket::bind(&path, limits, Arc::new(dispatcher)).unwrap();
    (
        Setup {
            socket: Some(socket),
            path,
            stop,
            workers,
            dir,
        },
        held,
    )
}

fn ask(path: &Path, line: &str) -> Value {
    send_file(path, line, b"")
}

/// Sends `line` and then `content`, as `wirespeed ctl` sends a file.
fn send_file(path: &Path, line: &str, content: &[u8]) -> Value {
    let reply = request(path, line, content, Duration::from_secs(5)).unwrap();
    serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{reply:?}: {e}"))
}

/// `first load` of `content` under the file name `name`.
fn load(path: &Path, first: &str, name: &str, content: &str) -> Value {
    send_file(
        path,
        &format!("{first} load {} {name}", content.len()),
        content.as_bytes(),
    )
}

/// A client connection that reads replies line by line.
struct Client {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Client {
    fn connect(path: &Path) -> Client {
        let writer = UnixStream::connect(path).unwrap();
        writer
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let reader = BufReader::new(writer.try_clone().unwrap());
        Client { writer, reader }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    fn reply(&mut self) -> Value {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        assert!(line.ends_with('\n'), "{line:?}");
        serde_json::from_str(&line).unwrap()
    }
}

#[test]
fn requests_reach_every_worker_and_replies_are_merged() {
    let (setup, _) = setup("merge", 2, false, Limits::default());
    let path = &setup.path;

    let metadata = std::fs::symlink_metadata(path).unwrap();
    assert!(metadata.file_type().is_socket());
    assert_eq!(metadata.permissions().mode() & 0o777, 0o600);

    let ping = ask(path, "ping");
    assert_eq!(ping["ok"], true, "{ping}");
    assert_eq!(ping["result"]["rows"].as_array().unwrap().len(), 2);

    let ports = ask(path, "show ports");
    let rows = ports["result"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1][0], "1");
    assert_eq!(rows[1][1], "p1");
    assert_eq!(rows[1][4], "7");

    let counters = ask(path, "show counters");
    let rows = counters["result"]["rows"].as_array().unwrap();
    let rx = rows.iter().find(|r| r[0] == "rx_packets").unwrap();
    assert_eq!(rx.as_array().unwrap()[1..], ["100", "101", "201"]);
    assert!(rows.iter().any(|r| r[0] == "app.fake.hits" && r[3] == "6"));

    let workers = ask(path, "show workers");
    assert_eq!(workers["result"]["rows"].as_array().unwrap().len(), 2);

    let routes = ask(path, "show routes");
    assert_eq!(routes["result"]["columns"][0], "worker");
    assert_eq!(routes["result"]["rows"][1][1], "10.1.0.0/16");

    let added = ask(path, "route add 10.0.0.0/8 via 198.18.1.1");
    assert_eq!(added["result"]["applied"], 2, "{added}");

    let unsupported = ask(path, "mac flush");
    assert_eq!(unsupported["ok"], false);
    assert!(
        unsupported["error"]
            .as_str()
            .unwrap()
            .contains("the fake app does not support `mac flush`"),
        "{unsupported}"
    );

    let refused = ask(path, "neighbour add 198.18.1.1 02:00:00:00:00:01 p0");
    assert_eq!(refused["ok"], false);
    let error = refused["error"].as_str().unwrap();
    assert!(
        error.contains("worker 1: no port named p0") && error.contains("applied on 1 of 2"),
        "{error}"
    );

    let help = ask(path, "help");
    assert!(help["result"]["rows"].as_array().unwrap().len() > 10);
}

#[test]
fn a_route_file_sent_by_the_client_is_built_here_and_published_to_workers() {
    let (setup, _) = setup("load", 2, false, Limits::default());
    let mut text = String::new();
    for i in 0..20_000u32 {
        text.push_str(&format!(
            "{}/24 via 198.18.{}.1\n",
            std::net::Ipv4Addr::from_bits(0x0b00_0000 | (i << 8)),
            i % 4
        ));
    }
    text.push_str("2001:db8::/32 via 2001:db8::1\n");
    let loaded = load(&setup.path, "route", "routes.txt", &text);
    assert_eq!(loaded["ok"], true, "{loaded}");
    assert_eq!(loaded["result"]["routes_v4"], 20_000);
    assert_eq!(loaded["result"]["routes_v6"], 1);
    assert_eq!(loaded["result"]["gateways"], 5);
    assert_eq!(loaded["result"]["applied"], 2);

    let bad = load(
        &setup.path,
        "route",
        "routes.txt",
        "10.0.0.0/8 via 1.1.1.1\n10.0.0.0/99 via 1.1.1.1\n",
    );
    assert!(
        bad["error"].as_str().unwrap().contains("routes.txt:2:"),
        "{bad}"
    );
    let twice = load(
        &setup.path,
        "route",
        "r.txt",
        "10.0.0.0/8 via 1.1.1.1\n10.0.0.0/8 via 1.1.1.2\n",
    );
    assert_eq!(
        twice["error"], "r.txt:2: 10.0.0.0/8 is routed twice: line 1 routes it already",
        "{twice}"
    );
    let acl = load(
        &setup.path,
        "acl",
        "a.acl",
        "deny proto=udp dst_port=53\npermit\n",
    );
    assert_eq!(acl["result"]["rules"], 2, "{acl}");
    let acl = load(
        &setup.path,
        "acl",
        "a.acl",
        "permit\ndeny src=10.0.0.0/8 src=10.1.0.0/16\n",
    );
    assert!(
        acl["error"]
            .as_str()
            .unwrap()
            .starts_with("a.acl:2: field src: is given twice"),
        "{acl}"
    );
}

#[test]
fn the_switch_opens_no_path_a_client_names() {
    let (setup, _) = setup("shadow", 1, false, Limits::default());
    let secret = setup.path.parent().unwrap().join("secret");
    std::fs::write(&secret, "root:SECRET-HASH:19000::::::\n").unwrap();
    for first in ["route", "acl"] {
        let reply = ask(&setup.path, &format!("{first} load {}", secret.display()));
        assert_eq!(reply["ok"], false, "{reply}");
        let text = reply.to_string();
        assert!(
            !text.contains("SECRET"),
            "the file's content came back: {text}"
        );
        assert!(text.contains("does not open files"), "{text}");
    }
}

#[test]
fn a_route_via_the_routers_own_address_is_refused_naming_the_line() {
    let router = AppConfig::Router(RouterConfig {
        interfaces: vec![RouterInterface {
            port: 0,
            mac: None,
            addresses: vec![
                ("198.18.0.254".parse().unwrap(), 24),
                ("2001:2::fe".parse().unwrap(), 64),
            ],
        }],
        routes: Vec::new(),
        neighbours: Vec::new(),
        neighbour_capacity: 16,
        icmp_rate: 0,
        forward_ipv4_options: false,
        fib: FibKind::Dir24,
    });
    let (setup, _) = setup_app("own", 1, false, Limits::default(), Some(&router));
    let reply = load(
        &setup.path,
        "route",
        "routes.txt",
        "10.0.0.0/8 via 198.18.0.1\n2001:db8::/32 via 2001:2::fe\n10.1.0.0/16 via 198.18.0.254\n",
    );
    assert_eq!(
        reply["error"], "routes.txt:2: gateway 2001:2::fe is an address of the router itself",
        "{reply}"
    );
    assert!(
        reply["fix"]
            .as_str()
            .unwrap()
            .contains("neighbouring router"),
        "{reply}"
    );
    let good = load(
        &setup.path,
        "route",
        "routes.txt",
        "10.0.0.0/8 via 198.18.0.1\n",
    );
    assert_eq!(good["result"]["applied"], 1, "{good}");
    let added = ask(&setup.path, "route add 10.9.0.0/16 via 198.18.0.254");
    assert_eq!(
        added["error"],
        "gateway 198.18.0.254 is an address of the router itself"
    );
    let added = ask(&setup.path, "route add 10.9.0.0/16 via 198.18.0.1");
    assert_eq!(added["result"]["applied"], 1, "{added}");
}

#[test]
fn content_is_bounded_and_the_connection_stays_in_step() {
    let limits = Limits {
        max_body: 1000,
        idle: Duration::from_millis(800),
        ..Limits::default()
    };
    let (setup, _) = setup("body", 1, false, limits);
    let path = &setup.path;

    // Refused at line 1 of a longer file: the rest is read and discarded, and a request sent
    // right behind the content (in the same write) is answered.
    let mut client = Client::connect(path);
    let content = "nonsense\n".repeat(100);
    client.send(format!("route load {} r.txt\n{content}ping\n", content.len()).as_bytes());
    let reply = client.reply();
    assert!(
        reply["error"].as_str().unwrap().starts_with("r.txt:1: "),
        "{reply}"
    );
    assert_eq!(client.reply()["ok"], true, "the ping after the content");
    // Content split over several writes, then another request.
    let content = "10.0.0.0/8 via 1.1.1.1\n";
    client.send(format!("route load {} r.txt\n10.0.0.0", content.len()).as_bytes());
    std::thread::sleep(Duration::from_millis(50));
    client.send(b"/8 via 1.1.1.1\nping\n");
    assert_eq!(client.reply()["result"]["routes_v4"], 1);
    assert_eq!(client.reply()["ok"], true);

    // Files load one at a time: while one client's content is still arriving, another's load
    // is refused (the switch holds one parsed table, not one per client); then it goes through.
    let mut slow = Client::connect(path);
    let content = "10.0.0.0/8 via 1.1.1.1\n";
    slow.send(format!("route load {} first.txt\n10.0.0.0", content.len()).as_bytes());
    std::thread::sleep(Duration::from_millis(100));
    let busy = load(path, "acl", "second.acl", "permit\n");
    assert_eq!(
        busy["error"],
        "second.acl: another client is loading a file; files load one at a time"
    );
    slow.send(b"/8 via 1.1.1.1\n");
    assert_eq!(slow.reply()["result"]["routes_v4"], 1);
    assert_eq!(
        load(path, "acl", "second.acl", "permit\n")["result"]["rules"],
        1
    );

    // More than the limit: refused before a byte is read, and the client closed.
    let reply = send_file(path, "acl load 1001 big.acl", &[b'#'; 1001]);
    assert_eq!(
        reply["error"],
        "the file is 1001 bytes, more than the 1000 accepted; closing"
    );
    let mut client = Client::connect(path);
    client.send(b"acl load 5000000 big.acl\n");
    assert!(
        client.reply()["error"]
            .as_str()
            .unwrap()
            .contains("more than")
    );
    let mut rest = Vec::new();
    assert_eq!(client.reader.read_to_end(&mut rest).unwrap(), 0);

    // Content that stops short: the client is told (or closed) after the idle time, never
    // waited for forever, and others are served meanwhile.
    let mut short = Client::connect(path);
    short.send(b"route load 100 r.txt\n10.0.0.0/8 via 1.1.1.1\n");
    assert_eq!(ask(path, "ping")["ok"], true);
    let started = Instant::now();
    let reply = short.reply();
    assert!(
        reply["error"].as_str().unwrap().contains("bytes short"),
        "{reply}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    let mut rest = Vec::new();
    assert_eq!(short.reader.read_to_end(&mut rest).unwrap(), 0);
}

#[test]
fn a_worker_that_does_not_answer_is_named() {
    let (setup, _stuck) = setup("stuck", 1, true, Limits::default());
    let started = Instant::now();
    let ping = ask(&setup.path, "ping");
    assert_eq!(ping["ok"], false);
    let error = ping["error"].as_str().unwrap();
    assert!(
        error.contains("worker 1") && error.contains("did not answer"),
        "{error}"
    );
    assert!(!error.contains("worker 0"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn hostile_clients_get_errors_and_the_server_keeps_serving() {
    let limits = Limits {
        max_line: 1024,
        max_clients: 4,
        idle: Duration::from_millis(800),
        write: Duration::from_millis(500),
        max_body: 1 << 20,
    };
    let (setup, _) = setup("hostile", 1, false, limits);
    let path = &setup.path;

    // Garbage, then a good request on the same connection.
    let mut client = Client::connect(path);
    client.send(b"\xff\xfe\x00garbage\nfrobnicate --now\nshow\n\nping\n");
    let reply = client.reply();
    assert!(
        reply["error"].as_str().unwrap().contains("UTF-8"),
        "{reply}"
    );
    let reply = client.reply();
    assert!(
        reply["error"].as_str().unwrap().contains("`frobnicate`")
            && reply["fix"].as_str().unwrap().contains("help, ping, show"),
        "{reply}"
    );
    assert!(client.reply()["fix"].as_str().unwrap().contains("ports"));
    assert!(client.reply()["error"].as_str().unwrap().contains("empty"));
    assert_eq!(client.reply()["ok"], true);

    // An oversized line: one error, the rest of the line discarded, the connection usable.
    client.send(&vec![b'a'; 1_000_000]);
    client.send(b"aaaa\nping\n");
    let reply = client.reply();
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("longer than 1024"),
        "{reply}"
    );
    assert_eq!(client.reply()["ok"], true);

    // Too many clients: the extra one is told and closed; the others still work.
    let mut others: Vec<Client> = (0..3).map(|_| Client::connect(path)).collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut extra = Client::connect(path);
    let reply = extra.reply();
    assert!(
        reply["error"].as_str().unwrap().contains("too many"),
        "{reply}"
    );
    let mut rest = Vec::new();
    assert_eq!(extra.reader.read_to_end(&mut rest).unwrap(), 0);
    others[0].send(b"ping\n");
    assert_eq!(others[0].reply()["ok"], true);

    // A slow client (a byte at a time, never a full line) is closed at the idle limit;
    // meanwhile the others are served.
    let mut slow = Client::connect(path);
    drop(others);
    let started = Instant::now();
    for _ in 0..4 {
        slow.send(b"p");
        assert_eq!(ask(path, "ping")["ok"], true);
        std::thread::sleep(Duration::from_millis(100));
    }
    let reply = slow.reply();
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("no complete request"),
        "{reply}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));

    // A client that sends requests and never reads: closed when its writes time out, and
    // others are still served.
    let mut deaf = UnixStream::connect(path).unwrap();
    deaf.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    for _ in 0..2000 {
        if deaf.write_all(b"help\n").is_err() {
            break;
        }
    }
    assert_eq!(ask(path, "ping")["ok"], true);
    drop(client);
    drop(deaf);
    for _ in 0..10 {
        assert_eq!(ask(path, "show ports")["ok"], true);
    }
}

#[test]
fn the_socket_file_is_removed_on_drop_and_a_stale_one_replaced() {
    let (mut setup, _) = setup("lifecycle", 1, false, Limits::default());
    let path = setup.path.clone();
    // A second server on the same live path is refused.
    let (control, _worker) = command::channel(4);
    let second = ControlSocket::bind(
        &path,
        Limits::default(),
        Arc::new(Dispatcher::new(vec![control], Duration::from_millis(100))),
    );
    let error = second.err().unwrap();
    assert!(error.to_string().contains("another process"), "{error}");
    setup.socket.take();
    assert!(!path.exists());

    // A stale socket file (no listener) is replaced; a regular file is not touched.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let (control, _worker) = command::channel(4);
    let socket = ControlSocket::bind(
        &path,
        Limits::default(),
        Arc::new(Dispatcher::new(vec![control], Duration::from_millis(100))),
    )
    .unwrap();
    drop(socket);
    std::fs::write(&path, "not a socket").unwrap();
    let (control, _worker) = command::channel(4);
    let refused = ControlSocket::bind(
        &path,
        Limits::default(),
        Arc::new(Dispatcher::new(vec![control], Duration::from_millis(100))),
    );
    assert!(refused.err().unwrap().to_string().contains("not a socket"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a socket");
}
