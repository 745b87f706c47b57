//! The broker's refusals, driven over its real socket with hand-written frames. No sandbox backend is configured,
//! so nothing here ever runs a command: every path must end in an error frame (the end-to-end suites that do run
//! commands are in `tests/broker/`).

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use loom_kernel::PathCtx;

use crate::frame::{self, read_frame, write_frame, Request};
use crate::{Broker, BrokerConfig, BrokerError, BrokerHandle, BrokerLimits};

const SET: &str =
    r#"[{ commands = "*", paths = ["./"] }, { commands = ["gcalcli"], network = "*" }]"#;

fn config(grant: &str) -> BrokerConfig {
    BrokerConfig {
        tool: "bash".into(),
        grant: loom_sandbox::parse_grant(grant).unwrap(),
        ctx: PathCtx::new("/", None),
        home: None,
        host_path: "/usr/bin:/bin".into(),
        host_env: Vec::new(),
        secrets: loom_sandbox::SecretFacts::default(),
        authority: loom_sandbox::AuthorityPaths::default(),
        backend: None,
        limits: BrokerLimits::default(),
        shim: std::env::current_exe().unwrap(),
        tmp: std::env::temp_dir(),
    }
}

fn request(argv: &[&str]) -> Vec<u8> {
    Request {
        argv: argv.iter().map(Into::into).collect(),
        cwd: "/".into(),
        env: vec!["LD_PRELOAD=/x.so".into()],
    }
    .encode()
    .unwrap()
}

/// Sends one request frame and returns the broker's single answer frame, which must be an error.
#[track_caller]
fn refusal(h: &BrokerHandle, payload: &[u8]) -> (i32, String) {
    let mut s = UnixStream::connect(h.socket()).unwrap();
    // a broker at capacity may answer and close before reading the request; the answer is still there to read
    if let Err(e) = write_frame(&mut s, frame::T_REQUEST, payload) {
        assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ),
            "{e}"
        );
    }
    let f = read_frame(&mut s).unwrap().expect("an answer frame");
    assert_eq!(f.kind, frame::T_ERROR, "{f:?}");
    assert!(
        read_frame(&mut s).unwrap().is_none(),
        "the error frame is the last"
    );
    frame::error_parts(&f.payload)
}

#[test]
fn a_grant_without_both_kinds_of_rows_starts_no_broker() {
    for g in [
        r#""*""#,
        r#"{ commands = "*" }"#,
        r#"{ commands = ["gcalcli"] }"#,
    ] {
        assert!(
            matches!(Broker::start(config(g)), Err(BrokerError::NothingToBroker)),
            "{g}"
        );
    }
}

#[test]
fn names_paths_and_missing_backends_are_refused_with_their_codes() {
    let h = Broker::start(config(SET)).unwrap();
    assert_eq!(h.commands(), ["gcalcli"]);
    let (code, msg) = refusal(&h, &request(&["ls", "-la"]));
    assert_eq!(code, 127);
    assert!(msg.contains("`ls` is not named by any row"), "{msg}");
    let (code, msg) = refusal(&h, &request(&["/usr/bin/gcalcli"]));
    assert_eq!(code, 126);
    assert!(msg.contains("is a path"), "{msg}");
    let (code, msg) = refusal(&h, &request(&["gcalcli", "agenda"]));
    assert_eq!(code, 126);
    assert!(
        msg.contains("no sandbox backend") && msg.contains("never runs"),
        "{msg}"
    );
}

#[test]
fn malformed_requests_are_refused() {
    let h = Broker::start(config(SET)).unwrap();
    let mut bad = request(&["gcalcli"]);
    bad[1] = 9;
    let (code, msg) = refusal(&h, &bad);
    assert_eq!(code, 126);
    assert!(msg.contains("protocol version 9"), "{msg}");
    // A first frame that is not a request.
    let mut s = UnixStream::connect(h.socket()).unwrap();
    write_frame(&mut s, frame::T_STDIN, b"x").unwrap();
    let f = read_frame(&mut s).unwrap().unwrap();
    assert_eq!(f.kind, frame::T_ERROR);
    assert!(frame::error_parts(&f.payload)
        .1
        .contains("first frame must be a request"));
    // A header announcing more than the limit.
    let mut s = UnixStream::connect(h.socket()).unwrap();
    let mut head = vec![frame::T_REQUEST];
    head.extend_from_slice(&u32::MAX.to_be_bytes());
    s.write_all(&head).unwrap();
    let f = read_frame(&mut s).unwrap().unwrap();
    assert!(frame::error_parts(&f.payload)
        .1
        .contains("exceeds the limit"));
}

#[test]
fn callers_outside_the_served_sandbox_are_refused() {
    let h = Broker::start(config(SET)).unwrap();
    // Pretend the sandbox is rooted at a process this test does not descend from.
    let mut other = std::process::Command::new("sleep")
        .arg("10")
        .spawn()
        .unwrap();
    h.set_sandbox_root(other.id());
    let (code, msg) = refusal(&h, &request(&["gcalcli"]));
    assert_eq!(code, 126);
    assert!(
        msg.contains("not inside the sandbox this broker serves"),
        "{msg}"
    );
    // Control: rooted at our own pid, the call passes the peer check (and then meets the missing backend).
    h.set_sandbox_root(std::process::id());
    let (_, msg) = refusal(&h, &request(&["gcalcli"]));
    assert!(msg.contains("no sandbox backend"), "{msg}");
    let _ = other.kill();
    let _ = other.wait();
}

#[test]
fn dropping_the_handle_removes_everything_and_stops_listening() {
    let h = Broker::start(config(SET)).unwrap();
    let dir: PathBuf = h.dir().to_path_buf();
    let sock = h.socket();
    let shim = h.shim_dir().join("gcalcli");
    assert!(shim.is_file());
    let mut env = vec![("PATH".into(), "/usr/bin".into())];
    h.add_to_env(&mut env);
    let path = env.iter().find(|(k, _)| k == "PATH").unwrap().1.clone();
    assert_eq!(
        path.to_str().unwrap(),
        format!("{}:/usr/bin", h.shim_dir().display())
    );
    // A connection still open when the handle goes must not keep the directory alive.
    let _open = UnixStream::connect(&sock).unwrap();
    drop(h);
    assert!(!dir.exists(), "{} left behind", dir.display());
    assert!(UnixStream::connect(sock).is_err());
}

#[test]
fn a_flood_of_idle_connections_is_bounded() {
    let mut cfg = config(SET);
    cfg.limits = BrokerLimits {
        max_concurrent: 1,
        max_waiting: 1,
        request_timeout: std::time::Duration::from_millis(300),
        ..BrokerLimits::default()
    };
    let h = Broker::start(cfg).unwrap();
    // Two idle connections hold both connection slots until their request times out...
    let idle: Vec<UnixStream> = (0..2)
        .map(|_| UnixStream::connect(h.socket()).unwrap())
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let (code, msg) = refusal(&h, &request(&["gcalcli"]));
    assert_eq!(code, 126);
    assert!(msg.contains("too many brokered calls"), "{msg}");
    // ...and then the broker serves again.
    std::thread::sleep(std::time::Duration::from_millis(600));
    let (_, msg) = refusal(&h, &request(&["gcalcli"]));
    assert!(msg.contains("no sandbox backend"), "{msg}");
    drop(idle);
}

#[test]
fn a_request_sent_a_byte_at_a_time_meets_one_deadline_for_all_of_it() {
    let mut cfg = config(SET);
    cfg.limits.request_timeout = std::time::Duration::from_millis(300);
    let h = Broker::start(cfg).unwrap();
    let payload = request(&["gcalcli", "agenda"]);
    let mut bytes = vec![frame::T_REQUEST];
    bytes.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    bytes.extend_from_slice(&payload);
    // each byte well within the deadline, all of them well past it
    let mut s = UnixStream::connect(h.socket()).unwrap();
    for b in &bytes {
        if s.write_all(std::slice::from_ref(b)).is_err() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(40));
    }
    let f = read_frame(&mut s).unwrap().expect("an answer frame");
    let (code, msg) = frame::error_parts(&f.payload);
    assert_eq!(code, 126);
    assert!(msg.contains("not sent in time"), "{msg}");
    // control: the same request sent at once reaches the next check (the missing backend)
    let (_, msg) = refusal(&h, &payload);
    assert!(msg.contains("no sandbox backend"), "{msg}");
}
