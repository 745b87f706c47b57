//! Remembered "always" answers to permission asks, one file per agent in its storage directory.
//!
//! The kernel decides what an answer covers ([`Approval`]) and when it applies (only to an ask rule, never past a
//! deny rule or a grant denial); this module only keeps the list: read at boot, appended to when the user answers
//! "always", listed and revoked by `loom permissions`. Writes are atomic (a temporary file renamed over the old one),
//! so a crash leaves either the old list or the new one. A file that cannot be read is an error naming it, never an
//! empty list written over it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use loom_kernel::{Approval, Subject};
use serde::{Deserialize, Serialize};

/// The file, in the agent's storage directory.
pub const APPROVALS_FILE: &str = "approvals.json";

/// The version this loom writes. Version 1 (before argv calls had a subject of their own) kept an argv call's
/// "always" as its words joined into a command line, which would also answer the shell line with that text; its
/// command entries are therefore not carried over (those calls are asked again), its path and host entries are.
const FILE_VERSION: u32 = 2;

/// One remembered answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remembered {
    /// What it covers.
    pub approval: Approval,
    /// When the user gave it (seconds since the Unix epoch).
    pub at: u64,
}

/// The remembered answers of one agent.
#[derive(Debug)]
pub struct ApprovalStore {
    path: PathBuf,
    entries: Mutex<Vec<Remembered>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEntry {
    tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    /// An argv-form call's words (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    argv: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    host: Option<String>,
    at: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    approvals: Vec<FileEntry>,
}

/// Why the remembered answers could not be read, written or revoked. Each message names the file and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The file exists but cannot be read.
    #[error("{}: cannot read it: {why}", .path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        why: std::io::Error,
    },
    /// The file is not a remembered-answers file this loom reads.
    #[error(
        "{}: {why}; fix the file, or revoke every remembered answer with `loom permissions revoke <agent.toml> --all` \
         after moving it away",
        .path.display()
    )]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The file could not be written (nothing changed in it).
    #[error("{}: cannot write it: {why}", .path.display())]
    Unwritable {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        why: std::io::Error,
    },
    /// A number to revoke that names no remembered answer (nothing was revoked).
    #[error(
        "there is no remembered answer number {number} ({}); `loom permissions list` numbers them",
        if *.count == 1 { "there is 1".to_string() } else { format!("there are {count}") }
    )]
    NoSuchAnswer {
        /// The number asked for (1-based).
        number: usize,
        /// How many there are.
        count: usize,
    },
}

impl ApprovalStore {
    /// The store of the agent whose storage directory is `dir`; the file need not exist yet (nothing remembered).
    /// A file that exists but cannot be read or parsed is an error naming it and the fix.
    pub fn open(dir: &Path) -> Result<ApprovalStore, ApprovalError> {
        let path = dir.join(APPROVALS_FILE);
        let entries = match std::fs::read_to_string(&path) {
            Ok(text) => parse(&text).map_err(|why| ApprovalError::Malformed {
                path: path.clone(),
                why,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(why) => return Err(ApprovalError::Unreadable { path, why }),
        };
        Ok(ApprovalStore {
            path,
            entries: Mutex::new(entries),
        })
    }

    /// The file the answers are kept in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The remembered answers, oldest first.
    pub fn entries(&self) -> Vec<Remembered> {
        self.lock().clone()
    }

    /// What the remembered answers cover, oldest first (what the kernel's rules judge takes).
    pub fn approvals(&self) -> Vec<Approval> {
        self.lock().iter().map(|r| r.approval.clone()).collect()
    }

    /// Remembers `approval` (given at `at`) and writes the file; remembering one already kept changes nothing.
    pub fn remember(&self, approval: Approval, at: u64) -> Result<(), ApprovalError> {
        let mut entries = self.lock();
        if entries.iter().any(|r| r.approval == approval) {
            return Ok(());
        }
        let mut next = entries.clone();
        next.push(Remembered { approval, at });
        self.write(&next)?;
        *entries = next;
        Ok(())
    }

    /// Forgets the answers at `indices` (0-based, as [`entries`](Self::entries) lists them) and writes the file.
    /// An index out of range is an error and nothing is forgotten.
    pub fn revoke(&self, indices: &[usize]) -> Result<Vec<Remembered>, ApprovalError> {
        let mut entries = self.lock();
        if let Some(bad) = indices.iter().find(|&&i| i >= entries.len()) {
            return Err(ApprovalError::NoSuchAnswer {
                number: bad + 1,
                count: entries.len(),
            });
        }
        let (gone, kept): (Vec<_>, Vec<_>) = entries
            .iter()
            .cloned()
            .enumerate()
            .partition(|(i, _)| indices.contains(i));
        let kept: Vec<Remembered> = kept.into_iter().map(|(_, r)| r).collect();
        self.write(&kept)?;
        *entries = kept;
        Ok(gone.into_iter().map(|(_, r)| r).collect())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Remembered>> {
        // the list is plain data: a panic elsewhere cannot leave it half-changed
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self, entries: &[Remembered]) -> Result<(), ApprovalError> {
        let file = File {
            version: FILE_VERSION,
            approvals: entries.iter().map(to_file).collect(),
        };
        let fail = |why: std::io::Error| ApprovalError::Unwritable {
            path: self.path.clone(),
            why,
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| fail(e.into()))?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(fail)?;
        let tmp = dir.join(format!(".{APPROVALS_FILE}.{}.tmp", std::process::id()));
        let written = (|| {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(fail(e));
        }
        Ok(())
    }
}

fn parse(text: &str) -> Result<Vec<Remembered>, String> {
    let file: File =
        serde_json::from_str(text).map_err(|e| format!("not a remembered-answers file: {e}"))?;
    if file.version != 1 && file.version != FILE_VERSION {
        return Err(format!(
            "version {} is not one this loom reads (it reads versions 1 and {FILE_VERSION})",
            file.version
        ));
    }
    let legacy = file.version == 1;
    file.approvals
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            if legacy && e.argv.is_some() {
                return Err(format!("approvals[{i}]: argv needs version {FILE_VERSION}"));
            }
            let subject = match (e.command, e.argv, e.path, e.host) {
                (None, None, None, None) => None,
                (Some(c), None, None, None) => Some(Subject::Command(c)),
                (None, Some(a), None, None) => Some(Subject::Argv(a)),
                (None, None, Some(p), None) => Some(Subject::Path(p)),
                (None, None, None, Some(h)) => Some(Subject::Host(h)),
                _ => {
                    return Err(format!(
                        "approvals[{i}]: at most one of command, argv, path and host"
                    ))
                }
            };
            if legacy && matches!(subject, Some(Subject::Command(_))) {
                return Ok(None);
            }
            Ok(Some(Remembered {
                approval: Approval {
                    tool: e.tool,
                    subject,
                },
                at: e.at,
            }))
        })
        .filter_map(Result::transpose)
        .collect()
}

fn to_file(r: &Remembered) -> FileEntry {
    let (mut command, mut argv, mut path, mut host) = (None, None, None, None);
    match &r.approval.subject {
        Some(Subject::Command(c)) => command = Some(c.clone()),
        Some(Subject::Argv(a)) => argv = Some(a.clone()),
        Some(Subject::Path(p)) => path = Some(p.clone()),
        Some(Subject::Host(h)) => host = Some(h.clone()),
        None => {}
    }
    FileEntry {
        tool: r.approval.tool.clone(),
        command,
        argv,
        path,
        host,
        at: r.at,
    }
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(tool: &str, c: &str) -> Approval {
        Approval {
            tool: tool.into(),
            subject: Some(Subject::Command(c.into())),
        }
    }

    #[test]
    fn answers_are_kept_listed_and_revoked_across_opens() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("agents/a");
        let store = ApprovalStore::open(&dir).unwrap();
        assert!(store.entries().is_empty());
        assert!(!store.path().exists(), "opening writes nothing");
        store
            .remember(cmd("bash", "git push origin main"), 10)
            .unwrap();
        store
            .remember(cmd("bash", "git push origin main"), 11)
            .unwrap();
        let host = Approval {
            tool: "fetch".into(),
            subject: Some(Subject::Host("example.com".into())),
        };
        store.remember(host.clone(), 12).unwrap();
        store
            .remember(
                Approval {
                    tool: "notes".into(),
                    subject: None,
                },
                13,
            )
            .unwrap();
        let again = ApprovalStore::open(&dir).unwrap();
        assert_eq!(again.entries(), store.entries());
        assert_eq!(again.entries().len(), 3, "a repeated answer is kept once");
        let gone = again.revoke(&[0, 2]).unwrap();
        assert_eq!(gone.len(), 2);
        assert_eq!(ApprovalStore::open(&dir).unwrap().approvals(), vec![host]);
        let err = again.revoke(&[5]).unwrap_err();
        assert!(
            matches!(
                err,
                ApprovalError::NoSuchAnswer {
                    number: 6,
                    count: 1
                }
            ),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "there is no remembered answer number 6 (there is 1); `loom permissions list` numbers them"
        );
        assert_eq!(
            ApprovalStore::open(&dir).unwrap().entries().len(),
            1,
            "a bad revoke forgets nothing"
        );
        // no temporary file is left behind
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(APPROVALS_FILE)]);
    }

    #[test]
    fn argv_answers_round_trip_and_version_1_command_answers_are_asked_again() {
        let d = tempfile::tempdir().unwrap();
        let store = ApprovalStore::open(d.path()).unwrap();
        let argv = Approval {
            tool: "bash".into(),
            subject: Some(Subject::Argv(vec!["git".into(), "push".into()])),
        };
        store.remember(argv.clone(), 1).unwrap();
        store.remember(cmd("bash", "git push"), 2).unwrap();
        let again = ApprovalStore::open(d.path()).unwrap();
        assert_eq!(again.approvals(), vec![argv, cmd("bash", "git push")]);
        // a version-1 file could hold an argv call's words as a command line: not carried over
        std::fs::write(
            d.path().join(APPROVALS_FILE),
            r#"{"version": 1, "approvals": [{"tool": "bash", "command": "git push", "at": 1}, {"tool": "fetch", "host": "example.com", "at": 2}]}"#,
        )
        .unwrap();
        let old = ApprovalStore::open(d.path()).unwrap();
        assert_eq!(
            old.approvals(),
            vec![Approval {
                tool: "fetch".into(),
                subject: Some(Subject::Host("example.com".into())),
            }]
        );
    }

    #[test]
    fn a_damaged_file_is_an_error_and_is_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(APPROVALS_FILE);
        for bad in [
            "{not json",
            r#"{"version": 3, "approvals": []}"#,
            r#"{"version": 2, "approvals": [{"tool": "bash", "command": "ls", "argv": ["ls"], "at": 1}]}"#,
            r#"{"version": 1, "approvals": [{"tool": "bash", "command": "ls", "path": "/x", "at": 1}]}"#,
            r#"{"version": 1, "approvals": [{"tool": "bash", "commmand": "ls", "at": 1}]}"#,
        ] {
            std::fs::write(&path, bad).unwrap();
            let err = ApprovalStore::open(d.path()).unwrap_err();
            assert!(matches!(err, ApprovalError::Malformed { .. }), "{err}");
            assert!(err.to_string().contains(APPROVALS_FILE), "{err}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), bad);
        }
    }
}
