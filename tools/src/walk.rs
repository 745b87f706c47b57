//! Walking a directory tree beneath a granted root, for the tools that look at more than the one path the kernel
//! decided on (`find`, `grep`, `list_directory`, and the names near a missing file in `read_file`'s error): the top
//! directory is opened beneath its grant root, every directory
//! below it is opened beneath the top without following a symlink, and a symlink is reported as one, never entered.
//! A directory swapped for a link by a racing process mid-walk is therefore skipped, not followed out of the root.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use tokio_util::sync::CancellationToken;

use super::beneath::{explain, open_beneath, Target};

/// What a walked entry is (its own type: a symlink is a symlink, whatever it points at).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryKind {
    /// A directory (entered unless the visitor says otherwise).
    Dir,
    /// A regular file.
    File,
    /// A symbolic link (never followed).
    Link,
    /// A FIFO, socket or device.
    Other,
}

/// One entry met by the walk.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// Its path relative to the walk's top directory.
    pub rel: PathBuf,
    /// Its name.
    pub name: std::ffi::OsString,
    /// What it is.
    pub kind: EntryKind,
}

/// What the visitor wants after an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Visit {
    /// Go on (entering the entry if it is a directory).
    Continue,
    /// Go on, but do not enter this directory.
    Skip,
    /// Stop the walk.
    Stop,
}

/// How a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Walked {
    /// Every entry was visited (or the visitor stopped it).
    Done,
    /// More than `max_entries` entries: the walk stopped there.
    TooMany,
    /// The call was cancelled.
    Cancelled,
}

/// The flags a directory is opened with.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NONBLOCK);

/// Opens the walk's top directory, `target`, beneath its grant root (`shown` names it in errors).
pub(crate) fn open_top(target: &Target, shown: &Path) -> Result<OwnedFd, String> {
    let grant_root = target.open_root()?;
    open_beneath(grant_root.as_fd(), &target.rel, DIR_FLAGS, Mode::empty()).map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOTDIR) {
            format!("{}: not a directory", shown.display())
        } else {
            format!("{}: {}", shown.display(), explain(e))
        }
    })
}

/// Visits every entry below `top` (depth first, each directory's entries in the order the file system gives them),
/// at most `max_entries` of them, checking `cancel` as it goes. A directory that cannot be opened beneath `top`
/// (it was swapped for a link, or is not readable) is skipped.
pub(crate) fn walk(
    top: &OwnedFd,
    max_entries: usize,
    cancel: &CancellationToken,
    visit: &mut dyn FnMut(&Entry) -> Visit,
) -> Walked {
    let mut visited = 0usize;
    let mut stack: Vec<PathBuf> = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        if cancel.is_cancelled() {
            return Walked::Cancelled;
        }
        let Ok(fd) = open_dir(top, &rel) else {
            continue;
        };
        let Ok(entries) = rustix::fs::Dir::read_from(&fd) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            visited += 1;
            if visited > max_entries {
                return Walked::TooMany;
            }
            if cancel.is_cancelled() {
                return Walked::Cancelled;
            }
            let kind = match own_type(&fd, &entry) {
                FileType::Directory => EntryKind::Dir,
                FileType::RegularFile => EntryKind::File,
                FileType::Symlink => EntryKind::Link,
                _ => EntryKind::Other,
            };
            let e = Entry {
                rel: rel.join(name),
                name: name.to_os_string(),
                kind,
            };
            match visit(&e) {
                Visit::Stop => return Walked::Done,
                Visit::Continue if kind == EntryKind::Dir => stack.push(e.rel),
                Visit::Continue | Visit::Skip => {}
            }
        }
    }
    Walked::Done
}

/// The entry's own type (`lstat` beneath `dir` when the directory does not say): a symlink is a symlink.
fn own_type(dir: &OwnedFd, entry: &rustix::fs::DirEntry) -> FileType {
    match entry.file_type() {
        FileType::Unknown => {
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| FileType::from_raw_mode(st.st_mode))
                .unwrap_or(FileType::Unknown)
        }
        t => t,
    }
}

/// The directory nearest a path that is missing: the first of `dirs` (its ancestors that the grant holds, each as
/// the model names it and split at its root, deepest first) that opens as a directory beneath its root, and the
/// names in it — sorted, a subdirectory ending in `/`, at most `max` — with how many there are in all. Names only:
/// nothing in it is opened or followed. `None` when none of them opens.
pub(crate) fn names_near(
    dirs: &[(String, Target)],
    max: usize,
) -> Option<(&str, Vec<String>, usize)> {
    dirs.iter().find_map(|(shown, dir)| {
        let fd = open_top(dir, Path::new(shown)).ok()?;
        let entries = rustix::fs::Dir::read_from(&fd).ok()?;
        let mut names: Vec<String> = Vec::new();
        for entry in entries.flatten() {
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let slash = if own_type(&fd, &entry) == FileType::Directory {
                "/"
            } else {
                ""
            };
            names.push(format!("{}{slash}", name.to_string_lossy()));
        }
        names.sort();
        let total = names.len();
        names.truncate(max);
        Some((shown.as_str(), names, total))
    })
}

/// Opens the directory `rel` below `top` (the top itself for an empty `rel`), never through a symlink.
pub(crate) fn open_dir(top: &OwnedFd, rel: &Path) -> std::io::Result<OwnedFd> {
    if rel.as_os_str().is_empty() {
        rustix::fs::openat(top, ".", DIR_FLAGS | OFlags::CLOEXEC, Mode::empty()).map_err(Into::into)
    } else {
        open_beneath(top.as_fd(), rel, DIR_FLAGS, Mode::empty())
    }
}

/// Opens the regular file `rel` below `top` for reading (non-blocking, never through a symlink).
pub(crate) fn open_file(top: &OwnedFd, rel: &Path) -> std::io::Result<std::fs::File> {
    open_file_len(top, rel).map(|(f, _)| f)
}

/// [`open_file`], with the file's size from the same `fstat`.
pub(crate) fn open_file_len(top: &OwnedFd, rel: &Path) -> std::io::Result<(std::fs::File, u64)> {
    let fd = open_beneath(
        top.as_fd(),
        rel,
        OFlags::RDONLY | OFlags::NONBLOCK,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok((
        std::fs::File::from(fd),
        u64::try_from(st.st_size).unwrap_or(0),
    ))
}
