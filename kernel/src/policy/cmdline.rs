//! A bash command line read as the simple commands it runs, for `[permissions]` ask / deny command rules.
//!
//! This is not a shell: it only has to find every simple command a line *could* run, so that a rule written for
//! `git push` sees `cd x && git push`, `(git push)`, `echo $(git push)` and `if git push; then …; fi`. It errs on one
//! side only: a word whose value is only known when the line runs (a parameter expansion, a command substitution, an
//! ANSI-C string, a glob, a brace expansion) is marked [`Word::dynamic`], and anything it does not understand (a
//! `case` statement, arithmetic `$((…))`, `function f`, an unclosed quote) makes the whole line [`Unparsed`], which
//! the rules treat more broadly than any parse.
//!
//! Why hand-written: the kernel is pure and dependency-light, and what matters here is knowing exactly where the
//! reader stops understanding (so that it can fail closed there). The available shell-word crates split words but
//! not operators, substitutions or reserved words; full bash grammars are large, accept constructs whose effect we
//! could not judge anyway, and would still need this fail-closed layer on top.

/// Nesting (subshells, substitutions, `sh -c` strings) deeper than this is not read: the line is [`Unparsed`].
pub const MAX_DEPTH: usize = 16;

/// One word of a simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The word after quote removal (for a dynamic word: the text around the parts loom cannot know).
    pub text: String,
    /// The word as written in the line.
    pub raw: String,
    /// True when the word's value is only known when the line runs.
    pub dynamic: bool,
    /// True when any part of the word was quoted or escaped (a quoted word is never a reserved word or an
    /// assignment).
    pub quoted: bool,
}

impl Word {
    /// A literal word (an argv element).
    pub fn literal(text: &str) -> Word {
        Word {
            text: text.to_string(),
            raw: text.to_string(),
            dynamic: false,
            quoted: true,
        }
    }
}

/// Why a line could not be read: it is then judged by [`Unparsed`] rules (broader than any parse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unparsed(pub String);

/// Every simple command of `line`, read at nesting depth `depth` (0 for a call's line; more for a `sh -c` string
/// read from inside another line), in no particular order, with assignments, redirections and reserved words
/// (`if`, `then`, `!`, `{` …) removed; commands inside subshells, `$(…)`, backquotes and process substitutions are
/// included. A command with no words (a bare assignment, a redirection) is left out.
pub fn simple_commands_at(line: &str, depth: usize) -> Result<Vec<Vec<Word>>, Unparsed> {
    let chars: Vec<char> = line.chars().collect();
    let mut p = Parser {
        s: &chars,
        i: 0,
        out: Vec::new(),
        heredocs: Vec::new(),
    };
    p.list(None, depth)
        .map_err(|why| Unparsed(why.to_string()))?;
    Ok(p.out)
}

type Res<T> = Result<T, &'static str>;

struct Parser<'a> {
    s: &'a [char],
    i: usize,
    out: Vec<Vec<Word>>,
    /// Here-documents opened on the current line: (delimiter, quoted, strip tabs).
    heredocs: Vec<(String, bool, bool)>,
}

/// The simple command being read.
#[derive(Default)]
struct Cmd {
    words: Vec<Word>,
    /// A `for`/`select` header: its words are not a command.
    header: bool,
}

const KEYWORDS: &[&str] = &[
    "{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "coproc",
];

impl Cmd {
    fn push(&mut self, w: Word) -> Res<()> {
        // an assignment (`A=1`, `A=$(date)`) before the program is not the program; its name is never quoted
        if self.words.is_empty() && !self.header && is_assignment(&w.raw) {
            return Ok(());
        }
        if self.words.is_empty() && !self.header && !w.quoted && !w.dynamic {
            if KEYWORDS.contains(&w.text.as_str()) {
                return Ok(());
            }
            match w.text.as_str() {
                "for" | "select" => {
                    self.header = true;
                    return Ok(());
                }
                "case" => return Err("a `case` statement"),
                "function" => return Err("a `function` definition"),
                _ => {}
            }
        }
        self.words.push(w);
        Ok(())
    }
}

fn is_assignment(t: &str) -> bool {
    let Some(eq) = t.find('=') else {
        return false;
    };
    let name = t[..eq].strip_suffix('+').unwrap_or(&t[..eq]);
    let mut cs = name.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn peek_at(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn finish(&mut self, cmd: &mut Cmd) {
        let cmd = std::mem::take(cmd);
        if !cmd.header && !cmd.words.is_empty() {
            self.out.push(cmd.words);
        }
    }

    /// Reads commands until the end of the text (`close` None) or the `)` closing a subshell / substitution.
    fn list(&mut self, close: Option<char>, depth: usize) -> Res<()> {
        if depth > MAX_DEPTH {
            return Err("nesting deeper than loom reads");
        }
        let mut cur = Cmd::default();
        loop {
            let Some(c) = self.peek() else {
                self.finish(&mut cur);
                if !self.heredocs.is_empty() {
                    return Err("an unterminated here-document");
                }
                return match close {
                    None => Ok(()),
                    Some(_) => Err("an unclosed `(`"),
                };
            };
            match c {
                ' ' | '\t' | '\r' => self.i += 1,
                '\\' if self.peek_at(1) == Some('\n') => self.i += 2,
                '\n' => {
                    self.i += 1;
                    self.finish(&mut cur);
                    self.heredoc_bodies(depth)?;
                }
                ';' => {
                    if self.peek_at(1) == Some(';') {
                        return Err("`;;` (a `case` statement)");
                    }
                    self.i += 1;
                    self.finish(&mut cur);
                }
                '&' => {
                    if self.peek_at(1) == Some('>') {
                        self.i += 2;
                        if self.peek() == Some('>') {
                            self.i += 1;
                        }
                        self.redirect_target(depth)?;
                    } else {
                        self.i += 1;
                        if self.peek() == Some('&') {
                            self.i += 1;
                        }
                        self.finish(&mut cur);
                    }
                }
                '|' => {
                    self.i += 1;
                    if matches!(self.peek(), Some('|' | '&')) {
                        self.i += 1;
                    }
                    self.finish(&mut cur);
                }
                '(' => {
                    if self.peek_at(1) == Some('(') {
                        return Err("`((` arithmetic");
                    }
                    if cur.words.is_empty() && !cur.header {
                        self.i += 1;
                        self.list(Some(')'), depth + 1)?;
                    } else if cur.words.len() == 1 && self.peek_at(1) == Some(')') {
                        // `name()`: a function definition; its body's commands are read as any others
                        self.i += 2;
                        cur = Cmd::default();
                    } else {
                        return Err("a `(` inside a command");
                    }
                }
                ')' => {
                    if close == Some(')') {
                        self.i += 1;
                        self.finish(&mut cur);
                        return Ok(());
                    }
                    return Err("an unmatched `)`");
                }
                '<' | '>' if self.peek_at(1) != Some('(') => self.redirect(depth)?,
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.i += 1;
                    }
                }
                _ => {
                    let w = self.word(depth)?;
                    // a file descriptor number right before a redirection (`2>&1`) is not a word
                    let fd = !w.quoted
                        && !w.text.is_empty()
                        && w.text.chars().all(|c| c.is_ascii_digit())
                        && matches!(self.peek(), Some('<' | '>'))
                        && self.peek_at(1) != Some('(');
                    if !fd {
                        cur.push(w)?;
                    }
                }
            }
        }
    }

    /// At `<` or `>`: a redirection operator and its target word (whose substitutions still count).
    fn redirect(&mut self, depth: usize) -> Res<()> {
        let first = self.bump();
        match (first, self.peek()) {
            (Some('<'), Some('<')) => {
                self.i += 1;
                if self.peek() == Some('<') {
                    self.i += 1;
                } else {
                    return self.heredoc_start(depth);
                }
            }
            (Some('<'), Some('>' | '&')) | (Some('>'), Some('>' | '&' | '|')) => self.i += 1,
            _ => {}
        }
        self.redirect_target(depth)
    }

    fn redirect_target(&mut self, depth: usize) -> Res<()> {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.i += 1;
        }
        match self.peek() {
            None | Some(';' | '&' | '|' | '\n' | ')' | '(' | '<' | '>') => {
                Err("a redirection without a target")
            }
            _ => self.word(depth).map(drop),
        }
    }

    /// After `<<`: the delimiter word; the body is skipped at the end of the line.
    fn heredoc_start(&mut self, depth: usize) -> Res<()> {
        let strip = self.peek() == Some('-');
        if strip {
            self.i += 1;
        }
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.i += 1;
        }
        if matches!(
            self.peek(),
            None | Some(';' | '&' | '|' | '\n' | ')' | '(' | '<' | '>')
        ) {
            return Err("a here-document without a delimiter");
        }
        let w = self.word(depth)?;
        if w.dynamic {
            return Err("a here-document delimiter with an expansion");
        }
        self.heredocs.push((w.text, w.quoted, strip));
        Ok(())
    }

    /// At the start of the line after one that opened here-documents: skips their bodies. An unquoted body is
    /// expanded by the shell, so a command substitution in it would run: such a body is not read.
    fn heredoc_bodies(&mut self, _depth: usize) -> Res<()> {
        for (delim, quoted, strip) in std::mem::take(&mut self.heredocs) {
            loop {
                if self.peek().is_none() {
                    return Err("an unterminated here-document");
                }
                let start = self.i;
                while self.peek().is_some_and(|c| c != '\n') {
                    self.i += 1;
                }
                let line: String = self.s[start..self.i].iter().collect();
                if self.peek() == Some('\n') {
                    self.i += 1;
                }
                let cmp = if strip {
                    line.trim_start_matches('\t')
                } else {
                    line.as_str()
                };
                if cmp == delim {
                    break;
                }
                if !quoted && (line.contains("$(") || line.contains('`')) {
                    return Err("a command substitution inside an unquoted here-document");
                }
            }
        }
        Ok(())
    }

    /// Reads one word starting at the current character.
    fn word(&mut self, depth: usize) -> Res<Word> {
        let start = self.i;
        let mut text = String::new();
        let mut dynamic = false;
        let mut quoted = false;
        // the unquoted characters, to find globs and brace expansions
        let mut bare = String::new();
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | ')' => break,
                // `name()`: a function definition, read by the caller
                '(' if self.peek_at(1) == Some(')') && !text.is_empty() && !quoted && !dynamic => {
                    break
                }
                '(' => return Err("a `(` inside a word"),
                '<' | '>' => {
                    if self.peek_at(1) != Some('(') {
                        break;
                    }
                    // process substitution: its commands run
                    self.i += 2;
                    self.list(Some(')'), depth + 1)?;
                    dynamic = true;
                }
                '\\' => {
                    self.i += 1;
                    match self.bump() {
                        None => return Err("a trailing backslash"),
                        Some('\n') => {}
                        Some(c) => {
                            text.push(c);
                            quoted = true;
                        }
                    }
                }
                '\'' => {
                    self.i += 1;
                    quoted = true;
                    loop {
                        match self.bump() {
                            None => return Err("an unclosed single quote"),
                            Some('\'') => break,
                            Some(c) => text.push(c),
                        }
                    }
                }
                '"' => {
                    self.i += 1;
                    quoted = true;
                    self.double_quoted(&mut text, &mut dynamic, depth)?;
                }
                '$' => {
                    if self.peek_at(1) == Some('"') {
                        // `$"…"`: a translatable string, quoted like "…"
                        self.i += 2;
                        quoted = true;
                        self.double_quoted(&mut text, &mut dynamic, depth)?;
                    } else {
                        self.dollar(&mut text, &mut dynamic, depth, false)?;
                    }
                }
                '`' => {
                    self.i += 1;
                    self.backquoted(depth)?;
                    dynamic = true;
                }
                c => {
                    text.push(c);
                    bare.push(c);
                    self.i += 1;
                }
            }
        }
        if is_pattern(&bare) {
            dynamic = true;
        }
        let raw: String = self.s[start..self.i].iter().collect();
        Ok(Word {
            text,
            raw,
            dynamic,
            quoted,
        })
    }

    /// After an opening `"`: up to the closing one.
    fn double_quoted(&mut self, text: &mut String, dynamic: &mut bool, depth: usize) -> Res<()> {
        loop {
            match self.peek() {
                None => return Err("an unclosed double quote"),
                Some('"') => {
                    self.i += 1;
                    return Ok(());
                }
                Some('\\') => {
                    self.i += 1;
                    match self.bump() {
                        None => return Err("an unclosed double quote"),
                        Some('\n') => {}
                        Some(c @ ('$' | '`' | '"' | '\\')) => text.push(c),
                        Some(c) => {
                            text.push('\\');
                            text.push(c);
                        }
                    }
                }
                Some('$') => self.dollar(text, dynamic, depth, true)?,
                Some('`') => {
                    self.i += 1;
                    self.backquoted(depth)?;
                    *dynamic = true;
                }
                Some(c) => {
                    text.push(c);
                    self.i += 1;
                }
            }
        }
    }

    /// At a `$`: an expansion (dynamic), or a literal `$`.
    fn dollar(
        &mut self,
        text: &mut String,
        dynamic: &mut bool,
        depth: usize,
        in_dq: bool,
    ) -> Res<()> {
        match self.peek_at(1) {
            Some('(') => {
                if self.peek_at(2) == Some('(') {
                    return Err("`$((` arithmetic");
                }
                self.i += 2;
                self.list(Some(')'), depth + 1)?;
                *dynamic = true;
            }
            Some('{') => {
                self.i += 2;
                let mut open = 1;
                loop {
                    match self.bump() {
                        None => return Err("an unclosed `${`"),
                        Some('{') => open += 1,
                        Some('}') => {
                            open -= 1;
                            if open == 0 {
                                break;
                            }
                        }
                        Some('$' | '`' | '\'' | '"' | '\\') => {
                            return Err("quotes or substitutions inside `${…}`")
                        }
                        Some(_) => {}
                    }
                }
                *dynamic = true;
            }
            Some('\'') if !in_dq => {
                // `$'…'`: escapes can spell any text
                self.i += 2;
                loop {
                    match self.bump() {
                        None => return Err("an unclosed `$'`"),
                        Some('\\') => {
                            self.i += 1;
                        }
                        Some('\'') => break,
                        Some(_) => {}
                    }
                }
                *dynamic = true;
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                self.i += 2;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.i += 1;
                }
                *dynamic = true;
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.i += 2;
                *dynamic = true;
            }
            _ => {
                text.push('$');
                self.i += 1;
            }
        }
        Ok(())
    }

    /// After an opening backquote: its text is a command line of its own.
    fn backquoted(&mut self, depth: usize) -> Res<()> {
        let mut inner = String::new();
        loop {
            match self.bump() {
                None => return Err("an unclosed backquote"),
                Some('`') => break,
                Some('\\') => match self.bump() {
                    None => return Err("an unclosed backquote"),
                    Some(c @ ('`' | '\\' | '$')) => inner.push(c),
                    Some(c) => {
                        inner.push('\\');
                        inner.push(c);
                    }
                },
                Some(c) => inner.push(c),
            }
        }
        let nested = simple_commands_at(&inner, depth + 1)
            .map_err(|_| "an unreadable backquoted command")?;
        self.out.extend(nested);
        Ok(())
    }
}

/// Unquoted text the shell would expand against file names or into several words: `*`, `?`, `[…]`, `{a,b}`,
/// `{1..3}`.
fn is_pattern(bare: &str) -> bool {
    if bare.contains(['*', '?']) {
        return true;
    }
    let after = |open: char, close: char, inner: &dyn Fn(&str) -> bool| {
        bare.find(open).is_some_and(|i| {
            bare[i + 1..]
                .find(close)
                .is_some_and(|j| inner(&bare[i + 1..i + 1 + j]))
        })
    };
    after('[', ']', &|_| true) || after('{', '}', &|s| s.contains(',') || s.contains(".."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simple_commands(line: &str) -> Result<Vec<Vec<Word>>, Unparsed> {
        simple_commands_at(line, 0)
    }

    /// The commands of `line` as space-joined texts, dynamic words shown as `<raw>`.
    fn cmds(line: &str) -> Vec<String> {
        let mut v: Vec<String> = simple_commands(line)
            .unwrap_or_else(|e| panic!("{line:?}: {}", e.0))
            .iter()
            .map(|c| {
                c.iter()
                    .map(|w| {
                        if w.dynamic {
                            format!("<{}>", w.raw)
                        } else {
                            w.text.clone()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        v.sort();
        v
    }

    #[track_caller]
    fn has(line: &str, want: &[&str]) {
        let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(cmds(line), want, "{line:?}");
    }

    #[test]
    fn operators_split_simple_commands() {
        has("git push", &["git push"]);
        has("git  push\t origin", &["git push origin"]);
        has("cd x && git push", &["cd x", "git push"]);
        has("a; b || c | d |& e & f", &["a", "b", "c", "d", "e", "f"]);
        has("a\nb\n", &["a", "b"]);
        has("(cd x; git push)", &["cd x", "git push"]);
        has("{ git push; }", &["git push"]);
        has("! git push", &["git push"]);
        has(
            "if git push; then echo ok; else echo no; fi",
            &["echo no", "echo ok", "git push"],
        );
        has("while true; do git push; done", &["git push", "true"]);
        has("for b in a c; do git push $b; done", &["git push <$b>"]);
        has("f() { git push; }; f", &["f", "git push"]);
        has("echo a \\\n b", &["echo a b"]);
        has("ls # git push", &["ls"]);
    }

    #[test]
    fn quotes_are_removed_and_expansions_marked() {
        has("'git' \"push\"", &["git push"]);
        has("g\"i\"t pu\\sh", &["git push"]);
        has("git push \"$B\"", &["git push <\"$B\">"]);
        has("git push ${B}", &["git push <${B}>"]);
        has("$G push", &["<$G> push"]);
        has("$'\\x67it' push", &["<$'\\x67it'> push"]);
        has("git pu* x", &["git <pu*> x"]);
        has("git {push,pull}", &["git <{push,pull}>"]);
        has("echo '$(not run)' \"a\\$b\"", &["echo $(not run) a$b"]);
        has("find . -exec x {} ;", &["find . -exec x {}"]);
        has("[ -f x ] && y", &["[ -f x ]", "y"]);
    }

    #[test]
    fn substitutions_contribute_their_commands() {
        has("echo $(git push)", &["echo <$(git push)>", "git push"]);
        has(
            "echo \"$(git push)\"",
            &["echo <\"$(git push)\">", "git push"],
        );
        has("echo `git push`", &["echo <`git push`>", "git push"]);
        has("diff <(git show) x", &["diff <<(git show)> x", "git show"]);
        has("X=$(git push) ls", &["git push", "ls"]);
        has("X=1 Y=2", &[]);
    }

    #[test]
    fn redirections_are_not_words() {
        has("git push > out 2>&1", &["git push"]);
        has("git push &>/dev/null < in", &["git push"]);
        has("git push 2> $(rm x)", &["git push", "rm x"]);
        has("cat <<<word", &["cat"]);
        has(
            "cat <<'EOF' > f\ngit push\nEOF\ngit status",
            &["cat", "git status"],
        );
        has("cat <<-EOF\n\tplain\n\tEOF\nls", &["cat", "ls"]);
    }

    #[test]
    fn what_loom_cannot_read_is_unparsed() {
        for line in [
            "echo 'open",
            "echo \"open",
            "(git push",
            "git push)",
            "case x in a) git push;; esac",
            "echo $((1+2))",
            "((i++))",
            "function f { git push; }",
            "cat <<EOF\n$(git push)\nEOF",
            "cat <<EOF\nno end",
            "a=(git push)",
            "echo ${x:-$(git push)}",
            "echo \\",
            "git push >",
        ] {
            assert!(simple_commands(line).is_err(), "{line:?} should not parse");
        }
        let deep = format!("{}git push{}", "( ".repeat(40), " )".repeat(40));
        assert!(simple_commands(&deep).is_err());
    }
}
