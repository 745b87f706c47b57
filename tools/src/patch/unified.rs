//! Parsing and applying unified diffs for the `apply_patch` tool.
//!
//! [`parse_patch`] reads a unified diff as `git diff` or `diff -u` writes it
//! (one or several files) into [`FilePatch`]es, and [`apply_file`] applies one
//! file's hunks to that file's current text. The caller applies every file
//! patch in memory first and writes nothing unless all of them succeed, which
//! makes the whole patch all-or-nothing.
//!
//! This module is pure: it never touches the filesystem, never does I/O, never
//! resolves, normalises or authorises paths (paths come back as written,
//! minus git's `a/` and `b/` prefixes; the caller must resolve and check
//! them), and never guesses: lines are compared exactly, with no whitespace
//! fuzz. It refuses renames, copies and binary patches, and it ignores file
//! mode changes.
//!
//! # Line endings
//!
//! Lines are compared exactly, a `"\r"` being part of a line. One adaptation:
//! when every line ending of the original file is `"\r\n"` and no line of the
//! file's hunks ends in `"\r"`, the file is compared without its `"\r"`s and
//! the result is written with `"\r\n"` throughout, added lines included. A
//! patch for a file with mixed line endings must carry the `"\r"`s exactly.
//!
//! # Positions
//!
//! Each hunk is tried at the line its `@@` header states. If its old lines
//! (context and removed) are not there, the nearest position where they match
//! is used, searching both ways, closest first and the earlier of two equally
//! close positions first, but never before the end of the previous hunk:
//! hunks apply in order and never overlap. The search costs time linear in the
//! file and the hunk (it compares interned lines with a KMP scan, widening the
//! window around the stated line until it covers the file).
//!
//! # Final newline
//!
//! `\ No newline at end of file` is honoured on both sides. The result ends
//! with a newline unless the last hunk that reaches the end of the file says
//! its new side has none; when no hunk reaches the end, the original's final
//! newline (or lack of one) is kept.

use std::collections::{HashMap, HashSet};

/// Most file patches one patch may hold.
pub const MAX_FILE_PATCHES: usize = 1000;

/// Most hunk body lines (context, removed and added, over all files) one
/// patch may hold.
pub const MAX_HUNK_LINES: usize = 100_000;

/// Longest excerpt of a line quoted in an error, in characters.
const SHOWN_CHARS: usize = 120;

/// First window half-width, in lines, of the nearest-position search.
const FIRST_WINDOW: usize = 64;

/// One file's part of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// The path before the change; `None` when the patch creates the file
    /// (`--- /dev/null`).
    pub old_path: Option<String>,
    /// The path after the change; `None` when the patch deletes the file
    /// (`+++ /dev/null`).
    pub new_path: Option<String>,
    /// The hunks, in file order.
    pub hunks: Vec<Hunk>,
}

impl FilePatch {
    /// The path this file patch touches: the new path, or the old one for a
    /// deletion.
    pub fn path(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or("")
    }

    /// Whether the patch creates the file (`--- /dev/null`).
    pub fn is_creation(&self) -> bool {
        self.old_path.is_none()
    }

    /// Whether the patch deletes the file (`+++ /dev/null`).
    pub fn is_deletion(&self) -> bool {
        self.new_path.is_none()
    }
}

/// One `@@ -old_start,old_len +new_start,new_len @@` hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// First old line of the hunk (1-based); for a hunk with no old lines,
    /// the line after which the new lines go (0 = start of file).
    pub old_start: usize,
    /// Number of old lines (context and removed).
    pub old_len: usize,
    /// First new line of the hunk (1-based); informational only.
    pub new_start: usize,
    /// Number of new lines (context and added).
    pub new_len: usize,
    /// The body lines, in order.
    pub lines: Vec<HunkLine>,
    /// The old side's last line is the end of the file and has no final
    /// newline (`\ No newline at end of file` after it).
    pub old_no_newline: bool,
    /// The new side's last line is the end of the file and has no final
    /// newline (`\ No newline at end of file` after it).
    pub new_no_newline: bool,
}

impl Hunk {
    /// The hunk's header as `@@ -a,b +c,d @@`, for messages.
    pub fn header(&self) -> String {
        format!(
            "@@ -{},{} +{},{} @@",
            self.old_start, self.old_len, self.new_start, self.new_len
        )
    }

    /// 0-based index of the first old line (the insertion point when the hunk
    /// has no old lines).
    fn old_index(&self) -> usize {
        if self.old_len == 0 {
            self.old_start
        } else {
            self.old_start.saturating_sub(1)
        }
    }

    /// The old side: context and removed lines.
    fn old_lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter(|l| l.is_old()).map(HunkLine::text)
    }

    /// The new side: context and added lines.
    fn new_lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter(|l| l.is_new()).map(HunkLine::text)
    }
}

/// One body line of a hunk, without its leading marker character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    /// ` line`: present before and after.
    Context(String),
    /// `-line`: removed.
    Remove(String),
    /// `+line`: added.
    Add(String),
}

impl HunkLine {
    /// The line's text, without the marker character and without `"\n"`.
    pub fn text(&self) -> &str {
        match self {
            HunkLine::Context(t) | HunkLine::Remove(t) | HunkLine::Add(t) => t,
        }
    }

    /// Whether the line is on the old side (context or removed).
    fn is_old(&self) -> bool {
        !matches!(self, HunkLine::Add(_))
    }

    /// Whether the line is on the new side (context or added).
    fn is_new(&self) -> bool {
        !matches!(self, HunkLine::Remove(_))
    }
}

/// Why a patch could not be parsed or applied. Patch line numbers and file
/// line numbers are 1-based; hunk numbers count from 1 within their file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatchError {
    /// The text holds no file section at all.
    #[error(
        "no file changes found in the patch; give a unified diff with ---/+++ headers and @@ hunks"
    )]
    NoFileChanges,
    /// More than [`MAX_FILE_PATCHES`] file sections.
    #[error("the patch changes more than {limit} files; split it into several smaller patches")]
    TooManyFiles {
        /// The limit.
        limit: usize,
    },
    /// More than [`MAX_HUNK_LINES`] hunk body lines.
    #[error("the patch has more than {limit} hunk lines; split it into several smaller patches")]
    TooManyLines {
        /// The limit.
        limit: usize,
    },
    /// A hunk header outside any file section.
    #[error("patch line {line}: hunk header {text:?} is not inside a file section; put `--- PATH` and `+++ PATH` header lines before the hunks of each file")]
    HunkOutsideFile {
        /// Patch line.
        line: usize,
        /// The offending line (shortened).
        text: String,
    },
    /// A line where a hunk header was expected is not a valid one.
    #[error("{path}: patch line {line}: expected a hunk header like `@@ -12,3 +12,4 @@` but found {text:?}; start every hunk with an @@ line giving its start lines and line counts")]
    BadHunkHeader {
        /// File the section is for.
        path: String,
        /// Patch line.
        line: usize,
        /// The offending line (shortened).
        text: String,
    },
    /// A hunk body is shorter or longer than its header says.
    #[error("{path}: hunk {hunk} ({header}), patch line {line}: {detail}; make the counts in the @@ header match the hunk body (old side = context and removed lines, new side = context and added lines)")]
    HunkLength {
        /// File the hunk is for.
        path: String,
        /// Hunk number within the file.
        hunk: usize,
        /// The hunk's header.
        header: String,
        /// Patch line where the mismatch showed.
        line: usize,
        /// What does not match.
        detail: String,
    },
    /// A `\ No newline at end of file` marker in a place where it means
    /// nothing.
    #[error("{path}: hunk {hunk}, patch line {line}: `\\ No newline at end of file` must directly follow the last line of its side of the hunk; move or remove it")]
    MisplacedNoNewline {
        /// File the hunk is for.
        path: String,
        /// Hunk number within the file.
        hunk: usize,
        /// Patch line of the misplaced marker or of the line after it.
        line: usize,
    },
    /// A `---` or `+++` path is empty.
    #[error(
        "patch line {line}: the file path is empty; give the file's path after `--- ` and `+++ `"
    )]
    EmptyPath {
        /// Patch line.
        line: usize,
    },
    /// A path contains a NUL character.
    #[error("patch line {line}: the file path contains a NUL character; such paths are refused")]
    NulInPath {
        /// Patch line.
        line: usize,
    },
    /// A `"quoted"` path is malformed.
    #[error("patch line {line}: the quoted path {text:?} is malformed; close the quotes and use only C-style escapes that form UTF-8")]
    BadQuotedPath {
        /// Patch line.
        line: usize,
        /// The offending text (shortened).
        text: String,
    },
    /// Both paths are `/dev/null`.
    #[error("patch line {line}: both the old and the new path are /dev/null; name the file on at least one side")]
    BothDevNull {
        /// Patch line of the `---` header.
        line: usize,
    },
    /// A rename or copy, which is not supported.
    #[error("renaming or copying {old:?} to {new:?} is not supported; renames are not supported, so write the new file and delete the old one in two file patches (or use the same path on the --- and +++ lines)")]
    RenameUnsupported {
        /// The old path.
        old: String,
        /// The new path.
        new: String,
    },
    /// A binary patch, which is not supported.
    #[error(
        "patch line {line}: binary patches are not supported; only text changes can be applied"
    )]
    BinaryUnsupported {
        /// Patch line.
        line: usize,
    },
    /// A `diff --git` section without `---`/`+++` lines whose path cannot be
    /// read.
    #[error("patch line {line}: cannot read the file path from the `diff --git` line; add `--- PATH` and `+++ PATH` header lines")]
    BadGitHeader {
        /// Patch line.
        line: usize,
    },
    /// A file section that changes a file but has no hunks.
    #[error("{path}: the file section has no @@ hunks; add hunks with the changes, or leave the file out of the patch")]
    NoHunks {
        /// File the section is for.
        path: String,
    },
    /// Two file sections for the same path.
    #[error("{path} appears more than once in the patch; put all its hunks in one file section, in file order")]
    DuplicatePath {
        /// The repeated path.
        path: String,
    },
    /// A hunk's header places it before the end of the previous hunk.
    #[error("{path}: hunk {hunk} ({header}) starts before the end of the previous hunk ({previous}); hunks must be in file order and must not overlap, so fix their line numbers or merge them into one hunk")]
    HunksOutOfOrder {
        /// File the hunks are for.
        path: String,
        /// Hunk number within the file.
        hunk: usize,
        /// The hunk's header.
        header: String,
        /// The previous hunk's header.
        previous: String,
    },
    /// A hand-built [`FilePatch`] is inconsistent (parsed ones never are).
    #[error("{path}: invalid file patch: {detail}")]
    Invalid {
        /// File the patch is for.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// The patch creates a file that exists.
    #[error("{path} already exists but the patch creates it (`--- /dev/null`); re-read the file and patch its current content instead")]
    AlreadyExists {
        /// The path.
        path: String,
    },
    /// The patch changes or deletes a file that does not exist.
    #[error("{path} does not exist; to create it use `--- /dev/null` as the old path, otherwise check the path")]
    NotFound {
        /// The path.
        path: String,
    },
    /// A hunk's old lines are not at the stated line nor anywhere after the
    /// previous hunk.
    #[error("{path}: hunk {hunk} ({header}) does not apply: at line {line} it expects {expected:?} but the file has {}, and its lines match nowhere else after the previous hunk; re-read the file and regenerate the hunk from its current lines", found_text(.found))]
    HunkMismatch {
        /// The file.
        path: String,
        /// Hunk number within the file.
        hunk: usize,
        /// The hunk's header.
        header: String,
        /// File line of the first line that differs at the stated position.
        line: usize,
        /// The hunk's line there (shortened).
        expected: String,
        /// The file's line there (shortened), `None` past the end.
        found: Option<String>,
    },
    /// A hunk's lines are at the stated line but cannot be applied there.
    #[error("{path}: hunk {hunk} ({header}) does not apply: {detail}; re-read the file and regenerate the hunk")]
    HunkConflict {
        /// The file.
        path: String,
        /// Hunk number within the file.
        hunk: usize,
        /// The hunk's header.
        header: String,
        /// Why.
        detail: String,
    },
    /// A deletion leaves lines behind.
    #[error("{path}: the patch deletes the file but {remaining} line(s) would remain; a deletion must remove every line, so re-read the file and regenerate the diff")]
    IncompleteDeletion {
        /// The file.
        path: String,
        /// Lines left.
        remaining: usize,
    },
}

/// Text for a [`PatchError::HunkMismatch`] `found` field.
fn found_text(found: &Option<String>) -> String {
    match found {
        Some(line) => format!("{line:?}"),
        None => "no line there (end of file)".to_string(),
    }
}

/// Shortens `text` to [`SHOWN_CHARS`] characters for an error message.
fn clip(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", text.get(..cut).unwrap_or(text)),
        None => text.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

/// Parses a unified diff into one [`FilePatch`] per file.
///
/// Text before the first file header (a commit message, `Index:` lines) and
/// between file sections is ignored, as are git's `index`, mode and
/// similarity lines. The result holds at least one file patch, at most
/// [`MAX_FILE_PATCHES`], no path twice, and every hunk's body matches its
/// header's counts.
pub fn parse_patch(text: &str) -> Result<Vec<FilePatch>, PatchError> {
    let mut parser = Parser {
        lines: split_lines(text).0,
        pos: 0,
        files: Vec::new(),
        body_lines: 0,
    };
    parser.run()?;
    let files = parser.files;
    if files.is_empty() {
        return Err(PatchError::NoFileChanges);
    }
    let mut seen = HashSet::new();
    for file in &files {
        if !seen.insert(file.path()) {
            return Err(PatchError::DuplicatePath {
                path: file.path().to_string(),
            });
        }
    }
    Ok(files)
}

/// What a `diff --git` line and its extended header lines said.
struct GitBlock {
    /// Patch line of the `diff --git` line.
    line: usize,
    /// The two paths on the `diff --git` line, if they could be read.
    paths: Option<(String, String)>,
    new_file: bool,
    deleted_file: bool,
    rename_from: Option<String>,
    rename_to: Option<String>,
}

impl GitBlock {
    fn new(rest: &str, line: usize) -> Self {
        GitBlock {
            line,
            paths: git_line_paths(rest),
            new_file: false,
            deleted_file: false,
            rename_from: None,
            rename_to: None,
        }
    }

    /// Takes in one extended header line; returns whether it was one.
    fn header_line(&mut self, head: &str) -> bool {
        if let Some(p) = head
            .strip_prefix("rename from ")
            .or_else(|| head.strip_prefix("copy from "))
        {
            self.rename_from = Some(loose_path(p));
            return true;
        }
        if let Some(p) = head
            .strip_prefix("rename to ")
            .or_else(|| head.strip_prefix("copy to "))
        {
            self.rename_to = Some(loose_path(p));
            return true;
        }
        if head.starts_with("new file mode") {
            self.new_file = true;
            return true;
        }
        if head.starts_with("deleted file mode") {
            self.deleted_file = true;
            return true;
        }
        [
            "index ",
            "old mode",
            "new mode",
            "similarity index",
            "dissimilarity index",
        ]
        .iter()
        .any(|p| head.starts_with(p))
    }

    /// The rename error, if the block is a rename or copy.
    fn rename_error(&self) -> Option<PatchError> {
        if self.rename_from.is_none() && self.rename_to.is_none() {
            return None;
        }
        let (a, b) = self
            .paths
            .clone()
            .map(|(a, b)| strip_git_prefixes(Some(a), Some(b)))
            .unwrap_or((None, None));
        Some(PatchError::RenameUnsupported {
            old: self.rename_from.clone().or(a).unwrap_or_default(),
            new: self.rename_to.clone().or(b).unwrap_or_default(),
        })
    }
}

/// Line-by-line reader of a patch.
struct Parser<'t> {
    lines: Vec<&'t str>,
    /// Index of the next line to read.
    pos: usize,
    files: Vec<FilePatch>,
    /// Hunk body lines read so far, over all files.
    body_lines: usize,
}

impl<'t> Parser<'t> {
    fn line(&self, idx: usize) -> Option<&'t str> {
        self.lines.get(idx).copied()
    }

    /// Whether lines `idx` and `idx + 1` are a `---`/`+++` header pair.
    fn is_file_header(&self, idx: usize) -> bool {
        matches!(
            (self.line(idx), self.line(idx.saturating_add(1))),
            (Some(a), Some(b)) if a.starts_with("--- ") && b.starts_with("+++ ")
        )
    }

    fn run(&mut self) -> Result<(), PatchError> {
        let mut git: Option<GitBlock> = None;
        while let Some(raw) = self.line(self.pos) {
            let line_no = self.pos + 1;
            let head = raw.trim_end_matches('\r');
            if let Some(rest) = head.strip_prefix("diff --git ") {
                if let Some(block) = git.take() {
                    self.finish_git_block(block)?;
                }
                git = Some(GitBlock::new(rest, line_no));
                self.pos += 1;
                continue;
            }
            if head.starts_with("GIT binary patch")
                || (head.starts_with("Binary files ") && head.ends_with(" differ"))
            {
                return Err(PatchError::BinaryUnsupported { line: line_no });
            }
            if let Some(block) = git.as_mut() {
                if block.header_line(head) {
                    self.pos += 1;
                    continue;
                }
            }
            if self.is_file_header(self.pos) {
                let block = git.take();
                self.file_section(block)?;
                continue;
            }
            // Free text before the first file is ignored, but a real hunk
            // header, or any `@@` line once files have begun, means a
            // missing file header: refuse rather than drop the hunk.
            let started = !self.files.is_empty() || git.is_some();
            if head.starts_with("@@") && (started || parse_hunk_header(head).is_some()) {
                return Err(PatchError::HunkOutsideFile {
                    line: line_no,
                    text: clip(head),
                });
            }
            self.pos += 1;
        }
        if let Some(block) = git.take() {
            self.finish_git_block(block)?;
        }
        Ok(())
    }

    fn push(&mut self, file: FilePatch) -> Result<(), PatchError> {
        if self.files.len() >= MAX_FILE_PATCHES {
            return Err(PatchError::TooManyFiles {
                limit: MAX_FILE_PATCHES,
            });
        }
        self.files.push(file);
        Ok(())
    }

    /// Ends a `diff --git` block that had no `---`/`+++` lines: a rename, an
    /// empty file's creation or deletion, or a mode change (ignored).
    fn finish_git_block(&mut self, block: GitBlock) -> Result<(), PatchError> {
        if let Some(err) = block.rename_error() {
            return Err(err);
        }
        if !block.new_file && !block.deleted_file {
            return Ok(());
        }
        let Some((a, b)) = block.paths.clone() else {
            return Err(PatchError::BadGitHeader { line: block.line });
        };
        let (old, new) = strip_git_prefixes(Some(a), Some(b));
        let (old, new) = if block.new_file {
            (None, new)
        } else {
            (old, None)
        };
        for path in old.iter().chain(new.iter()) {
            check_path(path, block.line)?;
        }
        self.push(FilePatch {
            old_path: old,
            new_path: new,
            hunks: Vec::new(),
        })
    }

    /// Reads a `---`/`+++` header pair (at `self.pos`) and the hunks after it.
    fn file_section(&mut self, git: Option<GitBlock>) -> Result<(), PatchError> {
        let old_no = self.pos + 1;
        let new_no = self.pos + 2;
        let old_raw = header_path(self.line(self.pos).unwrap_or(""), "--- ", old_no)?;
        let new_raw = header_path(self.line(self.pos + 1).unwrap_or(""), "+++ ", new_no)?;
        self.pos += 2;
        if let Some(err) = git.as_ref().and_then(GitBlock::rename_error) {
            return Err(err);
        }
        let (old_path, new_path) = strip_git_prefixes(old_raw, new_raw);
        if let Some(p) = &old_path {
            check_path(p, old_no)?;
        }
        if let Some(p) = &new_path {
            check_path(p, new_no)?;
        }
        let path = match (&old_path, &new_path) {
            (None, None) => return Err(PatchError::BothDevNull { line: old_no }),
            (Some(o), Some(n)) if o != n => {
                return Err(PatchError::RenameUnsupported {
                    old: o.clone(),
                    new: n.clone(),
                })
            }
            (_, Some(p)) | (Some(p), None) => p.clone(),
        };

        let mut hunks: Vec<Hunk> = Vec::new();
        loop {
            let mut next = self.pos;
            while self
                .line(next)
                .is_some_and(|l| l.trim_end_matches('\r').is_empty())
            {
                next += 1;
            }
            let Some(raw) = self.line(next) else { break };
            if raw.starts_with("@@") {
                self.pos = next;
                let hunk = self.hunk(&path, hunks.len() + 1)?;
                hunks.push(hunk);
                continue;
            }
            let body_like = matches!(raw.as_bytes().first(), Some(b' ' | b'+' | b'-'));
            // `-- ` alone is the signature separator of `git format-patch`.
            if body_like && !self.is_file_header(next) && raw.trim_end_matches('\r') != "-- " {
                return Err(match hunks.last() {
                    None => PatchError::BadHunkHeader {
                        path,
                        line: next + 1,
                        text: clip(raw),
                    },
                    Some(last) => PatchError::HunkLength {
                        path,
                        hunk: hunks.len(),
                        header: last.header(),
                        line: next + 1,
                        detail: format!(
                            "the hunk goes on after the header's counts ({} old, {} new lines) are used up",
                            last.old_len, last.new_len
                        ),
                    },
                });
            }
            break;
        }

        if hunks.is_empty() && old_path.is_some() && new_path.is_some() {
            return Err(PatchError::NoHunks { path });
        }
        check_order(&path, &hunks)?;
        self.push(FilePatch {
            old_path,
            new_path,
            hunks,
        })
    }

    /// Reads one hunk whose `@@` line is at `self.pos`.
    fn hunk(&mut self, path: &str, number: usize) -> Result<Hunk, PatchError> {
        let header_no = self.pos + 1;
        let raw = self.line(self.pos).unwrap_or("");
        let Some((old_start, old_len, new_start, new_len)) =
            parse_hunk_header(raw.trim_end_matches('\r'))
        else {
            return Err(PatchError::BadHunkHeader {
                path: path.to_string(),
                line: header_no,
                text: clip(raw),
            });
        };
        let mut hunk = Hunk {
            old_start,
            old_len,
            new_start,
            new_len,
            lines: Vec::new(),
            old_no_newline: false,
            new_no_newline: false,
        };
        let length_error = |line: usize, detail: String| PatchError::HunkLength {
            path: path.to_string(),
            hunk: number,
            header: format!("@@ -{old_start},{old_len} +{new_start},{new_len} @@"),
            line,
            detail,
        };
        if old_len == 0 && new_len == 0 {
            return Err(length_error(
                header_no,
                "the hunk is empty (both counts are 0)".to_string(),
            ));
        }
        self.pos += 1;
        let (mut old_left, mut new_left) = (old_len, new_len);
        loop {
            let line_no = self.pos + 1;
            let short = |at: usize, old_left: usize, new_left: usize| {
                length_error(
                    at,
                    format!(
                        "the body ends after {} old and {} new lines but the header says {old_len} old and {new_len} new",
                        old_len - old_left,
                        new_len - new_left
                    ),
                )
            };
            let Some(raw) = self.line(self.pos) else {
                if old_left > 0 || new_left > 0 {
                    return Err(short(self.pos.max(1), old_left, new_left));
                }
                break;
            };
            if raw.starts_with('\\') {
                match hunk.lines.last() {
                    None => {
                        return Err(PatchError::MisplacedNoNewline {
                            path: path.to_string(),
                            hunk: number,
                            line: line_no,
                        })
                    }
                    Some(last) => {
                        hunk.old_no_newline |= last.is_old();
                        hunk.new_no_newline |= last.is_new();
                    }
                }
                self.pos += 1;
                continue;
            }
            if old_left == 0 && new_left == 0 {
                break;
            }
            let text = raw.get(1..).unwrap_or("").to_string();
            let line = match raw.as_bytes().first() {
                None => HunkLine::Context(String::new()),
                Some(b' ') => HunkLine::Context(text),
                Some(b'-') => HunkLine::Remove(text),
                Some(b'+') => HunkLine::Add(text),
                Some(_) => return Err(short(line_no, old_left, new_left)),
            };
            if line.is_old() {
                if old_left == 0 {
                    return Err(length_error(
                        line_no,
                        format!("this line is on the old side but the header's old count ({old_len}) is already used up"),
                    ));
                }
                if hunk.old_no_newline {
                    return Err(PatchError::MisplacedNoNewline {
                        path: path.to_string(),
                        hunk: number,
                        line: line_no,
                    });
                }
            }
            if line.is_new() {
                if new_left == 0 {
                    return Err(length_error(
                        line_no,
                        format!("this line is on the new side but the header's new count ({new_len}) is already used up"),
                    ));
                }
                if hunk.new_no_newline {
                    return Err(PatchError::MisplacedNoNewline {
                        path: path.to_string(),
                        hunk: number,
                        line: line_no,
                    });
                }
            }
            if line.is_old() {
                old_left -= 1;
            }
            if line.is_new() {
                new_left -= 1;
            }
            self.body_lines += 1;
            if self.body_lines > MAX_HUNK_LINES {
                return Err(PatchError::TooManyLines {
                    limit: MAX_HUNK_LINES,
                });
            }
            hunk.lines.push(line);
            self.pos += 1;
        }
        Ok(hunk)
    }
}

/// Parses `@@ -a[,b] +c[,d] @@[ section]`.
fn parse_hunk_header(line: &str) -> Option<(usize, usize, usize, usize)> {
    let rest = line.strip_prefix("@@ -")?;
    let (old, rest) = rest.split_once(" +")?;
    let (new, rest) = rest.split_once(" @@")?;
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    let (a, b) = parse_range(old)?;
    let (c, d) = parse_range(new)?;
    Some((a, b, c, d))
}

/// Parses `start[,len]`; a missing length means 1.
fn parse_range(text: &str) -> Option<(usize, usize)> {
    let number = |s: &str| -> Option<usize> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    match text.split_once(',') {
        Some((start, len)) => Some((number(start)?, number(len)?)),
        None => Some((number(text)?, 1)),
    }
}

/// The path on a `--- ` or `+++ ` line: unquoted, cut at a tab, `None` for
/// `/dev/null`.
fn header_path(line: &str, prefix: &str, line_no: usize) -> Result<Option<String>, PatchError> {
    let rest = line
        .trim_end_matches('\r')
        .strip_prefix(prefix)
        .unwrap_or("");
    let path = if rest.starts_with('"') {
        match unquote(rest) {
            Some((path, _)) => path,
            None => {
                return Err(PatchError::BadQuotedPath {
                    line: line_no,
                    text: clip(rest),
                })
            }
        }
    } else {
        rest.split_once('\t').map_or(rest, |(p, _)| p).to_string()
    };
    Ok((path != "/dev/null").then_some(path))
}

/// A path from a `rename from`/`rename to` line, unquoted when possible.
fn loose_path(text: &str) -> String {
    unquote(text).map_or_else(|| text.to_string(), |(p, _)| p)
}

/// Refuses an empty path or one containing a NUL.
fn check_path(path: &str, line: usize) -> Result<(), PatchError> {
    if path.is_empty() {
        return Err(PatchError::EmptyPath { line });
    }
    if path.contains('\0') {
        return Err(PatchError::NulInPath { line });
    }
    Ok(())
}

/// Drops git's `a/` and `b/` prefixes: from both paths when the old starts
/// with `a/` and the new with `b/`, or from the only path when the other is
/// `/dev/null`.
fn strip_git_prefixes(
    old: Option<String>,
    new: Option<String>,
) -> (Option<String>, Option<String>) {
    fn strip(path: String, prefixes: &[&str]) -> String {
        prefixes
            .iter()
            .find_map(|p| path.strip_prefix(p))
            .map_or_else(|| path.clone(), str::to_string)
    }
    match (old, new) {
        (Some(o), Some(n)) if o.starts_with("a/") && n.starts_with("b/") => {
            (Some(strip(o, &["a/"])), Some(strip(n, &["b/"])))
        }
        (None, Some(n)) => (None, Some(strip(n, &["a/", "b/"]))),
        (Some(o), None) => (Some(strip(o, &["a/", "b/"])), None),
        other => other,
    }
}

/// The two paths of a `diff --git A B` line (what follows `diff --git `).
/// Unquoted paths are read when both halves name the same file, which is the
/// only case where the line is needed (an empty file's creation or deletion).
fn git_line_paths(rest: &str) -> Option<(String, String)> {
    if rest.starts_with('"') {
        let (first, tail) = unquote(rest)?;
        let tail = tail.strip_prefix(' ')?;
        let second = if tail.starts_with('"') {
            unquote(tail)?.0
        } else {
            tail.to_string()
        };
        return Some((first, second));
    }
    // "a/P b/P": both halves have the same length.
    if rest.len() % 2 == 1 {
        let mid = rest.len() / 2;
        if let (Some(first), Some(" "), Some(second)) =
            (rest.get(..mid), rest.get(mid..mid + 1), rest.get(mid + 1..))
        {
            let same = first == second
                || matches!(
                    (first.strip_prefix("a/"), second.strip_prefix("b/")),
                    (Some(x), Some(y)) if x == y
                );
            if same {
                return Some((first.to_string(), second.to_string()));
            }
        }
    }
    let (first, second) = rest.split_once(" b/")?;
    if second.contains(" b/") {
        return None;
    }
    Some((first.to_string(), format!("b/{second}")))
}

/// Reads a C-style quoted string at the start of `text` (git's quoting of
/// unusual paths). Returns the string and the text after the closing quote.
fn unquote(text: &str) -> Option<(String, &str)> {
    let body = text.strip_prefix('"')?;
    let bytes = body.as_bytes();
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                let value = String::from_utf8(out).ok()?;
                return Some((value, body.get(i + 1..)?));
            }
            b'\\' => {
                let esc = *bytes.get(i + 1)?;
                i += 2;
                let value = match esc {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'r' => b'\r',
                    b'a' => 0x07,
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'v' => 0x0b,
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'0'..=b'7' => {
                        let d2 = *bytes.get(i)?;
                        let d3 = *bytes.get(i + 1)?;
                        if !(b'0'..=b'7').contains(&d2) || !(b'0'..=b'7').contains(&d3) {
                            return None;
                        }
                        i += 2;
                        let v = u32::from(esc - b'0') * 64
                            + u32::from(d2 - b'0') * 8
                            + u32::from(d3 - b'0');
                        u8::try_from(v).ok()?
                    }
                    _ => return None,
                };
                out.push(value);
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

/// Checks that hunks are in file order and do not overlap, by their headers.
fn check_order(path: &str, hunks: &[Hunk]) -> Result<(), PatchError> {
    for (idx, pair) in hunks.windows(2).enumerate() {
        if let [prev, cur] = pair {
            if cur.old_index() < prev.old_index().saturating_add(prev.old_len) {
                return Err(PatchError::HunksOutOfOrder {
                    path: path.to_string(),
                    hunk: idx + 2,
                    header: cur.header(),
                    previous: prev.header(),
                });
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Applying
// ---------------------------------------------------------------------------

/// Applies one file's hunks to its current text (`None` when the file does
/// not exist). Returns the new text, or `None` when the file is deleted.
///
/// A creation needs `original == None`; a change or a deletion needs the
/// file; a deletion must remove every line. See the module documentation for
/// how positions, line endings and the final newline are handled.
pub fn apply_file(original: Option<&str>, patch: &FilePatch) -> Result<Option<String>, PatchError> {
    let path = patch.path();
    validate(patch)?;
    let text = match (patch.is_creation(), original) {
        (true, Some(_)) => {
            return Err(PatchError::AlreadyExists {
                path: path.to_string(),
            })
        }
        (true, None) => "",
        (false, None) => {
            return Err(PatchError::NotFound {
                path: path.to_string(),
            })
        }
        (false, Some(text)) => text,
    };

    let (mut lines, had_final_newline) = split_lines(text);
    let patch_has_cr = patch
        .hunks
        .iter()
        .flat_map(|h| &h.lines)
        .any(|l| l.text().ends_with('\r'));
    let adapt_crlf = !patch_has_cr && uses_crlf(text);
    if adapt_crlf {
        // Every line that ends in "\n" ends in "\r\n"; a last line without a
        // newline keeps whatever it has.
        let terminated = if had_final_newline {
            lines.len()
        } else {
            lines.len().saturating_sub(1)
        };
        for line in lines.iter_mut().take(terminated) {
            *line = line.strip_suffix('\r').unwrap_or(line);
        }
    }
    let eol = if adapt_crlf { "\r\n" } else { "\n" };

    let index = LineIndex::new(&lines);
    let mut out: Vec<&str> = Vec::with_capacity(lines.len());
    let mut cursor = 0usize;
    let mut final_newline = had_final_newline;
    for (idx, hunk) in patch.hunks.iter().enumerate() {
        let old: Vec<&str> = hunk.old_lines().collect();
        let search = Search {
            stated: hunk.old_index(),
            cursor,
            must_end: hunk.old_no_newline || hunk.new_no_newline,
        };
        let found = if hunk.old_no_newline && had_final_newline {
            None
        } else {
            search.run(&index, &old)
        };
        let Some(pos) = found else {
            return Err(explain_failure(
                path,
                idx + 1,
                hunk,
                &lines,
                &old,
                &search,
                had_final_newline,
            ));
        };
        out.extend_from_slice(lines.get(cursor..pos).unwrap_or(&[]));
        out.extend(hunk.new_lines());
        cursor = pos + old.len();
        if cursor == lines.len() {
            final_newline = !hunk.new_no_newline;
        }
    }
    out.extend_from_slice(lines.get(cursor..).unwrap_or(&[]));

    if patch.is_deletion() {
        if out.is_empty() {
            return Ok(None);
        }
        return Err(PatchError::IncompleteDeletion {
            path: path.to_string(),
            remaining: out.len(),
        });
    }
    Ok(Some(join_lines(&out, eol, final_newline)))
}

/// Checks a (possibly hand-built) file patch for consistency.
fn validate(patch: &FilePatch) -> Result<(), PatchError> {
    let path = patch.path();
    let invalid = |detail: String| PatchError::Invalid {
        path: path.to_string(),
        detail,
    };
    match (&patch.old_path, &patch.new_path) {
        (None, None) => return Err(invalid("it has neither an old nor a new path".to_string())),
        (Some(o), Some(n)) if o != n => {
            return Err(PatchError::RenameUnsupported {
                old: o.clone(),
                new: n.clone(),
            })
        }
        (Some(_), Some(_)) if patch.hunks.is_empty() => {
            return Err(PatchError::NoHunks {
                path: path.to_string(),
            })
        }
        _ => {}
    }
    for (idx, hunk) in patch.hunks.iter().enumerate() {
        let old = hunk.old_lines().count();
        let new = hunk.new_lines().count();
        if old != hunk.old_len || new != hunk.new_len {
            return Err(invalid(format!(
                "hunk {} ({}) has {old} old and {new} new lines",
                idx + 1,
                hunk.header()
            )));
        }
        if hunk.lines.is_empty() {
            return Err(invalid(format!("hunk {} is empty", idx + 1)));
        }
        if (hunk.old_no_newline && old == 0) || (hunk.new_no_newline && new == 0) {
            return Err(invalid(format!(
                "hunk {} marks a side without lines as having no final newline",
                idx + 1
            )));
        }
    }
    check_order(path, &patch.hunks)
}

/// Splits text into lines without their `"\n"`; also says whether the text
/// ends with `"\n"` (true for empty text, which has no last line).
fn split_lines(text: &str) -> (Vec<&str>, bool) {
    if text.is_empty() {
        return (Vec::new(), true);
    }
    match text.strip_suffix('\n') {
        Some(body) => (body.split('\n').collect(), true),
        None => (text.split('\n').collect(), false),
    }
}

/// Whether the text has line endings and all of them are `"\r\n"`.
fn uses_crlf(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut lf = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            if i == 0 || bytes.get(i - 1) != Some(&b'\r') {
                return false;
            }
            lf += 1;
        }
    }
    lf > 0
}

/// Joins lines with `eol`, adding a final `eol` when asked and there are
/// lines.
fn join_lines(lines: &[&str], eol: &str, final_newline: bool) -> String {
    let size = lines.iter().map(|l| l.len() + eol.len()).sum();
    let mut text = String::with_capacity(size);
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            text.push_str(eol);
        }
        text.push_str(line);
    }
    if final_newline && !lines.is_empty() {
        text.push_str(eol);
    }
    text
}

/// The file's lines as small integers, so that comparing two lines costs
/// O(1).
struct LineIndex<'a> {
    ids: Vec<usize>,
    map: HashMap<&'a str, usize>,
}

impl<'a> LineIndex<'a> {
    fn new(lines: &[&'a str]) -> Self {
        let mut map: HashMap<&'a str, usize> = HashMap::with_capacity(lines.len());
        let ids = lines
            .iter()
            .map(|line| {
                let next = map.len();
                *map.entry(*line).or_insert(next)
            })
            .collect();
        LineIndex { ids, map }
    }

    /// The id of a hunk line; lines the file lacks get `usize::MAX`, which
    /// matches nothing.
    fn id(&self, line: &str) -> usize {
        self.map.get(line).copied().unwrap_or(usize::MAX)
    }
}

/// Where one hunk may go.
struct Search {
    /// 0-based position the header states.
    stated: usize,
    /// First position allowed: the end of the previous hunk.
    cursor: usize,
    /// The hunk must end at the end of the file (no-newline marker).
    must_end: bool,
}

impl Search {
    /// The allowed position nearest to the stated one where `old` matches,
    /// the earlier of two equally near ones first.
    fn run(&self, index: &LineIndex<'_>, old: &[&str]) -> Option<usize> {
        let n = index.ids.len();
        let m = old.len();
        let last = n.checked_sub(m)?;
        if self.cursor > last {
            return None;
        }
        let (lo, hi) = if self.must_end {
            (last, last)
        } else {
            (self.cursor, last)
        };
        let target = self.stated.clamp(lo, hi);
        if m == 0 {
            return Some(target);
        }
        let pattern: Vec<usize> = old.iter().map(|l| index.id(l)).collect();
        if pattern.contains(&usize::MAX) {
            return None;
        }
        let prefix = prefix_function(&pattern);
        let mut width = FIRST_WINDOW;
        loop {
            let a = target.saturating_sub(width).max(lo);
            let b = target.saturating_add(width).min(hi);
            let window = index.ids.get(a..b.saturating_add(m))?;
            let best = occurrences(window, &pattern, &prefix)
                .into_iter()
                .map(|p| a + p)
                .min_by_key(|&p| (p.abs_diff(target), p));
            if best.is_some() {
                return best;
            }
            if a == lo && b == hi {
                return None;
            }
            width = width.saturating_mul(2);
        }
    }
}

/// KMP failure function: for each prefix of `pattern`, the length of its
/// longest proper prefix that is also a suffix.
fn prefix_function(pattern: &[usize]) -> Vec<usize> {
    let mut table = vec![0usize; pattern.len()];
    let mut k = 0usize;
    for (i, c) in pattern.iter().enumerate().skip(1) {
        while k > 0 && pattern.get(k) != Some(c) {
            k = table.get(k - 1).copied().unwrap_or(0);
        }
        if pattern.get(k) == Some(c) {
            k += 1;
        }
        if let Some(slot) = table.get_mut(i) {
            *slot = k;
        }
    }
    table
}

/// Start positions of every occurrence of a non-empty `pattern` in `text`.
fn occurrences(text: &[usize], pattern: &[usize], prefix: &[usize]) -> Vec<usize> {
    let mut found = Vec::new();
    let mut k = 0usize;
    for (i, c) in text.iter().enumerate() {
        while k > 0 && pattern.get(k) != Some(c) {
            k = prefix.get(k - 1).copied().unwrap_or(0);
        }
        if pattern.get(k) == Some(c) {
            k += 1;
        }
        if k == pattern.len() {
            found.push(i + 1 - k);
            k = prefix.get(k - 1).copied().unwrap_or(0);
        }
    }
    found
}

/// The error for a hunk that fits nowhere: the first line that differs at
/// the stated position, or why the lines found there cannot be used.
fn explain_failure(
    path: &str,
    number: usize,
    hunk: &Hunk,
    lines: &[&str],
    old: &[&str],
    search: &Search,
    had_final_newline: bool,
) -> PatchError {
    let stated = search.stated;
    for (k, expected) in old.iter().enumerate() {
        let at = stated.saturating_add(k);
        let found = lines.get(at);
        if found != Some(expected) {
            return PatchError::HunkMismatch {
                path: path.to_string(),
                hunk: number,
                header: hunk.header(),
                line: at.saturating_add(1),
                expected: clip(expected),
                found: found.map(|f| clip(f)),
            };
        }
    }
    let end = stated.saturating_add(old.len());
    let detail = if stated < search.cursor {
        format!(
            "its lines are at line {} but that is inside or before the previous hunk, which ends at line {}, and they match nowhere after it",
            stated + 1,
            search.cursor
        )
    } else if hunk.old_no_newline && had_final_newline {
        "it says the file's last line has no final newline (`\\ No newline at end of file` on the old side), but the file ends with a newline".to_string()
    } else if search.must_end && end != lines.len() {
        format!(
            "it carries `\\ No newline at end of file`, so it must end at the file's last line ({}), but it ends at line {end}",
            lines.len()
        )
    } else {
        "no position satisfies it".to_string()
    };
    PatchError::HunkConflict {
        path: path.to_string(),
        hunk: number,
        header: hunk.header(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(s: &str) -> HunkLine {
        HunkLine::Context(s.to_string())
    }
    fn del(s: &str) -> HunkLine {
        HunkLine::Remove(s.to_string())
    }
    fn add(s: &str) -> HunkLine {
        HunkLine::Add(s.to_string())
    }
    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    /// Parses a patch that must hold exactly one file.
    fn one(text: &str) -> FilePatch {
        let mut files = parse_patch(text).unwrap();
        assert_eq!(files.len(), 1, "{files:?}");
        files.remove(0)
    }

    fn apply_text(original: Option<&str>, patch: &str) -> Result<Option<String>, PatchError> {
        apply_file(original, &one(patch))
    }

    /// (old path, new path, number of hunks) of each file patch.
    fn summary(files: &[FilePatch]) -> Vec<(Option<String>, Option<String>, usize)> {
        files
            .iter()
            .map(|f| (f.old_path.clone(), f.new_path.clone(), f.hunks.len()))
            .collect()
    }

    const GIT_MODIFY: &str = "\
diff --git a/src/lib.rs b/src/lib.rs
index 1111111..2222222 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,3 +1,3 @@ fn main() {
 one
-two
+TWO
 three
";

    const GIT_CREATE: &str = "\
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000..45b983b
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+hi
";

    const GIT_DELETE: &str = "\
diff --git a/del.txt b/del.txt
deleted file mode 100644
index b77b4eb..0000000
--- a/del.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-x
-y
";

    const GIT_EMPTY_FILES: &str = "\
diff --git a/emptydel b/emptydel
deleted file mode 100644
index e69de29..0000000
diff --git a/newempty b/newempty
new file mode 100644
index 0000000..e69de29
";

    const GIT_NO_NEWLINE: &str = "\
diff --git a/nonl.txt b/nonl.txt
index 54d55bf..2f43848 100644
--- a/nonl.txt
+++ b/nonl.txt
@@ -1,3 +1,3 @@
 one
 two
-three
\\ No newline at end of file
+THREE
";

    const FORMAT_PATCH: &str = "\
From 1234 Mon Sep 17 00:00:00 2001
From: A <a@example.com>
Subject: [PATCH] fix

Body text --- with dashes
@@ is not at the start here
---
 f.txt | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/f.txt b/f.txt
index 1..2 100644
--- a/f.txt
+++ b/f.txt
@@ -1 +1 @@
-a
+b
-- 
2.39.0

";

    #[test]
    fn parse_git_diff_full_structure() {
        let files = parse_patch(GIT_MODIFY).unwrap();
        assert_eq!(
            files,
            vec![FilePatch {
                old_path: some("src/lib.rs"),
                new_path: some("src/lib.rs"),
                hunks: vec![Hunk {
                    old_start: 1,
                    old_len: 3,
                    new_start: 1,
                    new_len: 3,
                    lines: vec![ctx("one"), del("two"), add("TWO"), ctx("three")],
                    old_no_newline: false,
                    new_no_newline: false,
                }],
            }]
        );
        assert_eq!(files[0].path(), "src/lib.rs");
        assert_eq!(files[0].hunks[0].header(), "@@ -1,3 +1,3 @@");
    }

    #[test]
    fn parse_table_of_shapes() {
        type Row = (Option<String>, Option<String>, usize);
        let cases: Vec<(&str, String, Vec<Row>)> = vec![
            (
                "git diff strips a/ b/",
                GIT_MODIFY.to_string(),
                vec![(some("src/lib.rs"), some("src/lib.rs"), 1)],
            ),
            (
                "diff -u with dates after a tab",
                "--- dir/file.txt\t2024-01-01 10:00:00.000000000 +0000\n\
                 +++ dir/file.txt\t2024-01-02 10:00:00.000000000 +0000\n\
                 @@ -2 +2 @@\n-b\n+c\n"
                    .to_string(),
                vec![(some("dir/file.txt"), some("dir/file.txt"), 1)],
            ),
            (
                "absolute paths stay as written",
                "--- /etc/x.conf\n+++ /etc/x.conf\n@@ -1 +1 @@\n-a\n+b\n".to_string(),
                vec![(some("/etc/x.conf"), some("/etc/x.conf"), 1)],
            ),
            (
                "a/ alone is not stripped when the new side lacks b/",
                "--- a/x\n+++ a/x\n@@ -1 +1 @@\n-a\n+b\n".to_string(),
                vec![(some("a/x"), some("a/x"), 1)],
            ),
            (
                "multi-file",
                format!(
                    "{GIT_MODIFY}{GIT_DELETE}--- other.txt\n+++ other.txt\n@@ -1,2 +1,2 @@\n-p\n+q\n r\n"
                ),
                vec![
                    (some("src/lib.rs"), some("src/lib.rs"), 1),
                    (some("del.txt"), None, 1),
                    (some("other.txt"), some("other.txt"), 1),
                ],
            ),
            (
                "creation",
                GIT_CREATE.to_string(),
                vec![(None, some("new.txt"), 1)],
            ),
            (
                "deletion",
                GIT_DELETE.to_string(),
                vec![(some("del.txt"), None, 1)],
            ),
            (
                "empty-file creation and deletion without ---/+++",
                GIT_EMPTY_FILES.to_string(),
                vec![(some("emptydel"), None, 0), (None, some("newempty"), 0)],
            ),
            (
                "plain empty-file creation",
                "--- /dev/null\n+++ b/empty.txt\n".to_string(),
                vec![(None, some("empty.txt"), 0)],
            ),
            (
                "commit message, diffstat and signature are ignored",
                FORMAT_PATCH.to_string(),
                vec![(some("f.txt"), some("f.txt"), 1)],
            ),
            (
                "svn Index: header and tab-separated revisions",
                "Index: f.txt\n=========\n--- f.txt\t(revision 1)\n+++ f.txt\t(working copy)\n@@ -1 +1 @@\n-a\n+b\n"
                    .to_string(),
                vec![(some("f.txt"), some("f.txt"), 1)],
            ),
            (
                "git mode-only change is skipped",
                format!("diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n{GIT_CREATE}"),
                vec![(None, some("new.txt"), 1)],
            ),
            (
                "quoted non-ASCII path",
                "--- \"a/\\303\\244 x.txt\"\n+++ \"b/\\303\\244 x.txt\"\n@@ -1 +1 @@\n-a\n+b\n".to_string(),
                vec![(some("ä x.txt"), some("ä x.txt"), 1)],
            ),
            (
                "blank lines between hunks and files",
                "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n\n@@ -5 +5 @@\n-c\n+d\n\n\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-a\n+b\n"
                    .to_string(),
                vec![(some("f"), some("f"), 2), (some("g"), some("g"), 1)],
            ),
        ];
        for (name, input, expected) in cases {
            let got = parse_patch(&input).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(summary(&got), expected, "{name}");
        }
    }

    #[test]
    fn parse_no_newline_markers() {
        let hunk = one(GIT_NO_NEWLINE).hunks.remove(0);
        assert_eq!(
            hunk.lines,
            vec![ctx("one"), ctx("two"), del("three"), add("THREE")]
        );
        assert!(hunk.old_no_newline);
        assert!(!hunk.new_no_newline);

        let new_side = one("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n\\ No newline at end of file\n");
        assert_eq!(
            (
                new_side.hunks[0].old_no_newline,
                new_side.hunks[0].new_no_newline
            ),
            (false, true)
        );

        let both = one(
            "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+b\n z\n\\ Kein Zeilenumbruch am Dateiende.\n",
        );
        assert_eq!(
            (both.hunks[0].old_no_newline, both.hunks[0].new_no_newline),
            (true, true)
        );
    }

    #[test]
    fn parse_blank_line_is_empty_context() {
        let f = one("--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n");
        assert_eq!(
            f.hunks[0].lines,
            vec![ctx("a"), ctx(""), del("b"), add("c")]
        );
    }

    #[test]
    fn parse_crlf_patch_keeps_cr_in_lines_not_paths() {
        let f = one("--- a/f\r\n+++ b/f\r\n@@ -1 +1 @@\r\n-a\r\n+b\r\n");
        assert_eq!(f.path(), "f");
        assert_eq!(f.hunks[0].lines, vec![del("a\r"), add("b\r")]);
    }

    #[test]
    fn parse_hunk_header_forms() {
        assert_eq!(parse_hunk_header("@@ -3 +4 @@"), Some((3, 1, 4, 1)));
        assert_eq!(parse_hunk_header("@@ -0,0 +1,2 @@"), Some((0, 0, 1, 2)));
        assert_eq!(
            parse_hunk_header("@@ -1,2 +1,3 @@ fn x()"),
            Some((1, 2, 1, 3))
        );
        assert_eq!(parse_hunk_header("@@ -+1 +1 @@"), None);
        assert_eq!(parse_hunk_header("@@ -1 +1"), None);
        assert_eq!(parse_hunk_header("@@ -1, +1 @@"), None);
        assert_eq!(parse_hunk_header("@@ -99999999999999999999999 +1 @@"), None);
        assert_eq!(parse_hunk_header("@@@ -1 -1 +1 @@@"), None);
    }

    #[test]
    fn parse_error_table() {
        let hunk_err =
            |line: usize, header: &str, hunk: usize, detail: &str| PatchError::HunkLength {
                path: "f".to_string(),
                hunk,
                header: header.to_string(),
                line,
                detail: detail.to_string(),
            };
        let cases: Vec<(&str, String, PatchError)> = vec![
            ("empty input", String::new(), PatchError::NoFileChanges),
            ("blank input", "\n  \n\n".to_string(), PatchError::NoFileChanges),
            (
                "garbage",
                "hello world\nthis is not a diff\n--- just dashes\n".to_string(),
                PatchError::NoFileChanges,
            ),
            (
                "mode change only",
                "diff --git a/x b/x\nold mode 100644\nnew mode 100755\n".to_string(),
                PatchError::NoFileChanges,
            ),
            (
                "hunk without headers",
                "@@ -1 +1 @@\n-a\n+b\n".to_string(),
                PatchError::HunkOutsideFile {
                    line: 1,
                    text: "@@ -1 +1 @@".to_string(),
                },
            ),
            (
                "hunk after free text following a file",
                "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\nthen some prose\n@@ -5 +5 @@\n-c\n+d\n".to_string(),
                PatchError::HunkOutsideFile {
                    line: 7,
                    text: "@@ -5 +5 @@".to_string(),
                },
            ),
            (
                "git block missing ---/+++",
                "diff --git a/x b/x\nindex 1..2\n@@ -1 +1 @@\n-a\n+b\n".to_string(),
                PatchError::HunkOutsideFile {
                    line: 3,
                    text: "@@ -1 +1 @@".to_string(),
                },
            ),
            (
                "git pure rename",
                "diff --git a/mv.txt b/moved.txt\nsimilarity index 100%\nrename from mv.txt\nrename to moved.txt\n"
                    .to_string(),
                PatchError::RenameUnsupported {
                    old: "mv.txt".to_string(),
                    new: "moved.txt".to_string(),
                },
            ),
            (
                "git rename with edits",
                "diff --git a/a.txt b/b.txt\nsimilarity index 80%\nrename from a.txt\nrename to b.txt\n--- a/a.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-a\n+b\n"
                    .to_string(),
                PatchError::RenameUnsupported {
                    old: "a.txt".to_string(),
                    new: "b.txt".to_string(),
                },
            ),
            (
                "plain rename",
                "--- a/old.txt\n+++ b/new.txt\n@@ -1 +1 @@\n-a\n+b\n".to_string(),
                PatchError::RenameUnsupported {
                    old: "old.txt".to_string(),
                    new: "new.txt".to_string(),
                },
            ),
            (
                "git copy",
                "diff --git a/a b/c\nsimilarity index 100%\ncopy from a\ncopy to c\n".to_string(),
                PatchError::RenameUnsupported {
                    old: "a".to_string(),
                    new: "c".to_string(),
                },
            ),
            (
                "body shorter than header before next hunk",
                "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n@@ -10 +10 @@\n-x\n+y\n".to_string(),
                hunk_err(
                    7,
                    "@@ -1,3 +1,3 @@",
                    1,
                    "the body ends after 2 old and 2 new lines but the header says 3 old and 3 new",
                ),
            ),
            (
                "body shorter than header at end of text",
                "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n".to_string(),
                hunk_err(
                    4,
                    "@@ -1,2 +1,2 @@",
                    1,
                    "the body ends after 1 old and 1 new lines but the header says 2 old and 2 new",
                ),
            ),
            (
                "body longer than header",
                "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n d\n".to_string(),
                hunk_err(
                    7,
                    "@@ -1,2 +1,2 @@",
                    1,
                    "the hunk goes on after the header's counts (2 old, 2 new lines) are used up",
                ),
            ),
            (
                "one side over its count",
                "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n@@ -5,1 +5,2 @@\n a\n b\n+c\n".to_string(),
                hunk_err(
                    8,
                    "@@ -5,1 +5,2 @@",
                    2,
                    "this line is on the old side but the header's old count (1) is already used up",
                ),
            ),
            (
                "empty hunk",
                "--- a/f\n+++ b/f\n@@ -1,0 +1,0 @@\n".to_string(),
                hunk_err(3, "@@ -1,0 +1,0 @@", 1, "the hunk is empty (both counts are 0)"),
            ),
            (
                "malformed hunk header",
                "--- a/f\n+++ b/f\n@@ -a +1 @@\n-a\n".to_string(),
                PatchError::BadHunkHeader {
                    path: "f".to_string(),
                    line: 3,
                    text: "@@ -a +1 @@".to_string(),
                },
            ),
            (
                "body lines without @@ in a creation",
                "--- /dev/null\n+++ b/x\n+hello\n".to_string(),
                PatchError::BadHunkHeader {
                    path: "x".to_string(),
                    line: 3,
                    text: "+hello".to_string(),
                },
            ),
            (
                "change without hunks",
                "--- a/f\n+++ b/f\n".to_string(),
                PatchError::NoHunks {
                    path: "f".to_string(),
                },
            ),
            (
                "same path twice",
                "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n--- a/f\n+++ b/f\n@@ -3 +3 @@\n-c\n+d\n".to_string(),
                PatchError::DuplicatePath {
                    path: "f".to_string(),
                },
            ),
            (
                "deletion and creation of the same path",
                format!("{GIT_DELETE}--- /dev/null\n+++ b/del.txt\n@@ -0,0 +1 @@\n+z\n"),
                PatchError::DuplicatePath {
                    path: "del.txt".to_string(),
                },
            ),
            (
                "empty path",
                "--- a/\n+++ b/\n@@ -1 +1 @@\n-a\n+b\n".to_string(),
                PatchError::EmptyPath { line: 1 },
            ),
            (
                "empty path without prefix",
                "--- \n+++ \n@@ -1 +1 @@\n-a\n+b\n".to_string(),
                PatchError::EmptyPath { line: 1 },
            ),
            (
                "NUL in path",
                "--- \"a/x\\000y\"\n+++ \"b/x\\000y\"\n@@ -1 +1 @@\n-a\n+b\n".to_string(),
                PatchError::NulInPath { line: 1 },
            ),
            (
                "unterminated quoted path",
                "--- \"a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n".to_string(),
                PatchError::BadQuotedPath {
                    line: 1,
                    text: "\"a/x".to_string(),
                },
            ),
            (
                "both /dev/null",
                "--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+a\n".to_string(),
                PatchError::BothDevNull { line: 1 },
            ),
            (
                "binary",
                "diff --git a/i.png b/i.png\nindex 1..2 100644\nBinary files a/i.png and b/i.png differ\n".to_string(),
                PatchError::BinaryUnsupported { line: 3 },
            ),
            (
                "hunks out of order",
                "--- a/f\n+++ b/f\n@@ -5,2 +5,2 @@\n-a\n+b\n c\n@@ -1 +1 @@\n-x\n+y\n".to_string(),
                PatchError::HunksOutOfOrder {
                    path: "f".to_string(),
                    hunk: 2,
                    header: "@@ -1,1 +1,1 @@".to_string(),
                    previous: "@@ -5,2 +5,2 @@".to_string(),
                },
            ),
            (
                "overlapping hunks",
                "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n@@ -3 +3 @@\n-c\n+C\n".to_string(),
                PatchError::HunksOutOfOrder {
                    path: "f".to_string(),
                    hunk: 2,
                    header: "@@ -3,1 +3,1 @@".to_string(),
                    previous: "@@ -1,3 +1,3 @@".to_string(),
                },
            ),
            (
                "marker followed by more of its side",
                "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n\\ No newline at end of file\n b\n".to_string(),
                PatchError::MisplacedNoNewline {
                    path: "f".to_string(),
                    hunk: 1,
                    line: 6,
                },
            ),
            (
                "marker before any line",
                "--- a/f\n+++ b/f\n@@ -1 +1 @@\n\\ No newline at end of file\n-a\n+b\n".to_string(),
                PatchError::MisplacedNoNewline {
                    path: "f".to_string(),
                    hunk: 1,
                    line: 4,
                },
            ),
        ];
        for (name, input, expected) in cases {
            assert_eq!(parse_patch(&input), Err(expected), "{name}");
        }
    }

    #[test]
    fn parse_error_messages_name_file_hunk_and_header() {
        let err =
            parse_patch("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n@@ -4,3 +4,3 @@\n a\n-b\n+c\n")
                .unwrap_err();
        assert_eq!(
            err.to_string(),
            "f: hunk 2 (@@ -4,3 +4,3 @@), patch line 9: the body ends after 2 old and 2 new \
             lines but the header says 3 old and 3 new; make the counts in the @@ header match \
             the hunk body (old side = context and removed lines, new side = context and added lines)"
        );
        assert_eq!(
            parse_patch("").unwrap_err().to_string(),
            "no file changes found in the patch; give a unified diff with ---/+++ headers and @@ hunks"
        );
        let rename = parse_patch("--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n").unwrap_err();
        assert!(
            rename
                .to_string()
                .contains("renames are not supported, so write the new file and delete the old one in two file patches"),
            "{rename}"
        );
    }

    #[test]
    fn parse_limits() {
        let mut many = String::new();
        for i in 0..=MAX_FILE_PATCHES {
            many.push_str(&format!("--- /dev/null\n+++ b/f{i}\n"));
        }
        assert_eq!(
            parse_patch(&many),
            Err(PatchError::TooManyFiles {
                limit: MAX_FILE_PATCHES
            })
        );
        let mut exactly = String::new();
        for i in 0..MAX_FILE_PATCHES {
            exactly.push_str(&format!("--- /dev/null\n+++ b/f{i}\n"));
        }
        assert_eq!(parse_patch(&exactly).unwrap().len(), MAX_FILE_PATCHES);

        let n = MAX_HUNK_LINES + 1;
        let mut long = format!("--- /dev/null\n+++ b/big\n@@ -0,0 +1,{n} @@\n");
        for _ in 0..n {
            long.push_str("+x\n");
        }
        assert_eq!(
            parse_patch(&long),
            Err(PatchError::TooManyLines {
                limit: MAX_HUNK_LINES
            })
        );
    }

    // ------------------------------------------------------------------
    // Applying
    // ------------------------------------------------------------------

    const TEN: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";
    const CHANGE_5: &str = "--- a/n\n+++ b/n\n@@ -4,3 +4,3 @@\n 4\n-5\n+five\n 6\n";

    #[test]
    fn apply_at_stated_position() {
        assert_eq!(
            apply_text(Some(TEN), CHANGE_5).unwrap().as_deref(),
            Some("1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n")
        );
    }

    #[test]
    fn apply_at_offset_positions() {
        let later = format!("a\nb\nc\n{TEN}");
        assert_eq!(
            apply_text(Some(&later), CHANGE_5).unwrap().as_deref(),
            Some("a\nb\nc\n1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n")
        );
        let earlier = "4\n5\n6\n7\n";
        assert_eq!(
            apply_text(Some(earlier), CHANGE_5).unwrap().as_deref(),
            Some("4\nfive\n6\n7\n")
        );
    }

    #[test]
    fn apply_nearest_match_and_tie_takes_earlier() {
        // Stated at line 3 ("b"); X at lines 2 and 4 are equally near.
        let tie = "--- a/f\n+++ b/f\n@@ -3 +3 @@\n-X\n+Y\n";
        assert_eq!(
            apply_text(Some("a\nX\nb\nX\nc\n"), tie).unwrap().as_deref(),
            Some("a\nY\nb\nX\nc\n")
        );
        // Stated at line 5: X at line 6 is nearer than X at line 1.
        let near = "--- a/f\n+++ b/f\n@@ -5 +5 @@\n-X\n+Y\n";
        assert_eq!(
            apply_text(Some("X\na\nb\nc\nd\nX\nq\n"), near)
                .unwrap()
                .as_deref(),
            Some("X\na\nb\nc\nd\nY\nq\n")
        );
    }

    #[test]
    fn apply_mismatch_message() {
        let patch = "--- a/n\n+++ b/n\n@@ -4,3 +4,3 @@\n 4\n-FIVE\n+five\n 6\n";
        let err = apply_text(Some(TEN), patch).unwrap_err();
        assert_eq!(
            err,
            PatchError::HunkMismatch {
                path: "n".to_string(),
                hunk: 1,
                header: "@@ -4,3 +4,3 @@".to_string(),
                line: 5,
                expected: "FIVE".to_string(),
                found: some("5"),
            }
        );
        assert_eq!(
            err.to_string(),
            "n: hunk 1 (@@ -4,3 +4,3 @@) does not apply: at line 5 it expects \"FIVE\" but the \
             file has \"5\", and its lines match nowhere else after the previous hunk; re-read \
             the file and regenerate the hunk from its current lines"
        );
    }

    #[test]
    fn apply_mismatch_past_end_and_long_lines() {
        let err = apply_text(Some("a\n"), "--- a/f\n+++ b/f\n@@ -7 +7 @@\n-zz\n+y\n").unwrap_err();
        assert_eq!(
            err,
            PatchError::HunkMismatch {
                path: "f".to_string(),
                hunk: 1,
                header: "@@ -7,1 +7,1 @@".to_string(),
                line: 7,
                expected: "zz".to_string(),
                found: None,
            }
        );
        assert!(err
            .to_string()
            .contains("the file has no line there (end of file)"));

        let long_file = format!("{}\n", "x".repeat(300));
        let long_patch = format!("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-{}\n+b\n", "y".repeat(300));
        match apply_text(Some(&long_file), &long_patch).unwrap_err() {
            PatchError::HunkMismatch {
                expected, found, ..
            } => {
                assert_eq!(expected, format!("{}…", "y".repeat(120)));
                assert_eq!(found, Some(format!("{}…", "x".repeat(120))));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn apply_two_hunks_in_order() {
        let patch = "--- a/n\n+++ b/n\n@@ -2 +2 @@\n-2\n+two\n@@ -9,2 +9,3 @@\n 9\n+9.5\n 10\n";
        assert_eq!(
            apply_text(Some(TEN), patch).unwrap().as_deref(),
            Some("1\ntwo\n3\n4\n5\n6\n7\n8\n9\n9.5\n10\n")
        );
    }

    #[test]
    fn apply_refuses_hunk_inside_previous_hunk() {
        // Hunk 1 lands one line later than stated, so hunk 2's stated line is
        // now inside it.
        let patch = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n x\n-y\n+Y\n@@ -3 +3 @@\n-y\n+w\n";
        let err = apply_text(Some("q\nx\ny\nz\n"), patch).unwrap_err();
        let PatchError::HunkConflict { hunk, detail, .. } = err else {
            panic!("unexpected {err:?}");
        };
        assert_eq!(hunk, 2);
        assert_eq!(
            detail,
            "its lines are at line 3 but that is inside or before the previous hunk, which ends at line 3, and they match nowhere after it"
        );

        // Never searches before the end of the previous hunk.
        let patch = "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-m\n+M\n@@ -3 +3 @@\n-X\n+Y\n";
        assert_eq!(
            apply_text(Some("X\nm\nn\n"), patch),
            Err(PatchError::HunkMismatch {
                path: "f".to_string(),
                hunk: 2,
                header: "@@ -3,1 +3,1 @@".to_string(),
                line: 3,
                expected: "X".to_string(),
                found: some("n"),
            })
        );
    }

    #[test]
    fn apply_refuses_out_of_order_hand_built_hunks() {
        let hunk = |start: usize, old: &str, new: &str| Hunk {
            old_start: start,
            old_len: 1,
            new_start: start,
            new_len: 1,
            lines: vec![del(old), add(new)],
            old_no_newline: false,
            new_no_newline: false,
        };
        let patch = FilePatch {
            old_path: some("f"),
            new_path: some("f"),
            hunks: vec![hunk(3, "c", "C"), hunk(1, "a", "A")],
        };
        assert_eq!(
            apply_file(Some("a\nb\nc\n"), &patch),
            Err(PatchError::HunksOutOfOrder {
                path: "f".to_string(),
                hunk: 2,
                header: "@@ -1,1 +1,1 @@".to_string(),
                previous: "@@ -3,1 +3,1 @@".to_string(),
            })
        );
        let mut bad_count = patch.clone();
        bad_count.hunks = vec![hunk(1, "a", "A")];
        bad_count.hunks[0].old_len = 2;
        assert_eq!(
            apply_file(Some("a\n"), &bad_count),
            Err(PatchError::Invalid {
                path: "f".to_string(),
                detail: "hunk 1 (@@ -1,2 +1,1 @@) has 1 old and 1 new lines".to_string(),
            })
        );
    }

    #[test]
    fn apply_final_newline_cases() {
        let cases: Vec<(&str, &str, &str, &str)> = vec![
            (
                "original without final newline, hunk away from the end keeps it",
                "a\nb",
                "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+A\n",
                "A\nb",
            ),
            (
                "new side drops the final newline",
                "a\nb\n",
                "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n+B\n\\ No newline at end of file\n",
                "a\nB",
            ),
            (
                "old side had none, new side adds it",
                "a\nb",
                "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n\\ No newline at end of file\n+b\n",
                "a\nb\n",
            ),
            (
                "context line without newline on both sides",
                "a\nb",
                "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n\\ No newline at end of file\n",
                "A\nb",
            ),
            (
                "git example",
                "one\ntwo\nthree",
                GIT_NO_NEWLINE,
                "one\ntwo\nTHREE\n",
            ),
            (
                "append after a last line without newline",
                "a",
                "--- a/f\n+++ b/f\n@@ -1,0 +2 @@\n+b\n",
                "a\nb\n",
            ),
            (
                "hunk reaching the end without markers gives a final newline",
                "a\nb",
                "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n+B\n",
                "a\nB\n",
            ),
        ];
        for (name, original, patch, expected) in cases {
            assert_eq!(
                apply_text(Some(original), patch).unwrap_or_else(|e| panic!("{name}: {e}")),
                Some(expected.to_string()),
                "{name}"
            );
        }
    }

    #[test]
    fn apply_no_newline_marker_conflicts() {
        let patch = "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n\\ No newline at end of file\n+b\n";
        assert_eq!(
            apply_text(Some("a\nb\n"), patch),
            Err(PatchError::HunkConflict {
                path: "f".to_string(),
                hunk: 1,
                header: "@@ -2,1 +2,1 @@".to_string(),
                detail: "it says the file's last line has no final newline (`\\ No newline at end of file` on the old side), but the file ends with a newline".to_string(),
            })
        );
        let patch = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+A\n\\ No newline at end of file\n";
        assert_eq!(
            apply_text(Some("a\nb\nc\n"), patch),
            Err(PatchError::HunkConflict {
                path: "f".to_string(),
                hunk: 1,
                header: "@@ -1,1 +1,1 @@".to_string(),
                detail: "it carries `\\ No newline at end of file`, so it must end at the file's last line (3), but it ends at line 1".to_string(),
            })
        );
    }

    #[test]
    fn apply_crlf() {
        // Whole-CRLF file, LF patch: matched without "\r", written with CRLF.
        let lf_patch = "--- a/f\n+++ b/f\n@@ -1,3 +1,4 @@\n a\n-b\n+B\n+B2\n c\n";
        assert_eq!(
            apply_text(Some("a\r\nb\r\nc\r\n"), lf_patch)
                .unwrap()
                .as_deref(),
            Some("a\r\nB\r\nB2\r\nc\r\n")
        );
        // CRLF patch as git writes it for a CRLF file: exact.
        let crlf_patch = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\r\n-b\r\n+B\r\n c\r\n";
        assert_eq!(
            apply_text(Some("a\r\nb\r\nc\r\n"), crlf_patch)
                .unwrap()
                .as_deref(),
            Some("a\r\nB\r\nc\r\n")
        );
        // CRLF file without final newline.
        let end = "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n\\ No newline at end of file\n+B\n\\ No newline at end of file\n";
        assert_eq!(
            apply_text(Some("a\r\nb"), end).unwrap().as_deref(),
            Some("a\r\nB")
        );
        // Mixed endings: exact comparison, so the "\r" shows in the error.
        let err = apply_text(
            Some("a\r\nb\nc\r\n"),
            "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+A\n",
        )
        .unwrap_err();
        assert_eq!(
            err,
            PatchError::HunkMismatch {
                path: "f".to_string(),
                hunk: 1,
                header: "@@ -1,1 +1,1 @@".to_string(),
                line: 1,
                expected: "a".to_string(),
                found: some("a\r"),
            }
        );
        assert!(err.to_string().contains("the file has \"a\\r\""), "{err}");
        // LF file keeps LF.
        assert_eq!(
            apply_text(Some("a\nb\n"), "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n+B\n")
                .unwrap()
                .as_deref(),
            Some("a\nB\n")
        );
    }

    #[test]
    fn apply_deletion() {
        assert_eq!(apply_text(Some("x\ny\n"), GIT_DELETE), Ok(None));
        assert_eq!(
            apply_text(Some("x\ny\nz\n"), GIT_DELETE),
            Err(PatchError::IncompleteDeletion {
                path: "del.txt".to_string(),
                remaining: 1,
            })
        );
        assert_eq!(
            apply_text(None, GIT_DELETE),
            Err(PatchError::NotFound {
                path: "del.txt".to_string()
            })
        );
        let files = parse_patch(GIT_EMPTY_FILES).unwrap();
        assert_eq!(apply_file(Some(""), &files[0]), Ok(None));
        assert_eq!(
            apply_file(Some("z\n"), &files[0]),
            Err(PatchError::IncompleteDeletion {
                path: "emptydel".to_string(),
                remaining: 1,
            })
        );
    }

    #[test]
    fn apply_creation() {
        assert_eq!(apply_text(None, GIT_CREATE), Ok(some("hi\n")));
        assert_eq!(
            apply_text(Some(""), GIT_CREATE),
            Err(PatchError::AlreadyExists {
                path: "new.txt".to_string()
            })
        );
        let files = parse_patch(GIT_EMPTY_FILES).unwrap();
        assert_eq!(apply_file(None, &files[1]), Ok(some("")));
        assert_eq!(
            apply_file(Some("old\n"), &files[1]),
            Err(PatchError::AlreadyExists {
                path: "newempty".to_string()
            })
        );
        assert_eq!(
            apply_text(
                None,
                "--- /dev/null\n+++ b/x\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n"
            ),
            Ok(some("a\nb"))
        );
    }

    #[test]
    fn apply_to_missing_file_is_refused() {
        let err = apply_text(None, CHANGE_5).unwrap_err();
        assert_eq!(
            err,
            PatchError::NotFound {
                path: "n".to_string()
            }
        );
        assert_eq!(
            err.to_string(),
            "n does not exist; to create it use `--- /dev/null` as the old path, otherwise check the path"
        );
    }

    #[test]
    fn apply_pure_insertions() {
        assert_eq!(
            apply_text(
                Some("a\nb\nc\n"),
                "--- a/f\n+++ b/f\n@@ -2,0 +3,2 @@\n+x\n+y\n"
            ),
            Ok(some("a\nb\nx\ny\nc\n"))
        );
        assert_eq!(
            apply_text(Some("a\n"), "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+z\n"),
            Ok(some("z\na\n"))
        );
        assert_eq!(
            apply_text(Some(""), "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+z\n"),
            Ok(some("z\n"))
        );
        // Stated past the end: clamped to the end.
        assert_eq!(
            apply_text(Some("a\n"), "--- a/f\n+++ b/f\n@@ -9,0 +10 @@\n+z\n"),
            Ok(some("a\nz\n"))
        );
    }

    #[test]
    fn apply_large_file_is_linear() {
        // Many equal lines would make a naive search quadratic.
        let mut file = "x\n".repeat(100_000);
        file.push_str("y\n");
        file.push_str(&"x\n".repeat(100_000));
        let mut patch = String::from("--- a/f\n+++ b/f\n@@ -1,2002 +1,2002 @@\n");
        for _ in 0..1000 {
            patch.push_str(" x\n");
        }
        patch.push_str("-y\n+Y\n");
        for _ in 0..1000 {
            patch.push_str(" x\n");
        }
        patch.push_str(" y\n");
        let err = apply_text(Some(&file), &patch).unwrap_err();
        assert!(
            matches!(err, PatchError::HunkMismatch { line: 1001, .. }),
            "{err:?}"
        );

        // Found far from the stated line.
        let found = patch.replace("@@ -1,2002 +1,2002 @@", "@@ -1,2001 +1,2001 @@");
        let found = found.strip_suffix(" y\n").unwrap();
        let out = apply_text(Some(&file), found).unwrap().unwrap();
        assert_eq!(out.len(), file.len());
        assert_eq!(out.find('Y'), Some(200_000));
    }

    // ------------------------------------------------------------------
    // Round trips
    // ------------------------------------------------------------------

    #[test]
    fn round_trip_hand_written() {
        let cases: Vec<(&str, &str, &str)> = vec![
            (
                "fn main() {\n    println!(\"hi\");\n}\n",
                "--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1,3 +1,4 @@\n fn main() {\n-    println!(\"hi\");\n+    let name = \"loom\";\n+    println!(\"hi {name}\");\n }\n",
                "fn main() {\n    let name = \"loom\";\n    println!(\"hi {name}\");\n}\n",
            ),
            (
                "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\n",
                "--- a/g\n+++ b/g\n@@ -1,2 +1,2 @@\n-alpha\n+ALPHA\n beta\n@@ -6,3 +6,2 @@\n zeta\n-eta\n theta\n",
                "ALPHA\nbeta\ngamma\ndelta\nepsilon\nzeta\ntheta\n",
            ),
            (
                "",
                "--- a/e\n+++ b/e\n@@ -0,0 +1,2 @@\n+first\n+\n",
                "first\n\n",
            ),
            (
                "keep\ndrop\n",
                "--- a/d\n+++ b/d\n@@ -1,2 +1 @@\n keep\n-drop\n",
                "keep\n",
            ),
        ];
        for (original, patch, expected) in cases {
            assert_eq!(
                apply_text(Some(original), patch),
                Ok(some(expected)),
                "{patch}"
            );
        }
    }

    #[derive(Clone, Copy)]
    enum Op {
        Keep(usize),
        Del(usize),
        Ins(usize),
    }

    /// Lines with whether each ends with a newline.
    fn lines_of(text: &str) -> Vec<(&str, bool)> {
        let (lines, final_newline) = split_lines(text);
        let n = lines.len();
        lines
            .into_iter()
            .enumerate()
            .map(|(k, l)| (l, k + 1 < n || final_newline))
            .collect()
    }

    /// A unified diff from `old` to `new` (LCS-based) with `context` lines.
    fn make_diff(old: &str, new: &str, context: usize) -> String {
        let a = lines_of(old);
        let b = lines_of(new);
        let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for i in (0..a.len()).rev() {
            for j in (0..b.len()).rev() {
                lcs[i][j] = if a[i] == b[j] {
                    lcs[i + 1][j + 1] + 1
                } else {
                    lcs[i + 1][j].max(lcs[i][j + 1])
                };
            }
        }
        let mut ops = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            if i < a.len() && j < b.len() && a[i] == b[j] {
                ops.push(Op::Keep(i));
                i += 1;
                j += 1;
            } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
                ops.push(Op::Del(i));
                i += 1;
            } else {
                ops.push(Op::Ins(j));
                j += 1;
            }
        }
        let changed: Vec<usize> = (0..ops.len())
            .filter(|&k| !matches!(ops[k], Op::Keep(_)))
            .collect();
        let is_old = |op: &Op| !matches!(op, Op::Ins(_));
        let is_new = |op: &Op| !matches!(op, Op::Del(_));
        let mut out = String::from("--- a/f\n+++ b/f\n");
        let mut k = 0;
        while k < changed.len() {
            let first = changed[k];
            let mut last = first;
            while k + 1 < changed.len() && changed[k + 1] - last - 1 <= 2 * context {
                k += 1;
                last = changed[k];
            }
            k += 1;
            let start = first.saturating_sub(context);
            let end = (last + context + 1).min(ops.len());
            let old_before = ops[..start].iter().filter(|o| is_old(o)).count();
            let new_before = ops[..start].iter().filter(|o| is_new(o)).count();
            let old_len = ops[start..end].iter().filter(|o| is_old(o)).count();
            let new_len = ops[start..end].iter().filter(|o| is_new(o)).count();
            let old_start = if old_len == 0 {
                old_before
            } else {
                old_before + 1
            };
            let new_start = if new_len == 0 {
                new_before
            } else {
                new_before + 1
            };
            out.push_str(&format!(
                "@@ -{old_start},{old_len} +{new_start},{new_len} @@\n"
            ));
            for op in &ops[start..end] {
                let (mark, (text, newline)) = match *op {
                    Op::Keep(i) => (' ', a[i]),
                    Op::Del(i) => ('-', a[i]),
                    Op::Ins(j) => ('+', b[j]),
                };
                out.push(mark);
                out.push_str(text);
                out.push('\n');
                if !newline {
                    out.push_str("\\ No newline at end of file\n");
                }
            }
        }
        out
    }

    /// Small deterministic pseudo-random texts.
    fn random_text(seed: &mut u64) -> String {
        let mut next = || {
            *seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (*seed >> 33) as usize
        };
        let words = ["a", "b", "c", "d", "", "a b"];
        let n = next() % 9;
        let mut text = String::new();
        for k in 0..n {
            text.push_str(words[next() % words.len()]);
            if k + 1 < n || next() % 3 != 0 {
                text.push('\n');
            }
        }
        text
    }

    #[test]
    fn round_trip_generated_diffs() {
        let mut seed = 42u64;
        let mut checked = 0;
        for _ in 0..400 {
            let old = random_text(&mut seed);
            let new = random_text(&mut seed);
            if old == new {
                continue;
            }
            for context in [0, 1, 3] {
                let diff = make_diff(&old, &new, context);
                let got = parse_patch(&diff)
                    .and_then(|files| apply_file(Some(&old), &files[0]))
                    .unwrap_or_else(|e| panic!("{old:?} -> {new:?}\n{diff}\n{e}"));
                assert_eq!(
                    got.as_deref(),
                    Some(new.as_str()),
                    "{old:?} -> {new:?}\n{diff}"
                );
                checked += 1;
            }
        }
        assert!(checked > 900, "{checked}");
    }

    #[test]
    fn git_line_paths_forms() {
        assert_eq!(
            git_line_paths("a/x y b/x y"),
            Some(("a/x y".to_string(), "b/x y".to_string()))
        );
        assert_eq!(
            git_line_paths("\"a/\\303\\244\" \"b/\\303\\244\""),
            Some(("a/ä".to_string(), "b/ä".to_string()))
        );
        assert_eq!(
            git_line_paths("a/old b/new"),
            Some(("a/old".to_string(), "b/new".to_string()))
        );
        assert_eq!(git_line_paths("nonsense"), None);
        let quoted_empty = "diff --git \"a/\\303\\244\" \"b/\\303\\244\"\nnew file mode 100644\n";
        assert_eq!(
            summary(&parse_patch(quoted_empty).unwrap()),
            vec![(None, some("ä"), 0)]
        );
        assert_eq!(
            parse_patch("diff --git nonsense\nnew file mode 100644\n"),
            Err(PatchError::BadGitHeader { line: 1 })
        );
    }

    #[test]
    fn mangled_patches_never_panic() {
        let seeds = [
            GIT_MODIFY,
            GIT_CREATE,
            GIT_DELETE,
            GIT_EMPTY_FILES,
            GIT_NO_NEWLINE,
            FORMAT_PATCH,
            CHANGE_5,
        ];
        let originals = [
            None,
            Some(""),
            Some("a\n"),
            Some(TEN),
            Some("one\ntwo\nthree"),
        ];
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize
        };
        let junk = [
            "",
            "\\",
            "@@",
            "@@ -0 +0 @@",
            "-",
            "+",
            " ",
            "\r",
            "\"",
            "é",
            "--- ",
            "+++ /dev/null",
        ];
        for round in 0..2000 {
            let base = seeds[round % seeds.len()];
            let mut lines: Vec<String> = base.split('\n').map(str::to_string).collect();
            for _ in 0..=next() % 3 {
                let k = next() % lines.len();
                match next() % 4 {
                    0 => {
                        lines.remove(k);
                    }
                    1 => lines.insert(k, junk[next() % junk.len()].to_string()),
                    2 => {
                        let cut = lines[k].char_indices().map(|(i, _)| i).nth(next() % 4);
                        if let Some(cut) = cut {
                            lines[k].truncate(cut);
                        }
                    }
                    _ => lines[k].push_str(junk[next() % junk.len()]),
                }
                if lines.is_empty() {
                    break;
                }
            }
            let text = lines.join("\n");
            if let Ok(files) = parse_patch(&text) {
                for file in &files {
                    for original in originals {
                        let _ = apply_file(original, file);
                    }
                }
            }
        }
    }
}
