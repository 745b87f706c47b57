//! A bounded output buffer: keeps the tail in memory, counts everything, and (optionally) streams the complete
//! output to a spill file that is removed again when nothing was dropped.

use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// The default in-memory bound (the tail the model sees): 30 000 bytes.
pub const DEFAULT_TAIL_BYTES: usize = 30_000;
/// The most bytes one spill file keeps (64 MiB); what comes after is counted, not kept.
pub const MAX_SPILL_BYTES: u64 = 64 * 1024 * 1024;

/// A view of the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The retained tail (lossy UTF-8).
    pub text: String,
    /// Bytes seen in total.
    pub total_bytes: u64,
    /// True when the head was dropped.
    pub truncated: bool,
    /// The spill file holding everything, when the output was truncated and spilling was on.
    pub full_output_path: Option<PathBuf>,
    /// True when the spill file holds only the first [`MAX_SPILL_BYTES`] (the rest was not kept).
    pub spill_cut: bool,
}

/// The buffer.
#[derive(Debug)]
pub struct OutputBuffer {
    tail: VecDeque<u8>,
    cap: usize,
    total: u64,
    spill_path: Option<PathBuf>,
    spill: Option<std::fs::File>,
    spill_failed: bool,
    spill_cap: u64,
    spilled: u64,
}

impl OutputBuffer {
    /// A buffer keeping `cap` bytes; with `spill_path`, everything is also written there.
    pub fn new(cap: usize, spill_path: Option<PathBuf>) -> OutputBuffer {
        OutputBuffer {
            tail: VecDeque::new(),
            cap: cap.max(1),
            total: 0,
            spill_path,
            spill: None,
            spill_failed: false,
            spill_cap: MAX_SPILL_BYTES,
            spilled: 0,
        }
    }

    /// Appends bytes in arrival order.
    pub fn append(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if let (Some(path), false) = (&self.spill_path, self.spill_failed) {
            if self.spill.is_none() {
                // a fresh file only (O_EXCL: never an existing file or a planted symlink), readable by its owner only
                match std::fs::OpenOptions::new()
                    .create_new(true)
                    .write(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(path)
                {
                    Ok(f) => self.spill = Some(f),
                    Err(_) => self.spill_failed = true,
                }
            }
            if let Some(f) = self.spill.as_mut() {
                let room = self.spill_cap.saturating_sub(self.spilled);
                let keep = &bytes[..bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX))];
                if !keep.is_empty() && f.write_all(keep).is_err() {
                    self.spill_failed = true;
                }
                self.spilled += keep.len() as u64;
            }
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(self.cap);
        self.tail.drain(..excess);
    }

    /// The tail as text, tail-biased: a truncated view starts at a line boundary when one is near.
    pub fn snapshot(&self) -> Snapshot {
        let truncated = self.total > self.tail.len() as u64;
        let bytes: Vec<u8> = self.tail.iter().copied().collect();
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if truncated {
            if let Some(i) = text.find('\n').filter(|i| *i < 200) {
                text = text[i + 1..].to_string();
            }
        }
        Snapshot {
            text,
            total_bytes: self.total,
            truncated,
            full_output_path: None,
            spill_cut: false,
        }
    }

    /// Closes the spill file (removing it when nothing was dropped) and returns the final view.
    pub fn finalize(mut self) -> Snapshot {
        let mut snap = self.snapshot();
        if let Some(f) = self.spill.take() {
            let _ = f.sync_data();
            drop(f);
            if let Some(p) = self.spill_path.take() {
                if snap.truncated && !self.spill_failed {
                    snap.full_output_path = Some(p);
                    snap.spill_cut = self.total > self.spilled;
                } else {
                    let _ = std::fs::remove_file(p);
                }
            }
        }
        snap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_tail_and_spills_everything() {
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("out.log");
        let mut b = OutputBuffer::new(10, Some(spill.clone()));
        b.append(b"0123456789");
        b.append(b"abcdef");
        let s = b.finalize();
        assert_eq!(s.text, "6789abcdef");
        assert_eq!(s.total_bytes, 16);
        assert!(s.truncated);
        assert_eq!(s.full_output_path.as_deref(), Some(spill.as_path()));
        assert_eq!(std::fs::read_to_string(&spill).unwrap(), "0123456789abcdef");
    }

    #[test]
    fn the_spill_file_is_removed_when_nothing_was_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("out.log");
        let mut b = OutputBuffer::new(100, Some(spill.clone()));
        b.append(b"short");
        let s = b.finalize();
        assert_eq!(
            (s.text.as_str(), s.truncated, s.full_output_path),
            ("short", false, None)
        );
        assert!(!spill.exists());
    }

    #[test]
    fn the_spill_file_is_private_fresh_and_capped() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("out.log");
        let mut b = OutputBuffer::new(4, Some(spill.clone()));
        b.spill_cap = 10;
        b.append(b"0123456");
        b.append(b"789abcdef");
        let s = b.finalize();
        assert_eq!((s.total_bytes, s.spill_cut), (16, true));
        assert_eq!(std::fs::read_to_string(&spill).unwrap(), "0123456789");
        let mode = std::fs::metadata(&spill).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // a planted symlink (or any existing file) at the spill path is never written through
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let planted = dir.path().join("planted.log");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let mut b = OutputBuffer::new(2, Some(planted));
        b.append(b"overwrite");
        let s = b.finalize();
        assert_eq!(s.full_output_path, None);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }
}
