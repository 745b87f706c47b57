//! Streaming markdown for a terminal: text arrives in arbitrary chunks and is styled as it comes — `#` headings in
//! bold, fenced code blocks dimmed, `**bold**` and `` `code` `` inline — without waiting for the message to end.
//! Styles never cross a line end, so a torn or unbalanced marker cannot leave the terminal styled.

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const CODE: &str = "\x1b[36m";

/// A streaming renderer. Feed it with [`Markdown::push`]; call [`Markdown::finish`] when the message ends.
#[derive(Debug, Default)]
pub struct Markdown {
    /// The start of the current line while it may still be a heading or a fence marker.
    lead: String,
    /// True until the line's first character that decides its kind.
    deciding: bool,
    heading: bool,
    fence_line: bool,
    in_fence: bool,
    bold: bool,
    code: bool,
    star: bool,
}

impl Markdown {
    /// A renderer at the start of a line.
    pub fn new() -> Markdown {
        Markdown {
            deciding: true,
            ..Markdown::default()
        }
    }

    /// Renders `text`, returning what to write.
    pub fn push(&mut self, text: &str) -> String {
        let mut out = String::new();
        for c in text.chars() {
            self.char(c, &mut out);
        }
        out
    }

    /// Flushes anything held back and resets every style.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        self.flush_lead(&mut out);
        if self.star {
            self.star = false;
            out.push('*');
        }
        if self.styled() {
            out.push_str(RESET);
        }
        *self = Markdown::new();
        out
    }

    fn styled(&self) -> bool {
        self.heading || self.fence_line || self.in_fence || self.bold || self.code
    }

    fn char(&mut self, c: char, out: &mut String) {
        if c == '\n' {
            self.end_line(out);
            return;
        }
        if self.deciding {
            let same = self.lead.chars().all(|l| l == c);
            if (c == '#' || c == '`') && same {
                self.lead.push(c);
                return;
            }
            self.deciding = false;
            if self.lead.starts_with('#') && c == ' ' && !self.in_fence {
                self.lead.clear();
                self.heading = true;
                out.push_str(BOLD);
                return;
            }
            if self.lead.len() >= 3 && self.lead.starts_with('`') {
                self.fence_line = true;
                out.push_str(DIM);
                out.push_str(&std::mem::take(&mut self.lead));
                out.push(c);
                return;
            }
            self.flush_lead(out);
        }
        self.inline(c, out);
    }

    fn flush_lead(&mut self, out: &mut String) {
        let lead = std::mem::take(&mut self.lead);
        if lead.len() >= 3 && lead.starts_with('`') {
            // a fence alone on its line
            self.fence_line = true;
            out.push_str(DIM);
            out.push_str(&lead);
            return;
        }
        for l in lead.chars() {
            self.inline(l, out);
        }
    }

    fn inline(&mut self, c: char, out: &mut String) {
        if self.in_fence || self.fence_line {
            out.push(c);
            return;
        }
        if self.star {
            self.star = false;
            if c == '*' {
                self.bold = !self.bold;
                self.restyle(out);
                return;
            }
            out.push('*');
        }
        match c {
            '*' => self.star = true,
            '`' => {
                self.code = !self.code;
                self.restyle(out);
            }
            _ => out.push(c),
        }
    }

    /// Re-emits the current style from scratch (ANSI has no "bold off" that leaves colour alone everywhere).
    fn restyle(&self, out: &mut String) {
        out.push_str(RESET);
        if self.in_fence {
            out.push_str(DIM);
        }
        if self.heading || self.bold {
            out.push_str(BOLD);
        }
        if self.code {
            out.push_str(CODE);
        }
    }

    fn end_line(&mut self, out: &mut String) {
        if self.deciding {
            self.flush_lead(out);
        }
        if self.star {
            self.star = false;
            out.push('*');
        }
        if self.fence_line {
            self.in_fence = !self.in_fence;
        }
        let was_styled = self.heading || self.fence_line || self.bold || self.code;
        self.heading = false;
        self.fence_line = false;
        self.bold = false;
        self.code = false;
        if was_styled {
            out.push_str(RESET);
        }
        out.push('\n');
        if self.in_fence {
            out.push_str(DIM);
        }
        self.deciding = true;
    }
}

/// Removes ANSI escape sequences.
#[cfg(test)]
fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            for n in chars.by_ref() {
                if n.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "a test panics on a failed set-up")]
mod tests {
    use super::*;

    /// Renders `chunks` in order, then finishes.
    fn render(chunks: &[&str]) -> String {
        let mut m = Markdown::new();
        let mut out: String = chunks.iter().map(|c| m.push(c)).collect();
        out.push_str(&m.finish());
        out
    }

    #[test]
    fn markers_are_styled_and_removed_however_the_text_is_chunked() {
        let text = "# Title\nsome **bold** and `code` here\n";
        let whole = render(&[text]);
        let bytes: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(render(&refs), whole, "char-by-char chunks render the same");
        assert_eq!(strip_ansi(&whole), "Title\nsome bold and code here\n");
        assert!(whole.starts_with(BOLD), "{whole:?}");
        assert!(whole.contains(CODE), "{whole:?}");
    }

    #[test]
    fn fenced_code_keeps_its_text_verbatim() {
        let out = render(&["```rust\nlet x = a * *b; // `q`\n```\nafter **x**\n"]);
        assert_eq!(
            strip_ansi(&out),
            "```rust\nlet x = a * *b; // `q`\n```\nafter x\n"
        );
    }

    #[test]
    fn lone_or_unbalanced_markers_are_kept_and_styles_end_at_the_line() {
        let out = render(&["2 * 3 and a `tick\n#hashtag\n"]);
        assert_eq!(strip_ansi(&out), "2 * 3 and a tick\n#hashtag\n");
        let line_end = out.find('\n').unwrap();
        assert!(out[..line_end].ends_with(RESET), "{out:?}");
        assert_eq!(strip_ansi(&render(&["a trailing *"])), "a trailing *");
    }
}
