//! Network attacks: TCP/UDP to a host listener, exotic socket families, unix sockets to host listeners.

use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::sync::mpsc;
use std::time::Duration;

use crate::{marker, need_sandbox, verdicts, Sbx};

fn grant_with_network(s: &Sbx, on: bool) -> String {
    format!(
        r#"{{ commands = "*", paths = ["{}"]{} }}"#,
        s.work.display(),
        if on { r#", network = "*""# } else { "" }
    )
}

/// A TCP listener on host loopback that reports what the first client sends.
fn tcp_listener() -> (u16, mpsc::Receiver<String>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((mut c, _)) = l.accept() {
            let mut buf = String::new();
            let _ = c.read_to_string(&mut buf);
            let _ = tx.send(buf);
        }
    });
    (port, rx)
}

fn udp_listener() -> (u16, mpsc::Receiver<String>) {
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let port = u.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        if let Ok((n, _)) = u.recv_from(&mut buf) {
            let _ = tx.send(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    });
    (port, rx)
}

fn tcp_udp_code(tcp: u16, udp: u16) -> String {
    format!(
        r#"
def tcp():
    c = socket.create_connection(("127.0.0.1", {tcp}), timeout=3)
    c.sendall(b"from-sandbox"); c.close()
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"udp-from-sandbox", ("127.0.0.1", {udp}))
def outside():
    c = socket.create_connection(("1.1.1.1", 53), timeout=3); c.close()
def tcp6():
    socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
attempt("tcp_loopback", tcp)
attempt("udp_loopback", udp)
attempt("tcp_outside", outside)
attempt("inet6_socket", tcp6)
a, b = socket.socketpair()
attempt("control_unix_pair", lambda: a.send(b"x") and b.recv(1))
"#
    )
}

#[test]
fn network_off_blocks_tcp_and_udp_to_host_loopback() {
    need_sandbox!();
    let s = Sbx::new();
    let (tcp, tcp_rx) = tcp_listener();
    let (udp, udp_rx) = udp_listener();
    let r = s.py(&grant_with_network(&s, false), &[], &tcp_udp_code(tcp, udp));
    r.expect_code(0);
    verdicts(
        &r,
        &[
            "tcp_loopback",
            "udp_loopback",
            "tcp_outside",
            "inet6_socket",
        ],
        &["control_unix_pair"],
    );
    assert!(tcp_rx.recv_timeout(Duration::from_millis(300)).is_err());
    assert!(udp_rx.recv_timeout(Duration::from_millis(300)).is_err());
}

#[test]
fn network_on_reaches_host_loopback() {
    need_sandbox!();
    let s = Sbx::new();
    let (tcp, tcp_rx) = tcp_listener();
    let (udp, udp_rx) = udp_listener();
    let code = format!(
        r#"
def tcp():
    c = socket.create_connection(("127.0.0.1", {tcp}), timeout=3)
    c.sendall(b"from-sandbox"); c.close()
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"udp-from-sandbox", ("127.0.0.1", {udp}))
attempt("tcp_loopback", tcp)
attempt("udp_loopback", udp)
"#
    );
    let r = s.py(&grant_with_network(&s, true), &[], &code);
    r.expect_code(0);
    verdicts(&r, &[], &["tcp_loopback", "udp_loopback"]);
    assert_eq!(
        tcp_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        "from-sandbox"
    );
    assert_eq!(
        udp_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        "udp-from-sandbox"
    );
}

const EXOTIC: &str = r#"
AF_VSOCK = 40
NETLINK_ROUTE, NETLINK_AUDIT, NETLINK_KOBJECT_UEVENT = 0, 9, 15
attempt("raw_inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
attempt("vsock", lambda: socket.socket(AF_VSOCK, socket.SOCK_STREAM, 0))
attempt("netlink_audit", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_AUDIT))
attempt("netlink_uevent", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_KOBJECT_UEVENT))
attempt("netlink_route", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE))
attempt("control_unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
"#;

#[test]
fn exotic_socket_families_are_denied_with_network_off_and_on() {
    need_sandbox!();
    let s = Sbx::new();
    let off = s.py(&grant_with_network(&s, false), &[], EXOTIC);
    verdicts(
        &off,
        &[
            "raw_inet",
            "packet",
            "vsock",
            "netlink_audit",
            "netlink_uevent",
            "netlink_route",
        ],
        &["control_unix"],
    );
    off.stdout_has("packet: BLOCKED EPERM");
    let on = s.py(&grant_with_network(&s, true), &[], EXOTIC);
    verdicts(
        &on,
        &["packet", "vsock", "netlink_audit", "netlink_uevent"],
        // With the network granted, a route netlink socket (what `ip addr` uses) still works.
        &["control_unix", "netlink_route"],
    );
    on.stdout_has("vsock: BLOCKED EPERM");
}

#[test]
fn unix_sockets_of_the_host_are_unreachable() {
    need_sandbox!();
    let s = Sbx::new();
    let abstract_name = marker("abs");
    let path = s.outside.join("host.sock");
    // Host listeners: one abstract, one pathname (in a directory the sandbox can read).
    let abs = {
        use std::os::linux::net::SocketAddrExt;
        let addr =
            std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        UnixListener::bind_addr(&addr).unwrap()
    };
    let pathname = UnixListener::bind(&path).unwrap();
    abs.set_nonblocking(true).unwrap();
    pathname.set_nonblocking(true).unwrap();
    let code = format!(
        r#"
def conn(addr):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(3)
    c.connect(addr)
attempt("abstract_host", lambda: conn("\0{abstract_name}"))
attempt("pathname_host", lambda: conn("{p}"))
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind("\0{abstract_name}-inner"); srv.listen(1)
attempt("control_abstract_inside", lambda: conn("\0{abstract_name}-inner"))
"#,
        p = path.display()
    );
    for on in [false, true] {
        let r = s.py(&grant_with_network(&s, on), &[], &code);
        verdicts(
            &r,
            &["abstract_host", "pathname_host"],
            &["control_abstract_inside"],
        );
        assert!(
            abs.accept().is_err(),
            "network={on}: the host abstract listener got a client"
        );
        assert!(
            pathname.accept().is_err(),
            "network={on}: the host pathname listener got a client"
        );
    }
}
