//! The `.gitignore` rules the search tools honour (`grep`, `glob`, `tree`), read beneath the granted root like
//! everything else: the files of the directories from the grant root down to the walk's top, then each directory's
//! own as the walk meets it, never through a symlink and at most [`MAX_GITIGNORE_BYTES`] of each. Matching is the
//! `ignore` crate's (ripgrep's): the deepest rule that matches decides, `!` re-includes.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;

use super::beneath::Target;
use super::walk::{open_dir, open_file, Entry, EntryKind};

/// The largest `.gitignore` read.
pub(crate) const MAX_GITIGNORE_BYTES: u64 = 256 * 1024;

/// The `.gitignore` rules in force: those of the directories from the grant root down to the search root, then
/// each directory's own as the walk meets it. Each file is read beneath the root it belongs to (never through a
/// symlink) and at most [`MAX_GITIGNORE_BYTES`] of it.
pub(crate) struct Ignores {
    /// The rules above the search root (from the grant root down), outermost first.
    above: Vec<Gitignore>,
    /// Each directory below the search root (relative), its rules once read.
    below: HashMap<PathBuf, Option<Gitignore>>,
    root: PathBuf,
}

impl Ignores {
    pub(crate) fn new(target: &Target, root: &Path) -> Ignores {
        let mut above = Vec::new();
        if let Ok(grant_root) = target.open_root() {
            let mut dir = PathBuf::new();
            let mut abs = target.root.clone();
            let mut comps = target.rel.components().peekable();
            loop {
                if let Some(g) = read_gitignore(&grant_root, &dir, &abs) {
                    above.push(g);
                }
                // the search root's own .gitignore is read with the directories below it
                match comps.next() {
                    Some(c) if comps.peek().is_some() => {
                        dir.push(c);
                        abs.push(c);
                    }
                    _ => break,
                }
            }
        }
        // the grant root's own rules were read above only when it is not the search root itself
        if target.rel.as_os_str().is_empty() {
            above.clear();
        }
        Ignores {
            above,
            below: HashMap::new(),
            root: root.to_path_buf(),
        }
    }

    /// True when a search walk leaves `e` out: `.git` always, hidden entries unless `hidden`, and what the rules in
    /// force ignore (`top` is the walk's top).
    pub(crate) fn skips(&mut self, top: &std::os::fd::OwnedFd, e: &Entry, hidden: bool) -> bool {
        e.name == ".git"
            || (!hidden && e.name.as_encoded_bytes().starts_with(b"."))
            || self.ignored(top, &e.rel, e.kind == EntryKind::Dir)
    }

    /// True when the rules in force ignore `rel` (below the search root, opened as `top`).
    fn ignored(&mut self, top: &std::os::fd::OwnedFd, rel: &Path, is_dir: bool) -> bool {
        let abs = self.root.join(rel);
        // the nearest directory's rules first; the first that decides wins
        for d in rel.ancestors().skip(1) {
            if !self.below.contains_key(d) {
                let g = read_gitignore(top, d, &self.root.join(d));
                self.below.insert(d.to_path_buf(), g);
            }
            if let Some(Some(g)) = self.below.get(d) {
                match g.matched(&abs, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
        }
        for g in self.above.iter().rev() {
            match g.matched(&abs, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }
}

/// The `.gitignore` of directory `dir` (relative to `base`, an open directory), rooted at `abs`.
fn read_gitignore(base: &std::os::fd::OwnedFd, dir: &Path, abs: &Path) -> Option<Gitignore> {
    let fd = open_dir(base, dir).ok()?;
    let file = open_file(&fd, Path::new(".gitignore")).ok()?;
    let mut text = String::new();
    Read::take(file, MAX_GITIGNORE_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    let mut b = GitignoreBuilder::new(abs);
    for line in text.lines() {
        let _ = b.add_line(None, line);
    }
    b.build().ok()
}
