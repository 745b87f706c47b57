//! Doing what the kernel allowed, and only that: a file tool opens the grant root the decided path falls under as a
//! directory descriptor, then the rest of the path beneath it without following any symlink (`openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, or a component-by-component `O_NOFOLLOW` walk where `openat2` is
//! missing). The path the kernel decided on is canonical (every symlink resolved before the decision), so a symlink
//! met here is one that appeared after the check — a directory swapped for a link by a racing process — and the
//! call is refused instead of being redirected.
//!
//! The descriptors are checked, not the names: a file tool reads and writes regular files only (checked with `fstat`
//! on the opened descriptor, opened non-blocking so that a FIFO never blocks the open), and a write replaces the file
//! whole (a temporary file created beside it with `O_EXCL`, then `renameat` beneath the same directory descriptor),
//! so a failed write leaves the old text in place.
//!
//! Blocking I/O runs on the blocking pool and the call stops waiting when it is cancelled ([`run_blocking`]); a
//! write that is cancelled before it commits ([`Gate`]) writes nothing.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use loom_kernel::{path_within, Access, Authorization, PathCtx, Value};
use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;
use tokio_util::sync::CancellationToken;

/// Why a file tool's I/O beneath a grant root refused or failed. Nothing was changed when this is returned (a write
/// replaces the file whole or not at all).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BeneathError {
    /// A component of the path is a symlink now, or leads outside the root: the path changed after the kernel
    /// checked it.
    #[error(
        "a component of the path is a symlink now, or leads elsewhere — it changed after loom checked it; loom opens \
         the checked path without following symlinks, so nothing was done (call again to check the new path)"
    )]
    Changed,
    /// The path is not below the root it was split at.
    #[error("not below {}; nothing was done", .root.display())]
    NotBelow {
        /// The root.
        root: PathBuf,
    },
    /// The path below the root has `.`, `..` or other non-name components.
    #[error("not a canonical path below {}; nothing was done", .root.display())]
    NotCanonical {
        /// The root.
        root: PathBuf,
    },
    /// The path is not UTF-8, so it cannot be matched against the grant.
    #[error("the path is not UTF-8")]
    NotUtf8,
    /// No root of the authorising row holds the path: the decision and the call disagree (a bug).
    #[error(
        "no root of the row that allowed this call holds the path; nothing was done (please report this)"
    )]
    NoRoot,
    /// A write named the granted root itself, a directory.
    #[error("is the granted root itself, a directory")]
    IsRoot,
    /// The parent directory does not exist and the call did not ask to create it.
    #[error("the parent directory does not exist; pass create_dirs = true to create it")]
    NoParent,
    /// A directory where a file was expected; `hint` says what to use instead.
    #[error("is a directory; {hint}")]
    Directory {
        /// What to do instead.
        hint: String,
    },
    /// Not a regular file (a FIFO, a socket, a device, a symlink).
    #[error("is {kind}; the file tools read and write regular files only")]
    NotRegular {
        /// What it is.
        kind: &'static str,
    },
    /// The call was cancelled before the file was written.
    #[error("cancelled before the file was written; nothing was changed")]
    Cancelled,
    /// Any other I/O error.
    #[error(transparent)]
    Io(io::Error),
}

impl From<BeneathError> for String {
    fn from(e: BeneathError) -> String {
        e.to_string()
    }
}

/// A decided path split at the grant root it falls under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The grant root (canonical, absolute).
    pub root: PathBuf,
    /// The rest of the path below it: plain names only (empty for the root itself).
    pub rel: PathBuf,
}

impl Target {
    /// Splits `path` (canonical, as the kernel decided on it) at the deepest root of the authorising row that holds
    /// it: `paths` for a write, `paths` or `read_paths` for a read. A grant of `"*"` (or a `"*"` value) is rooted at
    /// `/`. `Err` when no root of the row holds the path — the decision and the call disagree, so nothing is done.
    pub fn of(
        auth: &Authorization,
        ctx: &PathCtx,
        path: &Path,
        access: Access,
    ) -> Result<Target, BeneathError> {
        let Some((_, row)) = auth.row() else {
            return Target::within(Path::new("/"), path);
        };
        let path_s = path.to_str().ok_or(BeneathError::NotUtf8)?;
        let kinds: &[&str] = match access {
            Access::Write => &["paths"],
            Access::Read => &["paths", "read_paths"],
        };
        let mut best: Option<String> = None;
        for kind in kinds {
            match row.get(kind) {
                None => {}
                Some(Value::Star) => best = best.or_else(|| Some("/".to_string())),
                Some(v) => {
                    for root in v.elements().unwrap_or_default() {
                        let Some(r) = root.as_str() else { continue };
                        let r = ctx.normalize(r);
                        if path_within(&r, path_s)
                            && best.as_ref().is_none_or(|b| b.len() < r.len())
                        {
                            best = Some(r);
                        }
                    }
                }
            }
        }
        let root = best.ok_or(BeneathError::NoRoot)?;
        Target::within(Path::new(&root), path)
    }

    /// Splits `path` at `root`, which must hold it; both canonical.
    pub fn within(root: &Path, path: &Path) -> Result<Target, BeneathError> {
        let rel = path
            .strip_prefix(root)
            .map_err(|_| BeneathError::NotBelow {
                root: root.to_path_buf(),
            })?;
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(BeneathError::NotCanonical {
                root: root.to_path_buf(),
            });
        }
        // a root that is the path itself (a grant of one file, or `find` at a granted directory): open it as a name
        // beneath its parent, which is a prefix of the same canonical path
        if rel.as_os_str().is_empty() {
            if let (Some(parent), Some(name)) = (root.parent(), root.file_name()) {
                return Ok(Target {
                    root: parent.to_path_buf(),
                    rel: PathBuf::from(name),
                });
            }
        }
        Ok(Target {
            root: root.to_path_buf(),
            rel: rel.to_path_buf(),
        })
    }

    /// The parent (relative to the root) and the final name; `None` for the root itself.
    pub fn split(&self) -> Option<(&Path, &OsStr)> {
        let name = self.rel.file_name()?;
        Some((self.rel.parent().unwrap_or(Path::new("")), name))
    }

    /// Opens the grant root as a directory descriptor (`O_PATH`), following no symlink on the way: the root is a
    /// prefix of a canonical path, so a symlink in it appeared after the decision.
    pub fn open_root(&self) -> Result<OwnedFd, BeneathError> {
        open_root(&self.root).map_err(explain)
    }
}

/// The flags every open here adds: never follow the final component, never leak the descriptor into a child.
fn base_flags() -> OFlags {
    OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Opens the absolute, canonical directory `root` without following symlinks.
pub(crate) fn open_root(root: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    match rustix::fs::openat2(
        rustix::fs::CWD,
        root,
        flags,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Err(e) if openat2_missing(e) => {
            let slash = rustix::fs::openat(rustix::fs::CWD, "/", flags, Mode::empty())?;
            let rel = root.strip_prefix("/").map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "the root is not absolute")
            })?;
            walk_beneath(slash.as_fd(), rel, flags, Mode::empty())
        }
        r => r.map_err(io::Error::from),
    }
}

/// True when `openat2` itself is unavailable (a kernel before 5.6, or a seccomp filter that refuses it): the
/// component walk does the same job with `openat`.
fn openat2_missing(e: Errno) -> bool {
    e == Errno::NOSYS || e == Errno::PERM
}

/// Opens `rel` (plain names only; empty for `dir` itself) beneath `dir`: never above it, never through a symlink,
/// the final component included. `flags` are the open flags (`O_NOFOLLOW | O_CLOEXEC` are added).
pub(crate) fn open_beneath(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let flags = flags | base_flags();
    let rel_or_dot: &Path = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    match rustix::fs::openat2(
        dir,
        rel_or_dot,
        flags,
        mode,
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        // ENOTDIR: a directory was expected and something else is there — the walk tells a symlink (ELOOP) apart
        Err(e) if openat2_missing(e) || e == Errno::NOTDIR => walk_beneath(dir, rel, flags, mode),
        r => r.map_err(io::Error::from),
    }
}

/// The portable form of [`open_beneath`]: one `openat(O_NOFOLLOW)` per component from `dir`, each intermediate one
/// a directory. `..` and absolute paths are refused. A symlink anywhere gives `ELOOP`, as with `openat2`.
pub(crate) fn walk_beneath(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let flags = flags | base_flags();
    let mut names: Vec<&OsStr> = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => names.push(n),
            Component::CurDir => {}
            _ => return Err(Errno::XDEV.into()),
        }
    }
    let Some((last, parents)) = names.split_last() else {
        return rustix::fs::openat(dir, ".", flags, mode).map_err(io::Error::from);
    };
    let step = OFlags::PATH | OFlags::DIRECTORY | base_flags();
    let mut cur: Option<OwnedFd> = None;
    for name in parents {
        let at = cur.as_ref().map_or(dir, |f| f.as_fd());
        let next = rustix::fs::openat(at, *name, step, Mode::empty())
            .map_err(|e| symlink_is_loop(at, name, e))?;
        cur = Some(next);
    }
    let at = cur.as_ref().map_or(dir, |f| f.as_fd());
    rustix::fs::openat(at, *last, flags, mode).map_err(|e| symlink_is_loop(at, last, e))
}

/// `O_NOFOLLOW | O_DIRECTORY` on a symlink fails with `ENOTDIR`; report it as the symlink it is.
fn symlink_is_loop(at: BorrowedFd<'_>, name: &OsStr, e: Errno) -> io::Error {
    if e == Errno::NOTDIR {
        let link = rustix::fs::statat(at, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
        if link {
            return Errno::LOOP.into();
        }
    }
    e.into()
}

/// Opens (with `create`, making each missing one) the directory `rel` beneath `dir`, never through a symlink.
pub(crate) fn open_dir(dir: BorrowedFd<'_>, rel: &Path, create: bool) -> io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY;
    match open_beneath(dir, rel, flags, Mode::empty()) {
        Err(e) if create && e.kind() == io::ErrorKind::NotFound => {}
        r => return r,
    }
    let mut cur: Option<OwnedFd> = None;
    for c in rel.components() {
        let Component::Normal(name) = c else {
            return Err(Errno::XDEV.into());
        };
        let at = cur.as_ref().map_or(dir, |f| f.as_fd());
        match rustix::fs::mkdirat(at, name, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let next = open_beneath(at, Path::new(name), flags, Mode::empty())?;
        cur = Some(next);
    }
    match cur {
        Some(fd) => Ok(fd),
        None => open_beneath(dir, Path::new(""), flags, Mode::empty()),
    }
}

/// What an I/O error means for the model. A symlink or an escape met beneath the root means the path changed after
/// it was checked.
pub(crate) fn explain(e: io::Error) -> BeneathError {
    let raw = e.raw_os_error();
    if raw == Some(libc::ELOOP) || raw == Some(libc::EXDEV) {
        return BeneathError::Changed;
    }
    BeneathError::Io(e)
}

/// A name for what a non-regular file is.
fn kind_name(t: FileType) -> &'static str {
    match t {
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO (named pipe)",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::RegularFile | FileType::Unknown => "not a regular file",
    }
}

/// Checks on the opened descriptor that it is a regular file; `dir_hint` is what to say for a directory.
pub(crate) fn check_regular(fd: &OwnedFd, dir_hint: &str) -> Result<Stat, BeneathError> {
    let st = rustix::fs::fstat(fd).map_err(|e| explain(e.into()))?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Ok(st),
        FileType::Directory => Err(BeneathError::Directory {
            hint: dir_hint.to_string(),
        }),
        t => Err(not_regular(t)),
    }
}

fn not_regular(t: FileType) -> BeneathError {
    BeneathError::NotRegular { kind: kind_name(t) }
}

/// The size in bytes `fstat` gave.
pub fn size_of(st: &Stat) -> u64 {
    u64::try_from(st.st_size).unwrap_or(0)
}

/// Opens the existing regular file `target` for reading, beneath its root, non-blocking.
pub fn open_read(target: &Target, dir_hint: &str) -> Result<(File, Stat), BeneathError> {
    let root = target.open_root()?;
    let fd = open_beneath(
        root.as_fd(),
        &target.rel,
        OFlags::RDONLY | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(explain)?;
    let st = check_regular(&fd, dir_hint)?;
    Ok((File::from(fd), st))
}

/// True when `e` says a path (or a directory on the way to it) is not there: what [`names_near`] answers.
pub(crate) fn is_missing(e: &BeneathError) -> bool {
    matches!(e, BeneathError::Io(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory))
}

/// Reads at most `cap` bytes of `f` (one more, to tell that there is more).
pub fn read_capped(f: &mut File, cap: u64) -> Result<Vec<u8>, BeneathError> {
    let mut bytes = Vec::new();
    Read::take(&mut *f, cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(explain)?;
    Ok(bytes)
}

/// Where a write is: the parent directory's descriptor and the file's name in it.
pub(crate) struct Place {
    /// The parent directory, opened beneath the root.
    pub dir: OwnedFd,
    /// The file's name.
    pub name: OsString,
}

impl Place {
    /// Opens the parent of `target` beneath its root; `create` makes missing directories (else a missing parent is
    /// refused with the fix).
    pub fn open(target: &Target, create: bool) -> Result<Place, BeneathError> {
        let (parent, name) = target.split().ok_or(BeneathError::IsRoot)?;
        // a granted root that does not exist yet is made like any missing parent: from its deepest existing
        // ancestor (a prefix of the same canonical path), never through a symlink
        let mut base = target.root.as_path();
        let mut below = PathBuf::new();
        let root = loop {
            match open_root(base) {
                Ok(fd) => break fd,
                Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
                    let (Some(up), Some(name)) = (base.parent(), base.file_name()) else {
                        return Err(explain(e));
                    };
                    below = Path::new(name).join(&below).components().collect();
                    base = up;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(BeneathError::NoParent)
                }
                Err(e) => return Err(explain(e)),
            }
        };
        let parent: PathBuf = below.join(parent).components().collect();
        let dir = open_dir(root.as_fd(), &parent, create).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                BeneathError::NoParent
            } else {
                explain(e)
            }
        })?;
        Ok(Place {
            dir,
            name: name.to_os_string(),
        })
    }

    /// The existing file, opened with `flags` (non-blocking, never through a symlink) and checked to be a regular
    /// file; `None` when there is none.
    pub fn existing(&self, flags: OFlags) -> Result<Option<(File, Stat)>, BeneathError> {
        match rustix::fs::openat(
            &self.dir,
            self.name.as_os_str(),
            flags | OFlags::NONBLOCK | base_flags(),
            Mode::empty(),
        ) {
            Ok(fd) => {
                let st = check_regular(
                    &fd,
                    "write_file and edit_file change files, not directories",
                )?;
                Ok(Some((File::from(fd), st)))
            }
            Err(Errno::NOENT) => Ok(None),
            // opening a FIFO or socket for writing can fail before fstat sees it: name what is there
            Err(e) => {
                let st = rustix::fs::statat(
                    &self.dir,
                    self.name.as_os_str(),
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                );
                match st.map(|s| FileType::from_raw_mode(s.st_mode)) {
                    Ok(t) if t != FileType::RegularFile && t != FileType::Directory => {
                        Err(not_regular(t))
                    }
                    _ => Err(explain(e.into())),
                }
            }
        }
    }

    /// Replaces the file with `content` as one step: a temporary file beside it (`O_EXCL`, never a symlink) takes
    /// the text and the mode of `old` (the file being replaced), is synced, and is renamed over the name — only if
    /// `gate` still lets it commit. On any failure the temporary file is removed and the old file is untouched.
    pub fn replace(
        &self,
        content: &[u8],
        old: Option<&Stat>,
        gate: &Gate,
    ) -> Result<(), BeneathError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = format!(
            ".loom-write-{}-{}.tmp",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mode = old.map_or(0o666, |st| st.st_mode & 0o777);
        let fd = rustix::fs::openat(
            &self.dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | base_flags(),
            Mode::from_raw_mode(mode),
        )
        .map_err(|e| explain(e.into()))?;
        let done = (|| -> Result<(), BeneathError> {
            if let Some(st) = old {
                // the same mode, and (where allowed) the same owner, as the file it replaces
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
                    .map_err(|e| explain(e.into()))?;
                let _ = rustix::fs::fchown(
                    &fd,
                    Some(rustix::fs::Uid::from_raw(st.st_uid)),
                    Some(rustix::fs::Gid::from_raw(st.st_gid)),
                );
            }
            let mut f = File::from(fd);
            f.write_all(content).map_err(explain)?;
            f.sync_all().map_err(explain)?;
            if !gate.commit() {
                return Err(BeneathError::Cancelled);
            }
            rustix::fs::renameat(&self.dir, tmp.as_str(), &self.dir, self.name.as_os_str())
                .map_err(|e| explain(e.into()))
        })();
        if done.is_err() {
            let _ = rustix::fs::unlinkat(&self.dir, tmp.as_str(), rustix::fs::AtFlags::empty());
        }
        done
    }
}

/// Whether a write still may commit. The call's side [`Gate::abandon`]s it when the call is cancelled; the blocking
/// side asks [`Gate::commit`] right before the step that changes the file. Exactly one of them wins, so a cancelled
/// call either wrote everything or nothing, and says which.
#[derive(Debug, Clone, Default)]
pub struct Gate(Arc<Mutex<Phase>>);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Phase {
    #[default]
    Working,
    Committing,
    Abandoned,
}

impl Gate {
    fn with<T>(&self, f: impl FnOnce(&mut Phase) -> T) -> T {
        let mut g = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut g)
    }

    /// The blocking side is about to change the file: true unless the call was abandoned.
    pub fn commit(&self) -> bool {
        self.with(|p| match *p {
            Phase::Abandoned => false,
            _ => {
                *p = Phase::Committing;
                true
            }
        })
    }

    /// The call is cancelled: true when nothing will be committed; false when the commit has already begun (its
    /// result stands and is waited for).
    pub fn abandon(&self) -> bool {
        self.with(|p| match *p {
            Phase::Committing => false,
            _ => {
                *p = Phase::Abandoned;
                true
            }
        })
    }
}

/// Runs blocking file I/O `f` on the blocking pool and waits for it unless `cancel` fires first. On cancellation a
/// read is left behind (it holds only its own descriptors; its result is dropped) and the call ends at once with
/// an error; a write guarded by `gate` is abandoned unless it has begun to commit, in which case its (short) commit
/// is waited for so the result says what happened.
pub async fn run_blocking<T: Send + 'static>(
    cancel: &CancellationToken,
    gate: Option<&Gate>,
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let mut handle = tokio::task::spawn_blocking(f);
    tokio::select! {
        biased;
        r = &mut handle => r.map_err(|e| e.to_string())?,
        () = cancel.cancelled() => match gate {
            Some(g) if !g.abandon() => handle.await.map_err(|e| e.to_string())?,
            Some(_) => Err("cancelled before the file was written; nothing was changed".into()),
            None => Err("cancelled before it finished; nothing was changed".into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn canon(p: &Path) -> PathBuf {
        std::fs::canonicalize(p).unwrap()
    }

    /// openat2 and the walk agree: plain paths open, a symlink anywhere (even one pointing inside) and `..` do not.
    #[test]
    fn opens_beneath_without_symlinks_both_ways() {
        let d = tempfile::tempdir().unwrap();
        let root = canon(d.path());
        let out = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f"), "in").unwrap();
        std::fs::write(out.path().join("f"), "out").unwrap();
        symlink(out.path(), root.join("a/out")).unwrap();
        symlink(root.join("a/b"), root.join("a/inside")).unwrap();
        symlink(root.join("a/b/f"), root.join("a/flink")).unwrap();
        let rootfd = open_root(&root).unwrap();
        type Opener = fn(BorrowedFd<'_>, &Path, OFlags, Mode) -> io::Result<OwnedFd>;
        for (how, open) in [
            ("openat2", open_beneath as Opener),
            ("walk", walk_beneath as Opener),
        ] {
            let read = |rel: &str| {
                open(
                    rootfd.as_fd(),
                    Path::new(rel),
                    OFlags::RDONLY,
                    Mode::empty(),
                )
                .map(|fd| {
                    let mut s = String::new();
                    File::from(fd).read_to_string(&mut s).unwrap();
                    s
                })
            };
            assert_eq!(read("a/b/f").unwrap(), "in", "{how}");
            for bad in ["a/out/f", "a/inside/f", "a/flink"] {
                let e = read(bad).unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{how} {bad}: {e}");
            }
            let up = read("a/../../x").unwrap_err();
            assert_eq!(up.raw_os_error(), Some(libc::EXDEV), "{how}: {up}");
            assert!(read("a/nope").unwrap_err().kind() == io::ErrorKind::NotFound);
        }
        // a root with a symlink in it is refused too
        let e = open_root(&root.join("a/inside")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        assert!(matches!(explain(e), BeneathError::Changed));
    }

    #[test]
    fn a_target_is_split_at_the_deepest_root_of_the_row() {
        let ctx = PathCtx::new("/w", None);
        let row = loom_kernel::Row::from_pairs([
            ("paths", Value::strs(["./", "./sub"])),
            ("read_paths", Value::strs(["/ro"])),
        ]);
        let grant = loom_kernel::Grant::set(vec![row]);
        let decided = |path: &str, access: Access, grant: &loom_kernel::Grant| {
            let request = loom_kernel::Request::File {
                path: path.into(),
                access,
            };
            crate::testutil::authorize(loom_kernel::AlgebraKind::Files, &ctx, grant, &request)
        };
        let auth = decided("/w/sub/x/y", Access::Write, &grant);
        let t = Target::of(&auth, &ctx, Path::new("/w/sub/x/y"), Access::Write).unwrap();
        assert_eq!(
            (t.root.as_path(), t.rel.as_path()),
            (Path::new("/w/sub"), Path::new("x/y"))
        );
        let r = Target::of(&auth, &ctx, Path::new("/ro/f"), Access::Read).unwrap();
        assert_eq!(r.root, Path::new("/ro"));
        assert!(Target::of(&auth, &ctx, Path::new("/ro/f"), Access::Write).is_err());
        let star = decided(
            "/w/sub/x/y",
            Access::Write,
            &loom_kernel::Grant::Unrestricted,
        );
        // a root that is the path itself is opened as a name beneath its parent
        let file = Target::within(Path::new("/w/a.txt"), Path::new("/w/a.txt")).unwrap();
        assert_eq!(
            (file.root.as_path(), file.rel.as_path()),
            (Path::new("/w"), Path::new("a.txt"))
        );
        let s = Target::of(&star, &ctx, Path::new("/etc/hosts"), Access::Read).unwrap();
        assert_eq!(
            (s.root.as_path(), s.rel.as_path()),
            (Path::new("/"), Path::new("etc/hosts"))
        );
    }

    #[test]
    fn regular_files_only_and_fifos_never_block() {
        let d = tempfile::tempdir().unwrap();
        let root = canon(d.path());
        let fifo = root.join("pipe");
        crate::testutil::mkfifo(&fifo);
        let t = Target::within(&root, &fifo).unwrap();
        // no writer: a blocking open would hang here
        let fifo_kind = |e: BeneathError| match e {
            BeneathError::NotRegular { kind } => kind,
            other => panic!("{other}"),
        };
        let e = open_read(&t, "").unwrap_err();
        assert_eq!(
            e.to_string(),
            "is a FIFO (named pipe); the file tools read and write regular files only"
        );
        assert_eq!(fifo_kind(e), "a FIFO (named pipe)");
        let place = Place::open(&t, false).unwrap();
        let e = place.existing(OFlags::WRONLY).unwrap_err();
        assert_eq!(fifo_kind(e), "a FIFO (named pipe)");
        let dev = Target::within(Path::new("/"), Path::new("/dev/null")).unwrap();
        let e = open_read(&dev, "").unwrap_err();
        assert_eq!(fifo_kind(e), "a character device");
    }

    #[test]
    fn replace_is_all_or_nothing_and_keeps_the_mode() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let root = canon(d.path());
        std::fs::write(root.join("f"), "old").unwrap();
        std::fs::set_permissions(root.join("f"), std::fs::Permissions::from_mode(0o640)).unwrap();
        let t = Target::within(&root, &root.join("f")).unwrap();
        let place = Place::open(&t, false).unwrap();
        let (_, st) = place.existing(OFlags::WRONLY).unwrap().unwrap();
        place.replace(b"new", Some(&st), &Gate::default()).unwrap();
        assert_eq!(std::fs::read_to_string(root.join("f")).unwrap(), "new");
        let mode = std::fs::metadata(root.join("f"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);
        // an abandoned gate: nothing changes and no temporary file is left
        let g = Gate::default();
        assert!(g.abandon());
        let e = place.replace(b"newer", Some(&st), &g).unwrap_err();
        assert!(matches!(e, BeneathError::Cancelled), "{e}");
        assert_eq!(
            e.to_string(),
            "cancelled before the file was written; nothing was changed"
        );
        assert_eq!(std::fs::read_to_string(root.join("f")).unwrap(), "new");
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 1);
        // a committing gate cannot be abandoned
        let g = Gate::default();
        assert!(g.commit());
        assert!(!g.abandon());
    }

    /// A read blocked on I/O (here: a closure waiting on a channel) does not hold the call once it is cancelled.
    #[tokio::test]
    async fn cancellation_ends_a_blocked_read() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let cancel = CancellationToken::new();
        let c2 = cancel.clone();
        let call = tokio::spawn(async move {
            run_blocking(&c2, None, move || {
                rx.recv().map_err(|e| e.to_string())?;
                Ok("read")
            })
            .await
        });
        cancel.cancel();
        let r = call.await.unwrap();
        assert_eq!(
            r,
            Err("cancelled before it finished; nothing was changed".to_string())
        );
        // release the blocked thread so the test process ends cleanly
        let _ = tx.send(());
    }
}
