//! Tier A's outer stage: the bubblewrap argument vector for a profile (pure).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::profile::{private_dirs, Profile};

/// Where the inner stage's executable appears inside the view: a read-only copy bwrap makes from loom's sealed copy
/// (`--ro-bind-data`), on the view's own `/dev` (a fresh tmpfs in every view, even under a root of `/`).
pub const INNER_EXE_IN_VIEW: &str = "/dev/.loom-sandbox-exec";

/// What the host's bubblewrap supports beyond the basics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BwrapFeatures {
    /// `--disable-userns` (bubblewrap 0.8+).
    pub disable_userns: bool,
}

/// Descriptor numbers of the opened grant roots and protected paths, as the bwrap process will see them.
pub type PathFds = BTreeMap<PathBuf, i32>;

/// Why the view cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BwrapError {
    /// A root or protected path has no opened descriptor (a bug in the caller).
    #[error("bwrap: no descriptor was opened for {0}")]
    NoFd(PathBuf),
    /// The inner stage cannot be placed in the view.
    #[error("bwrap: cannot place loom's inner stage at {0} in the view: a grant root holds it; grant a narrower root than /dev")]
    NoPlaceForInner(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    System {
        path: PathBuf,
        symlink: Option<PathBuf>,
    },
    Tmpfs(PathBuf),
    Dev,
    Proc,
    Root {
        path: PathBuf,
        writable: bool,
    },
    Pinned(PathBuf),
    Protected(PathBuf),
    Masked(PathBuf),
}

impl Op {
    fn dest(&self) -> &Path {
        match self {
            Op::System { path, .. }
            | Op::Tmpfs(path)
            | Op::Protected(path)
            | Op::Pinned(path)
            | Op::Masked(path) => path,
            Op::Root { path, .. } => path,
            Op::Dev => Path::new("/dev"),
            Op::Proc => Path::new("/proc"),
        }
    }
    fn rank(&self) -> u8 {
        match self {
            Op::System { .. } => 0,
            Op::Tmpfs(_) => 1,
            Op::Dev | Op::Proc => 2,
            Op::Root { .. } => 3,
            Op::Pinned(_) => 4,
            Op::Protected(_) => 5,
            Op::Masked(_) => 6,
        }
    }
}

/// Where the inner stage's executable is in the view ([`INNER_EXE_IN_VIEW`]): never the installed file itself, which
/// could lie inside a writable root (loom in `~/.cargo/bin` or a project's `target/`) and be replaced by a command.
pub fn inner_exe_in_view(profile: &Profile) -> Result<PathBuf, BwrapError> {
    let at = PathBuf::from(INNER_EXE_IN_VIEW);
    // The view's /dev is mounted over any shallower root (`/` included); only a root at /dev or below it would cover
    // the place.
    if profile
        .roots()
        .iter()
        .any(|(root, _)| root.starts_with("/dev") && at.starts_with(root))
    {
        return Err(BwrapError::NoPlaceForInner(at));
    }
    Ok(at)
}

/// Descriptors of the bwrap process besides the grant roots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageFds {
    /// A read-only descriptor, at offset 0, of loom's sealed copy of the inner stage's executable.
    pub inner_exe: i32,
    /// A descriptor from which bwrap reads the compiled seccomp program (raw `struct sock_filter` array).
    pub seccomp: i32,
}

/// The bwrap argv (without the `bwrap` program itself) that builds the profile's view and runs the inner stage with
/// the arguments `inner` (those after its executable).
///
/// Mounts are ordered by depth, so a deeper mount always lands on top of a shallower one: system directories
/// read-only, private tmpfs over `/tmp`, `/run`, `/var/tmp` and home (unless a root holds them), fresh `/dev` and a
/// fresh `/proc` remounted read-only (so no `/proc/sys` knob, `/proc/sysrq-trigger` or `/proc/<pid>/mem` can be
/// opened for writing, even by a command running as uid 0), grant roots bound back by descriptor (read-only for
/// `read_paths`), then protected paths re-bound read-only and
/// secret stores masked by `/dev/null`. The inner stage's executable is copied read-only into the
/// view from `stage.inner_exe`; bwrap installs the seccomp program read from `stage.seccomp` on its own pid 1 as well
/// as on the inner stage, so no process of the view runs without it.
pub fn build_bwrap_args(
    profile: &Profile,
    fds: &PathFds,
    features: BwrapFeatures,
    stage: StageFds,
    inner: &[OsString],
) -> Result<Vec<OsString>, BwrapError> {
    let mut a: Vec<OsString> = Vec::new();
    let mut flag = |s: &str| a.push(s.into());
    flag("--die-with-parent");
    flag("--new-session");
    flag("--unshare-user");
    flag("--unshare-pid");
    flag("--unshare-ipc");
    flag("--unshare-uts");
    flag("--unshare-cgroup-try");
    if !profile.network {
        flag("--unshare-net");
    }
    if features.disable_userns {
        flag("--disable-userns");
    }
    flag("--cap-drop");
    flag("ALL");

    let mut ops: Vec<Op> = Vec::new();
    for s in &profile.system {
        if !profile.in_root(&s.path) {
            ops.push(Op::System {
                path: s.path.clone(),
                symlink: s.symlink.clone(),
            });
        }
    }
    ops.extend(private_dirs(profile).into_iter().map(Op::Tmpfs));
    ops.push(Op::Dev);
    ops.push(Op::Proc);
    for (root, writable) in profile.roots() {
        ops.push(Op::Root {
            path: root.to_path_buf(),
            writable,
        });
    }
    ops.extend(profile.pinned.iter().cloned().map(Op::Pinned));
    ops.extend(profile.protected.iter().cloned().map(Op::Protected));
    ops.extend(profile.masked.iter().cloned().map(Op::Masked));
    ops.sort_by_key(|op| {
        (
            op.dest().components().count(),
            op.rank(),
            op.dest().to_path_buf(),
        )
    });

    let fd_of = |p: &Path| {
        fds.get(p)
            .map(|fd| OsString::from(fd.to_string()))
            .ok_or_else(|| BwrapError::NoFd(p.to_path_buf()))
    };
    for op in &ops {
        match op {
            Op::System {
                path,
                symlink: Some(target),
            } => {
                a.push("--symlink".into());
                a.push(target.into());
                a.push(path.into());
            }
            Op::System {
                path,
                symlink: None,
            } => {
                a.push("--ro-bind".into());
                a.push(path.into());
                a.push(path.into());
            }
            Op::Tmpfs(path) => {
                a.push("--tmpfs".into());
                a.push(path.into());
            }
            Op::Dev => {
                a.push("--dev".into());
                a.push("/dev".into());
            }
            Op::Proc => {
                a.push("--proc".into());
                a.push("/proc".into());
                // bwrap covers /proc/sys only when it can write the directory, which procfs never allows.
                a.push("--remount-ro".into());
                a.push("/proc".into());
            }
            Op::Root { path, writable } => {
                a.push(
                    if *writable {
                        "--bind-fd"
                    } else {
                        "--ro-bind-fd"
                    }
                    .into(),
                );
                a.push(fd_of(path)?);
                a.push(path.into());
            }
            Op::Pinned(path) => {
                a.push("--bind-fd".into());
                a.push(fd_of(path)?);
                a.push(path.into());
            }
            Op::Protected(path) => {
                a.push("--ro-bind-fd".into());
                a.push(fd_of(path)?);
                a.push(path.into());
            }
            Op::Masked(path) => {
                // an empty, read-only stand-in: the command reads nothing and cannot replace it
                a.push("--ro-bind".into());
                a.push("/dev/null".into());
                a.push(path.into());
            }
        }
    }
    let in_view = inner_exe_in_view(profile)?;
    a.push("--perms".into());
    a.push("0555".into());
    a.push("--ro-bind-data".into());
    a.push(stage.inner_exe.to_string().into());
    a.push(in_view.clone().into());
    a.push("--seccomp".into());
    a.push(stage.seccomp.to_string().into());
    a.push("--chdir".into());
    a.push(profile.cwd.clone().into());
    a.push("--".into());
    a.push(in_view.into());
    a.extend(inner.iter().cloned());
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::tests::build;

    fn args(src: &str) -> Vec<String> {
        let p = build(src).unwrap();
        let mut fds = PathFds::new();
        for (i, path) in p
            .roots()
            .into_iter()
            .map(|(p, _)| p.to_path_buf())
            .chain(p.protected.clone())
            .chain(p.pinned.clone())
            .enumerate()
        {
            fds.insert(path, 10 + i as i32);
        }
        build_bwrap_args(
            &p,
            &fds,
            BwrapFeatures {
                disable_userns: true,
            },
            StageFds {
                inner_exe: 7,
                seccomp: 8,
            },
            &["__sandbox-exec".into(), "--".into(), "ls".into()],
        )
        .unwrap()
        .into_iter()
        .map(|s| s.into_string().unwrap())
        .collect()
    }

    fn pos(a: &[String], window: &[&str]) -> usize {
        a.windows(window.len())
            .position(|w| w == window)
            .unwrap_or_else(|| panic!("{window:?} not in {a:?}"))
    }

    #[test]
    fn a_project_row_builds_the_expected_view() {
        // `./.git` named as a root of its own: the repository is writable but for its hooks and config
        let a =
            args(r#"{ commands = "*", paths = ["./", "./.git"], read_paths = ["/work/docs"] }"#);
        for f in [
            "--die-with-parent",
            "--new-session",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--disable-userns",
        ] {
            assert!(a.contains(&f.to_string()), "{f}");
        }
        pos(&a, &["--cap-drop", "ALL"]);
        pos(&a, &["--ro-bind", "/usr", "/usr"]);
        pos(&a, &["--symlink", "usr/bin", "/bin"]);
        let tmp = pos(&a, &["--tmpfs", "/tmp"]);
        let home = pos(&a, &["--tmpfs", "/home/u"]);
        let docs = pos(&a, &["--ro-bind-fd", "10", "/work/docs"]);
        let proj = pos(&a, &["--bind-fd", "11", "/work/proj"]);
        let hooks = pos(&a, &["--ro-bind-fd", "13", "/work/proj/.git/hooks"]);
        assert!(tmp < docs && home < proj && proj < hooks);
        pos(&a, &["--ro-bind-fd", "12", "/work/proj/.git/config"]);
        let pinned = pos(&a, &["--bind-fd", "15", "/work/proj/.git"]);
        assert!(
            proj < pinned && pinned < hooks,
            "the pin lands between the root and the protected path"
        );
        let proc = pos(&a, &["--proc", "/proc", "--remount-ro", "/proc"]);
        assert!(proc < proj, "/proc is read-only before the roots are bound");
        // The inner stage is a read-only, executable copy from loom's descriptor, never the installed file; bwrap
        // installs the seccomp program (on its pid 1 too).
        pos(
            &a,
            &["--perms", "0555", "--ro-bind-data", "7", INNER_EXE_IN_VIEW],
        );
        pos(&a, &["--seccomp", "8"]);
        assert!(!a.contains(&"/opt/loom/bin/loom".to_string()));
        let end = pos(
            &a,
            &[
                "--chdir",
                "/work/proj",
                "--",
                INNER_EXE_IN_VIEW,
                "__sandbox-exec",
                "--",
                "ls",
            ],
        );
        assert_eq!(end + 7, a.len());
    }

    #[test]
    fn a_secret_store_is_masked_by_an_empty_read_only_file_above_its_root() {
        let mut p = build(r#"{ commands = "*", paths = ["./"] }"#).unwrap();
        p.masked.push("/work/proj/.loom-secrets".into());
        let mut fds = PathFds::new();
        for (i, path) in p
            .roots()
            .into_iter()
            .map(|(p, _)| p.to_path_buf())
            .chain(p.protected.clone())
            .enumerate()
        {
            fds.insert(path, 10 + i as i32);
        }
        let a: Vec<String> = build_bwrap_args(
            &p,
            &fds,
            BwrapFeatures::default(),
            StageFds {
                inner_exe: 7,
                seccomp: 8,
            },
            &[],
        )
        .unwrap()
        .into_iter()
        .map(|s| s.into_string().unwrap())
        .collect();
        let root = pos(&a, &["--bind-fd", "10", "/work/proj"]);
        let mask = pos(&a, &["--ro-bind", "/dev/null", "/work/proj/.loom-secrets"]);
        assert!(root < mask);
    }

    #[test]
    fn network_rows_keep_the_host_network_namespace() {
        let a = args(r#"{ commands = "*", network = "*" }"#);
        assert!(!a.contains(&"--unshare-net".to_string()));
        assert!(a.contains(&"--unshare-pid".to_string()));
    }

    #[test]
    fn the_root_of_everything_goes_first_and_masks_nothing() {
        let a = args(r#"{ commands = "*", paths = "*" }"#);
        let root = pos(&a, &["--bind-fd", "10", "/"]);
        let dev = pos(&a, &["--dev", "/dev"]);
        let proc = pos(&a, &["--proc", "/proc", "--remount-ro", "/proc"]);
        let inner = pos(&a, &["--ro-bind-data", "7", INNER_EXE_IN_VIEW]);
        assert!(root < dev && root < proc && dev < inner);
        assert!(!a.contains(&"--tmpfs".to_string()));
        assert!(
            !a.contains(&"/usr".to_string()),
            "system dirs are inside the writable root"
        );
        pos(&a, &["--ro-bind-fd", "11", "/home/u/.bashrc"]);
    }

    #[test]
    fn missing_descriptors_are_a_typed_error() {
        let p = build(r#"{ commands = "*", paths = ["./"] }"#).unwrap();
        let stage = StageFds {
            inner_exe: 7,
            seccomp: 8,
        };
        let err = build_bwrap_args(&p, &PathFds::new(), BwrapFeatures::default(), stage, &[])
            .unwrap_err();
        assert!(matches!(err, BwrapError::NoFd(_)));
    }

    #[test]
    fn a_root_holding_the_inner_stage_place_is_refused() {
        let mut p = build(r#"{ commands = "*", paths = ["./"] }"#).unwrap();
        assert_eq!(inner_exe_in_view(&p), Ok(INNER_EXE_IN_VIEW.into()));
        p.writable.push("/dev".into());
        assert_eq!(
            inner_exe_in_view(&p),
            Err(BwrapError::NoPlaceForInner(INNER_EXE_IN_VIEW.into()))
        );
    }
}
