//! `file`: a JSONL append log, one [`SessionUpdate`] per line.
//!
//! Consecutive chunks of the same kind (and message) are coalesced in memory and written as one line when their run
//! ends (an event of another kind, any frame, or close); every line is written whole and flushed at once.
//!
//! Crash safety (security review 2, N9): a torn last line — no newline at its end (the process was killed while
//! writing it), or a last line that is not a session event (a write that failed halfway with the disk full, by a
//! loom that did not yet undo it) — is cut off at open, with a note naming the file and the bytes cut; boot goes on
//! with every complete line before it. An append that fails is undone on the spot (the file is cut back to its
//! last complete line), so a later append never glues onto a partial one; when even that fails, the layer refuses
//! every further append (the next start cuts the tail). A bad line anywhere else (a hand edit) is an error naming
//! the line, never silently dropped.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Layer, SessionError};
use crate::update::{Chunk, Content, SessionUpdate};

/// The file storage layer.
#[derive(Debug)]
pub struct FileLayer {
    path: PathBuf,
    file: File,
    /// The length of the complete lines on disk: where the next append starts, and what a failed one is cut back to.
    len: u64,
    /// Set when a failed append could not be undone: why every further append is refused.
    broken: Option<String>,
    events: Vec<SessionUpdate>,
    pending: Option<SessionUpdate>,
}

/// The file a log appends to: written whole or cut back.
trait LogFile: Write {
    /// Cuts the file to `len` bytes.
    fn cut(&mut self, len: u64) -> std::io::Result<()>;
}

impl LogFile for File {
    fn cut(&mut self, len: u64) -> std::io::Result<()> {
        self.set_len(len)
    }
}

/// Why an append failed, and whether the file was cut back to `good_len` (false: a partial line may remain).
struct AppendFailed {
    source: std::io::Error,
    undone: bool,
}

/// Appends `line` (ending in a newline) to a log whose complete lines end at `good_len`. A write that fails
/// (possibly after writing part of the line: a full disk) is undone by cutting the file back to `good_len`.
fn append_line(file: &mut impl LogFile, good_len: u64, line: &[u8]) -> Result<(), AppendFailed> {
    match file.write_all(line).and_then(|()| file.flush()) {
        Ok(()) => Ok(()),
        Err(source) => {
            let undone = file.cut(good_len).is_ok();
            Err(AppendFailed { source, undone })
        }
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> SessionError + '_ {
    move |source| SessionError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl FileLayer {
    /// Opens (creating it and its directory when missing) the log at `path` and loads its history. The note says
    /// when a torn last line was skipped.
    pub fn open(path: &Path) -> Result<(FileLayer, Option<String>), SessionError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(io(path))?;
        // one writer per log: a second process appending would interleave its events with ours, so it is refused
        // at once (the lock goes with the open file: a crash releases it)
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(SessionError::Busy {
                    path: path.display().to_string(),
                })
            }
            Err(e) => return Err(io(path)(e.into())),
        }
        let bytes = std::fs::read(path).map_err(io(path))?;
        let (events, good_len, torn) = parse_log(path, &bytes)?;
        let mut note = None;
        if let Some(torn) = torn {
            file.set_len(good_len as u64).map_err(io(path))?;
            let cut = bytes.len() - good_len;
            let kept = events.len();
            note = Some(match torn {
                Torn::NoNewline => format!(
                    "{}: the last line was cut short (a write was interrupted: the process was killed, or the disk \
                     filled up); its {cut} bytes were cut off, and the {kept} complete events before it are intact",
                    path.display()
                ),
                Torn::NotAnEvent(reason) => format!(
                    "{}: the last line is not a session event ({reason}): a write that was cut short; its {cut} \
                     bytes were cut off, and the {kept} complete events before it are intact",
                    path.display()
                ),
            });
        }
        Ok((
            FileLayer {
                path: path.to_path_buf(),
                file,
                len: good_len as u64,
                broken: None,
                events,
                pending: None,
            },
            note,
        ))
    }

    /// Reads and parses the log at `path` without opening it for writing or repairing a torn last line: `Ok(None)`
    /// when there is no log, the events of a well-formed prefix otherwise; a bad line is an error naming it.
    pub fn check(path: &Path) -> Result<Option<Vec<SessionUpdate>>, SessionError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(path)(e)),
        };
        Ok(Some(parse_log(path, &bytes)?.0))
    }

    fn write(&mut self, e: &SessionUpdate) -> Result<(), SessionError> {
        if let Some(why) = &self.broken {
            return Err(io(&self.path)(std::io::Error::other(why.clone())));
        }
        let mut line = serde_json::to_string(e).map_err(|e| SessionError::Io {
            path: self.path.display().to_string(),
            source: std::io::Error::other(e),
        })?;
        line.push('\n');
        match append_line(&mut self.file, self.len, line.as_bytes()) {
            Ok(()) => {
                self.len += line.len() as u64;
                self.events.push(e.clone());
                Ok(())
            }
            Err(AppendFailed { source, undone }) => {
                if !undone {
                    self.broken = Some(format!(
                        "an earlier write failed ({source}) and its partial line could not be cut off, so nothing \
                         more is appended; the next start of the agent cuts it"
                    ));
                }
                Err(io(&self.path)(source))
            }
        }
    }

    fn flush_pending(&mut self) -> Result<(), SessionError> {
        if let Some(p) = self.pending.take() {
            self.write(&p)?;
        }
        Ok(())
    }
}

/// How the last line of a log is torn.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Torn {
    /// It has no newline.
    NoNewline,
    /// It is complete but not a session event (why).
    NotAnEvent(String),
}

/// Parses a log: the events, the length of the well-formed prefix, and how its last line is torn, if it is. A bad
/// line followed by nothing but blank lines is the torn tail; one followed by more events is an error naming it.
fn parse_log(
    path: &Path,
    bytes: &[u8],
) -> Result<(Vec<SessionUpdate>, usize, Option<Torn>), SessionError> {
    let mut events = Vec::new();
    let mut offset = 0;
    let mut line_no = 0;
    while offset < bytes.len() {
        line_no += 1;
        let rest = &bytes[offset..];
        let (line, complete) = match rest.iter().position(|b| *b == b'\n') {
            Some(i) => (&rest[..i], true),
            None => (rest, false),
        };
        let parsed = std::str::from_utf8(line)
            .map_err(|e| e.to_string())
            .and_then(|s| {
                if s.trim().is_empty() {
                    Ok(None)
                } else {
                    serde_json::from_str::<SessionUpdate>(s)
                        .map(Some)
                        .map_err(|e| e.to_string())
                }
            });
        match (parsed, complete) {
            (Ok(e), true) => {
                events.extend(e);
                offset += line.len() + 1;
            }
            (Err(reason), true) => {
                let after = &rest[line.len() + 1..];
                if after.iter().all(u8::is_ascii_whitespace) {
                    return Ok((events, offset, Some(Torn::NotAnEvent(reason))));
                }
                return Err(SessionError::Corrupt {
                    path: path.display().to_string(),
                    line: line_no,
                    reason,
                });
            }
            // no newline: the write was torn, even when the fragment happens to parse
            (_, false) => return Ok((events, offset, Some(Torn::NoNewline))),
        }
    }
    Ok((events, offset, None))
}

/// True when `b` continues the chunk run of `a`: the same kind of chunk of the same message. A thinking block ends
/// with its signature and a redacted block stands alone, so a thought chunk after a signed (or redacted) one, or a
/// redacted one after anything, starts a new run: coalescing never merges two blocks or moves a signature.
pub(super) fn same_run(a: &SessionUpdate, b: &SessionUpdate) -> bool {
    let same = |x: &Chunk, y: &Chunk| x.message_id == y.message_id;
    match (a, b) {
        (SessionUpdate::UserMessageChunk(x), SessionUpdate::UserMessageChunk(y))
        | (SessionUpdate::AgentMessageChunk(x), SessionUpdate::AgentMessageChunk(y)) => same(x, y),
        (SessionUpdate::AgentThoughtChunk(x), SessionUpdate::AgentThoughtChunk(y)) => {
            x.message_id == y.message_id
                && x.meta.is_empty()
                && y.meta.redacted.is_none()
                && y.meta.provider_item.is_none()
        }
        _ => false,
    }
}

fn is_chunk(e: &SessionUpdate) -> bool {
    matches!(
        e,
        SessionUpdate::UserMessageChunk(_)
            | SessionUpdate::AgentMessageChunk(_)
            | SessionUpdate::AgentThoughtChunk(_)
    )
}

/// Appends `next` to the run `run` ([`same_run`] holds): its text, and the signature that closes the block.
fn extend_run(run: &mut SessionUpdate, next: &SessionUpdate) {
    let (content, more) = match (run, next) {
        (SessionUpdate::UserMessageChunk(a), SessionUpdate::UserMessageChunk(b))
        | (SessionUpdate::AgentMessageChunk(a), SessionUpdate::AgentMessageChunk(b)) => {
            (&mut a.content, &b.content)
        }
        (SessionUpdate::AgentThoughtChunk(a), SessionUpdate::AgentThoughtChunk(b)) => {
            if b.meta.signature.is_some() {
                a.meta.signature.clone_from(&b.meta.signature);
            }
            (&mut a.content, &b.content)
        }
        _ => return,
    };
    let Content::Text { text } = content;
    text.push_str(more.as_text());
}

impl Layer for FileLayer {
    fn name(&self) -> &str {
        "file"
    }

    fn stores(&self) -> bool {
        true
    }

    fn push(&mut self, events: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
        for e in &events {
            if e.is_progress() {
                continue;
            }
            if e.is_frame() {
                self.flush_pending()?;
                continue;
            }
            if let Some(p) = self.pending.as_mut().filter(|p| same_run(p, e)) {
                extend_run(p, e);
                continue;
            }
            self.flush_pending()?;
            if is_chunk(e) {
                self.pending = Some(e.clone());
            } else {
                self.write(e)?;
            }
        }
        Ok(events)
    }

    fn pull(&self, mut below: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
        below.extend(self.events.iter().cloned());
        below.extend(self.pending.iter().cloned());
        Ok(below)
    }

    fn close(&mut self) -> futures::future::BoxFuture<'_, Result<(), SessionError>> {
        Box::pin(async move {
            self.flush_pending()?;
            self.file.sync_data().map_err(io(&self.path))?;
            // the session is over: the log is another process's to open, and nothing more is appended here
            // without the lock
            self.broken = Some("the session log was closed".into());
            rustix::fs::flock(&self.file, rustix::fs::FlockOperation::Unlock)
                .map_err(|e| io(&self.path)(e.into()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;
    use crate::session::history::tests::{call, done, thought};
    use crate::session::to_messages;
    use crate::update::FrameKind;

    fn agent(t: &str) -> SessionUpdate {
        SessionUpdate::AgentMessageChunk(Chunk {
            content: Content::text(t),
            message_id: Some("m".into()),
        })
    }
    fn user(t: &str) -> SessionUpdate {
        SessionUpdate::UserMessageChunk(Chunk {
            content: Content::text(t),
            message_id: None,
        })
    }

    #[tokio::test]
    async fn a_second_writer_is_refused_until_the_first_closes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let (mut first, _) = FileLayer::open(&path).unwrap();
        first.push(vec![user("hi")]).unwrap();
        // flock conflicts between open files even inside one process, as between two processes
        let e = FileLayer::open(&path).unwrap_err();
        assert!(matches!(e, SessionError::Busy { .. }), "{e:?}");
        assert!(
            e.to_string()
                .contains("another loom process is writing this session log"),
            "{e}"
        );
        // reading is not writing: a check still sees the history
        assert!(FileLayer::check(&path).unwrap().is_some());
        first.close().await.unwrap();
        let end = SessionUpdate::frame(FrameKind::MessageEnd, Some(Role::User), None);
        assert!(
            first.push(vec![user("late"), end]).is_err(),
            "nothing is appended after close"
        );
        let (second, _) = FileLayer::open(&path).unwrap();
        assert_eq!(second.pull(vec![]).unwrap(), vec![user("hi")]);
        // dropping a writer (a crash) releases the log too
        drop(second);
        assert!(FileLayer::open(&path).is_ok());
    }

    #[tokio::test]
    async fn coalesces_runs_and_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s/session.jsonl");
        let (mut l, note) = FileLayer::open(&path).unwrap();
        assert!(note.is_none());
        l.push(vec![user("hi"), agent("a"), agent("b")]).unwrap();
        l.push(vec![SessionUpdate::frame(
            FrameKind::MessageEnd,
            Some(Role::Assistant),
            None,
        )])
        .unwrap();
        l.close().await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(!text.contains("frame"));
        let (l2, _) = FileLayer::open(&path).unwrap();
        assert_eq!(l2.pull(vec![]).unwrap(), vec![user("hi"), agent("ab")]);
    }

    /// Pushes `streamed` one event at a time (as the turn loop does) into a fresh log at `path`, closes it, and
    /// returns what a reopened log holds.
    async fn stream_and_reload(path: &Path, streamed: &[SessionUpdate]) -> Vec<SessionUpdate> {
        let (mut l, _) = FileLayer::open(path).unwrap();
        for e in streamed {
            l.push(vec![e.clone()]).unwrap();
        }
        l.close().await.unwrap();
        let (l2, _) = FileLayer::open(path).unwrap();
        l2.pull(vec![]).unwrap()
    }

    #[tokio::test]
    async fn coalescing_keeps_one_signature_per_thinking_block_across_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let streamed = vec![
            user("go"),
            thought("First, ", None, None),
            thought("the notes.", None, None),
            thought("", Some("sigA"), None),
            thought("", None, Some("opaque1")),
            thought("", None, Some("opaque2")),
            thought("Then ", None, None),
            thought("read it.", None, None),
            thought("", Some("sigB"), None),
            thought("", Some("sigC"), None),
            call("c1"),
            done("c1", "out"),
        ];
        let stored = stream_and_reload(&path, &streamed).await;
        assert_eq!(
            stored,
            vec![
                user("go"),
                thought("First, the notes.", Some("sigA"), None),
                thought("", None, Some("opaque1")),
                thought("", None, Some("opaque2")),
                thought("Then read it.", Some("sigB"), None),
                // a signature with no open block is a block of its own, never a second signature on the last
                thought("", Some("sigC"), None),
                call("c1"),
                done("c1", "out"),
            ]
        );
        // the coalesced log rebuilds exactly what the streamed events do
        assert_eq!(to_messages(&stored), to_messages(&streamed));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(r#""_meta":{"loom/thinkingSignature":"sigA"}"#),
            "{text}"
        );
    }

    #[tokio::test]
    async fn an_openai_reasoning_item_survives_coalescing_and_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let item = serde_json::json!({"id": "rs_1", "type": "reasoning", "encrypted_content": "gAAAAB==",
                                      "summary": [{"type": "summary_text", "text": "Need it."}]});
        let reasoning = SessionUpdate::AgentThoughtChunk(crate::update::ThoughtChunk {
            content: crate::update::Content::text(""),
            message_id: Some("m1".into()),
            meta: crate::update::ThoughtMeta {
                provider_item: Some(item.clone()),
                ..Default::default()
            },
        });
        let streamed = vec![
            user("go"),
            thought("Need ", None, None),
            thought("it.", None, None),
            reasoning.clone(),
            thought("More.", None, None),
            call("c1"),
            done("c1", "out"),
        ];
        let stored = stream_and_reload(&path, &streamed).await;
        assert!(stored.contains(&reasoning), "{stored:#?}");
        assert_eq!(to_messages(&stored), to_messages(&streamed));
        let blocks = &to_messages(&stored)[1].content;
        assert_eq!(blocks[1], crate::model::ContentBlock::ProviderItem { item });
    }

    #[tokio::test]
    async fn a_torn_last_line_is_skipped_and_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let good = format!(
            "{}\n{}\n",
            serde_json::to_string(&user("one")).unwrap(),
            serde_json::to_string(&agent("two")).unwrap()
        );
        // a kill in the middle of the third write
        std::fs::write(&path, format!("{good}{{\"sessionUpdate\":\"agent_mess")).unwrap();
        let (mut l, note) = FileLayer::open(&path).unwrap();
        assert!(note.unwrap().contains("cut short"));
        assert_eq!(l.pull(vec![]).unwrap(), vec![user("one"), agent("two")]);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), good);
        // the next append starts on a clean line
        l.push(vec![user("three")]).unwrap();
        l.close().await.unwrap();
        let (l2, note) = FileLayer::open(&path).unwrap();
        assert!(note.is_none());
        assert_eq!(
            l2.pull(vec![]).unwrap(),
            vec![user("one"), agent("two"), user("three")]
        );
    }

    #[test]
    fn a_kill_at_any_byte_keeps_every_complete_line() {
        let events = [user("one"), agent("two"), user("thr\u{e9}e")];
        let full: String = events
            .iter()
            .map(|e| serde_json::to_string(e).unwrap() + "\n")
            .collect();
        let ends: Vec<usize> = full.match_indices('\n').map(|(i, _)| i + 1).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        for cut in 0..=full.len() {
            std::fs::write(&path, &full.as_bytes()[..cut]).unwrap();
            let (l, note) = FileLayer::open(&path).unwrap();
            let complete = ends.iter().filter(|e| **e <= cut).count();
            assert_eq!(
                l.pull(vec![]).unwrap(),
                events[..complete].to_vec(),
                "cut at {cut}"
            );
            assert_eq!(
                note.is_some(),
                !ends.contains(&cut) && cut > 0,
                "cut at {cut}"
            );
            // what remains on disk is exactly the complete lines
            let kept = if complete == 0 { 0 } else { ends[complete - 1] };
            assert_eq!(
                std::fs::read(&path).unwrap(),
                full.as_bytes()[..kept].to_vec(),
                "cut at {cut}"
            );
        }
    }

    /// A log file on a disk with `room` bytes left: a write past it stores what fits, then fails (ENOSPC).
    struct FullDisk {
        bytes: Vec<u8>,
        room: usize,
        cut_fails: bool,
    }

    impl Write for FullDisk {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from_raw_os_error(28));
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            self.bytes.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl LogFile for FullDisk {
        fn cut(&mut self, len: u64) -> std::io::Result<()> {
            if self.cut_fails {
                return Err(std::io::Error::other("cannot truncate"));
            }
            self.room += self.bytes.len() - len as usize;
            self.bytes.truncate(len as usize);
            Ok(())
        }
    }

    #[test]
    fn a_failed_append_is_cut_back_so_the_next_one_starts_on_a_clean_line() {
        let one = b"{\"first\":1}\n";
        let two = b"{\"second\":2}\n";
        let mut disk = FullDisk {
            bytes: Vec::new(),
            room: one.len() + 5,
            cut_fails: false,
        };
        assert!(append_line(&mut disk, 0, one).is_ok());
        // the disk fills up five bytes into the second line: the partial line is cut off
        let failed = append_line(&mut disk, one.len() as u64, two).unwrap_err();
        assert!(failed.undone, "{}", failed.source);
        assert_eq!(disk.bytes, one.to_vec());
        // space is freed: the next append starts exactly where the complete lines end
        disk.room = 100;
        assert!(append_line(&mut disk, one.len() as u64, two).is_ok());
        assert_eq!(disk.bytes, [&one[..], &two[..]].concat());
        // when the cut fails too, the caller is told a partial line remains
        let mut stuck = FullDisk {
            bytes: Vec::new(),
            room: 3,
            cut_fails: true,
        };
        assert!(!append_line(&mut stuck, 0, one).unwrap_err().undone);
    }

    #[test]
    fn after_a_failed_append_that_cannot_be_undone_nothing_more_is_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let (mut l, _) = FileLayer::open(&path).unwrap();
        l.push(vec![user("one"), call("c1")]).unwrap();
        // a descriptor that can neither write nor truncate: the append fails and cannot be undone
        l.file = File::open(&path).unwrap();
        let first = l.push(vec![call("c2")]).unwrap_err().to_string();
        assert!(first.contains("session.jsonl"), "{first}");
        let again = l.push(vec![call("c3")]).unwrap_err().to_string();
        assert!(
            again.contains("an earlier write failed") && again.contains("session.jsonl"),
            "{again}"
        );
        assert_eq!(l.pull(vec![]).unwrap(), vec![user("one"), call("c1")]);
    }

    #[test]
    fn a_last_line_that_is_not_an_event_is_cut_with_a_note_naming_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let good = format!(
            "{}\n{}\n",
            serde_json::to_string(&user("one")).unwrap(),
            serde_json::to_string(&agent("two")).unwrap()
        );
        // an append that failed halfway, then a later one glued onto it (a loom without the undo), then blank lines
        let glued = format!(
            "{{\"sessionUpdate\":\"agent_mess{}\n\n",
            serde_json::to_string(&user("three")).unwrap()
        );
        std::fs::write(&path, format!("{good}{glued}")).unwrap();
        let (l, note) = FileLayer::open(&path).unwrap();
        let note = note.unwrap();
        assert!(
            note.contains("session.jsonl")
                && note.contains(&format!("its {} bytes were cut off", glued.len()))
                && note.contains("the 2 complete events"),
            "{note}"
        );
        assert_eq!(l.pull(vec![]).unwrap(), vec![user("one"), agent("two")]);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), good);
        drop(l);
        // a torn line without its newline: the note names its bytes too
        std::fs::write(&path, format!("{good}{{\"sess")).unwrap();
        let (_, note) = FileLayer::open(&path).unwrap();
        assert!(note.unwrap().contains("its 6 bytes were cut off"));
        // the same bad line with an event after it is a corrupt middle line: an error, nothing cut
        let middle = format!(
            "{good}{glued}{}\n",
            serde_json::to_string(&user("four")).unwrap()
        );
        std::fs::write(&path, &middle).unwrap();
        let err = FileLayer::open(&path).unwrap_err().to_string();
        assert!(
            err.contains("session.jsonl:3: not a session event"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), middle);
    }

    #[test]
    fn a_bad_middle_line_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let one = serde_json::to_string(&user("one")).unwrap();
        std::fs::write(&path, format!("{one}\nnot json\n{one}\n")).unwrap();
        let err = FileLayer::open(&path).unwrap_err().to_string();
        assert!(
            err.contains("session.jsonl:2: not a session event"),
            "{err}"
        );
        // nothing was changed
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{one}\nnot json\n{one}\n")
        );
    }
}
