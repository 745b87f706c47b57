//! Who is on the other end of the socket, and reading from it without ever accepting a passed descriptor.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// The peer's credentials as the kernel recorded them at `connect()` (`SO_PEERCRED`), translated into loom's
/// namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    /// Process id.
    pub pid: i32,
    /// User id.
    pub uid: u32,
}

/// Reads `SO_PEERCRED` of a connected unix socket.
pub fn peer_cred(sock: &UnixStream) -> io::Result<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes passed.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(PeerCred {
        pid: cred.pid,
        uid: cred.uid,
    })
}

/// This process's effective user id.
pub fn my_uid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// The parent pid of `pid` from `/proc/<pid>/stat`; `None` when it is gone.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain anything; fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// True when `pid` is `root` or a descendant of it (following parent pids through `/proc`, at most 4096 steps).
pub fn descends_from(pid: i32, root: i32) -> bool {
    let mut cur = pid;
    for _ in 0..4096 {
        if cur == root {
            return true;
        }
        match parent_of(cur) {
            Some(p) if p > 0 && p != cur => cur = p,
            _ => return false,
        }
    }
    false
}

/// A reader over a unix stream that refuses ancillary data: every read is a `recvmsg` with room for control
/// messages, and any descriptor that arrives (`SCM_RIGHTS`) is closed at once and turned into an error.
pub struct NoFdReader {
    fd: RawFd,
}

/// The error kind [`NoFdReader`] returns when a descriptor (or any other control message) arrived.
pub const FD_PASSED: &str = "file descriptors passed over the broker socket are refused";

impl NoFdReader {
    /// Reads from `sock` (which must outlive the reader).
    pub fn new(sock: &UnixStream) -> NoFdReader {
        NoFdReader {
            fd: sock.as_raw_fd(),
        }
    }
}

impl Read for NoFdReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Room for 64 descriptors; more are discarded by the kernel (MSG_CTRUNC), which is refused too.
        let mut control = [0u64; 40];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: an all-zero msghdr is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        let n = loop {
            // SAFETY: `msg` points at live buffers of the stated sizes for the duration of the call.
            let n = unsafe { libc::recvmsg(self.fd, &mut msg, libc::MSG_CMSG_CLOEXEC) };
            if n >= 0 {
                break n as usize;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        let mut passed = msg.msg_flags & libc::MSG_CTRUNC != 0;
        if msg.msg_controllen > 0 {
            passed = true;
            // SAFETY: walking the control buffer the kernel just filled, with the libc CMSG macros.
            unsafe {
                let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
                while !cmsg.is_null() {
                    if (*cmsg).cmsg_level == libc::SOL_SOCKET
                        && (*cmsg).cmsg_type == libc::SCM_RIGHTS
                    {
                        let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                        let bytes = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                        for i in 0..bytes / std::mem::size_of::<RawFd>() {
                            // Take ownership so the descriptor is closed right here.
                            drop(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                        }
                    }
                    cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
                }
            }
        }
        if passed {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, FD_PASSED));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn credentials_and_ancestry_of_ourselves() {
        let (a, _b) = UnixStream::pair().unwrap();
        let c = peer_cred(&a).unwrap();
        assert_eq!(c.pid, std::process::id() as i32);
        assert_eq!(c.uid, my_uid());
        assert!(descends_from(c.pid, c.pid));
        let parent = parent_of(c.pid).unwrap();
        assert!(descends_from(c.pid, parent));
        assert!(!descends_from(parent, c.pid));
        assert!(
            !descends_from(i32::MAX, 1),
            "a pid that does not exist descends from nothing"
        );
    }

    #[test]
    fn passed_descriptors_are_closed_and_refused() {
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"plain").unwrap();
        let mut r = NoFdReader::new(&a);
        let mut buf = [0u8; 16];
        assert_eq!(r.read(&mut buf).unwrap(), 5);

        let file = std::fs::File::open("/dev/null").unwrap();
        let fds = [file.as_raw_fd()];
        let mut control = [0u64; 8];
        let mut byte = *b"x";
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of_val(&fds) as u32) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(&fds) as u32) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast(), 1);
            assert_eq!(libc::sendmsg(b.as_raw_fd(), &msg, 0), 1);
        }
        let err = r.read(&mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert!(err.to_string().contains("refused"));
    }
}
