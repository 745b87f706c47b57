//! What the model has seen of each file, for `[agent] read_before_write`: with it on, `write_file` replaces an
//! existing file only when the session has read it (`read_file`, `read_many`) or changed it (any change tool, as the
//! undo log records) and the file still holds exactly that text. A file the model never looked at, or one that
//! changed under it since, is refused with the fix (read it first), so a blind or stale whole-file write cannot
//! throw away text the model did not know was there.
//!
//! This is a guard on the tool's behaviour, not authority: a grant that allows the write still allows it once the
//! file is read, and the kernel is not asked. It is off unless the manifest turns it on (the seed's `write_file`
//! replaces a file without a read first).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::undo::{content_hash, UndoLog};

/// The most files remembered; past it the map is cleared and the model reads again (a bound, never a grant).
const SEEN_MAX_FILES: usize = 4096;

/// Each file's path and the SHA-256 of the text last read there.
type Hashes = HashMap<PathBuf, [u8; 32]>;

/// An agent's record of the text it has read, shared by its file tools (a cheap handle). `Default` is off.
#[derive(Clone, Debug, Default)]
pub struct SeenFiles(Option<Arc<Mutex<Hashes>>>);

/// Why a whole-file write was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unseen {
    /// The session never read or wrote the file.
    NeverRead,
    /// The file changed since the session last read or wrote it.
    Changed,
    /// What the file holds now could not be read to compare (why): refused, as the guard cannot tell.
    Unchecked(String),
}

impl Unseen {
    /// The refusal the model is shown for `told` (the path as it would name it).
    pub fn message(&self, told: &str) -> String {
        match self {
            Unseen::Unchecked(why) => format!(
                "{told} already exists and could not be read to check that this session has read it ({why}), so \
                 it was not replaced (nothing was written)"
            ),
            Unseen::NeverRead => format!(
                "{told} already exists and has not been read in this session, so it was not replaced (nothing \
                 was written). Read it with read_file first; to change part of it, use edit_file"
            ),
            Unseen::Changed => format!(
                "{told} has changed since it was last read, so it was not replaced (nothing was written). Read it \
                 again with read_file first"
            ),
        }
    }
}

impl SeenFiles {
    /// The guard on: whole-file writes need a read first.
    pub fn guarding() -> SeenFiles {
        SeenFiles(Some(Arc::default()))
    }

    /// True when the guard is on.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Notes that the model was shown `text` as the whole of `path` (nothing when the guard is off).
    pub fn saw(&self, path: &Path, text: &[u8]) {
        let Some(map) = &self.0 else { return };
        let mut m = map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if m.len() >= SEEN_MAX_FILES && !m.contains_key(path) {
            m.clear();
        }
        m.insert(path.to_path_buf(), content_hash(text));
    }

    /// Whether `path`, which now holds `current`, may be replaced whole: always when the guard is off; otherwise
    /// only when `current` is the text the model last read there, or the text loom last wrote there (`undo`).
    pub fn check(&self, path: &Path, current: &[u8], undo: &UndoLog) -> Result<(), Unseen> {
        let Some(map) = &self.0 else { return Ok(()) };
        let now = content_hash(current);
        let read = map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(path)
            .copied();
        let wrote = undo.last_written(path);
        if read == Some(now) || wrote == Some(now) {
            Ok(())
        } else if read.is_some() || wrote.is_some() {
            Err(Unseen::Changed)
        } else {
            Err(Unseen::NeverRead)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_allows_everything_and_remembers_nothing() {
        let seen = SeenFiles::default();
        let undo = UndoLog::default();
        seen.saw(Path::new("/w/a"), b"x");
        assert!(!seen.is_on());
        assert_eq!(seen.check(Path::new("/w/a"), b"y", &undo), Ok(()));
    }

    #[test]
    fn on_needs_the_text_read_or_written_last() {
        let seen = SeenFiles::guarding();
        let undo = UndoLog::default();
        let a = Path::new("/w/a");
        assert_eq!(seen.check(a, b"old", &undo), Err(Unseen::NeverRead));
        seen.saw(a, b"old");
        assert_eq!(seen.check(a, b"old", &undo), Ok(()));
        // changed behind the model's back (a command, another program)
        assert_eq!(seen.check(a, b"other", &undo), Err(Unseen::Changed));
        // what loom wrote there counts as seen, as long as it is still what the file holds
        undo.record(a, Some(b"old"), Some(b"new"), "edit_file");
        assert_eq!(seen.check(a, b"new", &undo), Ok(()));
        assert_eq!(seen.check(a, b"newer", &undo), Err(Unseen::Changed));
        // another file is its own
        assert_eq!(
            seen.check(Path::new("/w/b"), b"old", &undo),
            Err(Unseen::NeverRead)
        );
    }

    #[test]
    fn the_messages_name_the_file_and_the_fix() {
        let m = Unseen::NeverRead.message("a.txt");
        assert!(m.starts_with("a.txt already exists") && m.contains("read_file first"));
        let m = Unseen::Changed.message("a.txt");
        assert!(m.contains("changed since it was last read") && m.contains("nothing was written"));
        let m = Unseen::Unchecked("a FIFO".into()).message("a.txt");
        assert!(m.contains("could not be read to check") && m.contains("(a FIFO)"));
    }

    #[test]
    fn the_map_is_bounded() {
        let seen = SeenFiles::guarding();
        let undo = UndoLog::default();
        for i in 0..SEEN_MAX_FILES + 1 {
            seen.saw(&PathBuf::from(format!("/w/{i}")), b"x");
        }
        // past the bound the oldest reads are forgotten: the model reads again, nothing is allowed by it
        assert_eq!(
            seen.check(Path::new("/w/0"), b"x", &undo),
            Err(Unseen::NeverRead)
        );
        assert_eq!(
            seen.check(&PathBuf::from(format!("/w/{SEEN_MAX_FILES}")), b"x", &undo),
            Ok(())
        );
    }
}
