//! How an ask or deny `command_prefix` rule reads a bash call. Allow rules do not use this (they keep the narrow
//! "plain line that starts with the prefix" match): only ask and deny rules become broader.
//!
//! The rule `git push --force` is read as its words. It matches a call when any of these holds:
//! 1. the line starts with the prefix at a word boundary (what rules always matched);
//! 2. some simple command of the call fits the rule: the command's program, ignoring its directory
//!    (`/usr/bin/git` is `git`), is the rule's first word (ignoring its directory too); then the rule's other words
//!    appear in order, each as a whole word, with only option words between them — a word starting with `-` or `+`,
//!    other than `-` itself, each optionally followed by one value word that does not start with `-` unless the
//!    option holds a `=` (so `git -C . push`, `git -c k=v push`, `git --git-dir=x push`, `cargo +nightly publish`
//!    and `kubectl -n prod delete` fit `git push`, `cargo publish` and `kubectl delete`; `git pushx`, `gitk push`
//!    and `git log push` do not); a word whose value is only known when the line runs (`$X`, `$(…)`, a glob)
//!    matches the rest of the rule;
//! 3. some simple command's program is only known when it runs (`$X push`, `$(which git) push`, a shell that reads
//!    its commands from stdin such as `echo 'git push' | sh` or `bash <<< …`), or it is `git` defining an alias on
//!    its command line (`git -c alias.p=push p`, whose subcommand is only known when it runs): every ask and deny
//!    command rule matches it (for the git alias: every rule for `git`);
//! 4. loom cannot read (part of) the line (see [`crate::policy::cmdline`]): the rule matches when its program name occurs
//!    anywhere in the text loom could not read.
//!
//! The simple commands of a call are those of every part of a composed line (`;`, `&&`, `||`, `|`, `&`, newlines,
//! subshells, `{ …; }`, `if`/`while`/`for` bodies, `$(…)`, backquotes, process substitutions), plus the commands
//! that wrappers run: `bash -c` / `sh -c` (and dash, zsh, ksh, mksh, ash, yash) strings and `eval` arguments are read
//! as lines; for `env`, `command`, `builtin`, `exec`, `nohup`, `nice`, `ionice`, `timeout`, `time`, `setsid`,
//! `stdbuf`, `sudo`, `doas`, `xargs`, `watch`, `flock`, `chrt`, `taskset` and `busybox`, every suffix of the
//! arguments that starts at a non-option word is a command (so no option or value layout hides the command), and an
//! argument holding spaces is also read as a line; `xargs` commands get one more word loom cannot know (what stdin
//! supplies); `env -S STRING` is read as a line; `find … -exec / -execdir / -ok / -okdir CMD … ;` runs CMD. An
//! argv-mode call (`{"command": "git", "args": [...]}`) is one simple command of literal words, read the same way.
//!
//! Not seen: what scripts, programs and aliases run (`bash ./deploy.sh`, `python -c`, `make`, a git alias from a
//! config file) — a rule is a check on the command line, not a sandbox.

use crate::policy::cmdline::{simple_commands_at, Word, MAX_DEPTH};
use crate::policy::decide::plain_argv;

/// The most simple commands, and words in them, one call is read into; past either the call counts as unreadable.
const MAX_COMMANDS: usize = 4096;
const MAX_WORDS: usize = 65_536;

const SHELLS: &[&str] = &["bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "yash"];

const WRAPPERS: &[&str] = &[
    "env", "command", "builtin", "exec", "nohup", "nice", "ionice", "timeout", "time", "setsid",
    "stdbuf", "sudo", "doas", "xargs", "watch", "flock", "chrt", "taskset", "busybox",
];

/// A bash call as ask and deny command rules read it.
#[derive(Debug, Clone, Default)]
pub(crate) struct CommandView {
    /// Every simple command of the call, and every command a wrapper in it runs.
    commands: Vec<Vec<Word>>,
    /// Text loom could not read, and why.
    unparsed: Vec<(String, String)>,
    /// The words in `commands`.
    words: usize,
    /// True when the call held more than loom reads.
    overflow: bool,
}

impl CommandView {
    /// The view of a shell command line.
    pub(crate) fn of_line(line: &str) -> CommandView {
        let mut v = CommandView::default();
        v.line(line, 0);
        v.cap(line);
        v
    }

    /// The view of an argv-mode call: one simple command of literal words.
    pub(crate) fn of_argv(argv: &[String]) -> CommandView {
        let mut v = CommandView::default();
        v.collect(argv.iter().map(|a| Word::literal(a)).collect(), 0, true);
        v.cap(&argv.join(" "));
        v
    }

    fn cap(&mut self, whole: &str) {
        if self.overflow {
            self.unparsed.push((
                whole.to_string(),
                "more commands, words or nesting than loom reads".into(),
            ));
        }
    }

    fn line(&mut self, text: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.overflow = true;
            return;
        }
        match simple_commands_at(text, depth) {
            Ok(cmds) => {
                for c in cmds {
                    self.collect(c, depth, true);
                }
            }
            Err(e) => self.unparsed.push((text.to_string(), e.0)),
        }
    }

    /// Adds a simple command and what it runs. `unwrap`: also add the commands a wrapper runs (false for the
    /// suffixes of a wrapper's arguments, which are all added already).
    fn collect(&mut self, words: Vec<Word>, depth: usize, unwrap: bool) {
        if depth > MAX_DEPTH
            || self.commands.len() >= MAX_COMMANDS
            || self.words + words.len() > MAX_WORDS
        {
            self.overflow = true;
            return;
        }
        self.words += words.len();
        let Some(first) = words.first() else {
            return;
        };
        if first.dynamic {
            self.commands.push(words);
            return;
        }
        let prog = basename(&first.text).to_string();
        let args = &words[1..];
        if SHELLS.contains(&prog.as_str()) {
            self.shell(args, depth);
        }
        match prog.as_str() {
            "git" if args.iter().any(|w| defines_git_alias(&w.text)) => {
                // `git -c alias.p=push p`: the subcommand is whatever the alias says
                self.commands.push(vec![
                    first.clone(),
                    unknown("a command a git alias on the command line defines"),
                ]);
            }
            "eval" => {
                if args.iter().any(|w| w.dynamic) {
                    self.commands.push(vec![unknown("the arguments of eval")]);
                } else {
                    let joined: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
                    self.line(&joined.join(" "), depth + 1);
                }
            }
            "find" => {
                let mut k = 0;
                while k < args.len() {
                    if matches!(
                        args[k].text.as_str(),
                        "-exec" | "-execdir" | "-ok" | "-okdir"
                    ) {
                        let end = args[k + 1..]
                            .iter()
                            .position(|w| w.text == ";" || w.text == "+")
                            .map_or(args.len(), |e| k + 1 + e);
                        self.collect(args[k + 1..end].to_vec(), depth + 1, true);
                        k = end;
                    }
                    k += 1;
                }
            }
            "env" => {
                for (k, a) in args.iter().enumerate() {
                    let t = a.text.as_str();
                    let split = match t {
                        "-S" | "--split-string" => args.get(k + 1).map(|w| (w, w.text.as_str())),
                        _ => t
                            .strip_prefix("--split-string=")
                            .or_else(|| t.strip_prefix("-S").filter(|s| !s.is_empty()))
                            .map(|s| (a, s)),
                    };
                    match split {
                        Some((w, _)) if w.dynamic => {
                            self.commands.push(vec![unknown("the string of env -S")])
                        }
                        Some((_, s)) => self.line(s, depth + 1),
                        None => {}
                    }
                }
            }
            _ => {}
        }
        if unwrap && WRAPPERS.contains(&prog.as_str()) {
            for (k, a) in args.iter().enumerate() {
                if !a.dynamic && is_option(&a.text) {
                    continue;
                }
                if self.overflow || self.words + (args.len() - k) > MAX_WORDS {
                    self.overflow = true;
                    break;
                }
                let mut inner = args[k..].to_vec();
                if prog == "xargs" {
                    inner.push(unknown("the words xargs reads from stdin"));
                }
                self.collect(inner, depth + 1, false);
                if !a.dynamic && a.text.contains([' ', '\t', '\n']) {
                    self.line(&a.text, depth + 1);
                }
            }
        }
        self.commands.push(words);
    }

    /// `bash [options] -c STRING …`: the string is a line. Without `-c` the shell runs a script loom cannot see.
    fn shell(&mut self, args: &[Word], depth: usize) {
        let (mut has_c, mut has_s, mut info) = (false, false, false);
        let mut k = 0;
        while let Some(a) = args.get(k) {
            if a.dynamic {
                break;
            }
            let t = a.text.as_str();
            if t == "--" {
                k += 1;
                break;
            }
            if !is_option(t) {
                break;
            }
            if matches!(t, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
                k += 2;
                continue;
            }
            if matches!(t, "--version" | "--help") {
                info = true;
            }
            if t.starts_with('-') && !t.starts_with("--") {
                has_c |= t[1..].contains('c');
                has_s |= t[1..].contains('s');
            }
            k += 1;
        }
        if !has_c {
            // no script file: the shell runs what stdin holds (`echo 'git push' | sh`, `bash <<< …`), which loom
            // cannot see, so it counts as a program loom only knows when it runs
            let operand = args.get(k);
            let stdin = has_s || operand.is_none_or(|w| !w.dynamic && w.text == "-");
            if stdin && !info {
                self.commands
                    .push(vec![unknown("the commands a shell reads from stdin")]);
            }
            return;
        }
        match args.get(k) {
            Some(w) if w.dynamic => self
                .commands
                .push(vec![unknown("the string of a shell's -c")]),
            Some(w) => self.line(&w.text, depth + 1),
            None => {}
        }
    }

    /// Why the ask or deny rule with command prefix `prefix` matches this call, or `None`.
    pub(crate) fn matches(&self, prefix: &str) -> Option<String> {
        let rule = plain_argv(prefix)
            .unwrap_or_else(|| prefix.split_whitespace().map(str::to_string).collect());
        let (prog, rest) = rule.split_first()?;
        let prog = basename(prog);
        for c in &self.commands {
            if let Some((first, args)) = c.split_first() {
                if !first.dynamic && basename(&first.text) == prog && args_fit(rest, args) {
                    return Some(format!("the simple command `{}`", render(c)));
                }
            }
        }
        for c in &self.commands {
            if c.first().is_some_and(|w| w.dynamic) {
                return Some(format!(
                    "the simple command `{}`, whose program loom only knows when it runs",
                    render(c)
                ));
            }
        }
        for (text, why) in &self.unparsed {
            if text.contains(prog) {
                return Some(format!(
                    "`{}`, which loom cannot read ({why}) and which names {prog}",
                    clip(text)
                ));
            }
        }
        None
    }
}

fn unknown(what: &str) -> Word {
    Word {
        text: String::new(),
        raw: format!("<{what}>"),
        dynamic: true,
        quoted: false,
    }
}

/// `alias.x=…` (the value of `-c`), `-calias.x=…` or `--config-env=alias.x=…`: git config keys are
/// case-insensitive.
fn defines_git_alias(t: &str) -> bool {
    let t = t.to_ascii_lowercase();
    ["alias.", "-calias.", "--config-env=alias."]
        .iter()
        .any(|p| t.starts_with(p))
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// An option word: starts with `-` or `+`, and is not `-` / `+` alone.
fn is_option(t: &str) -> bool {
    t.len() > 1 && (t.starts_with('-') || t.starts_with('+'))
}

/// Do the rule's words after the program appear in `args` in order, with only option words (each with at most one
/// value word) between them? A dynamic word matches the rest of the rule.
fn args_fit(rule: &[String], args: &[Word]) -> bool {
    let m = rule.len();
    if m == 0 {
        return true;
    }
    let n = args.len();
    // reach[a][r]: rule word r is next to match when argument a is next to read
    let mut reach = vec![vec![false; m]; n + 2];
    reach[0][0] = true;
    for a in 0..n {
        for r in 0..m {
            if !reach[a][r] {
                continue;
            }
            let w = &args[a];
            if w.dynamic {
                return true;
            }
            if w.text == rule[r] {
                if r + 1 == m {
                    return true;
                }
                reach[a + 1][r + 1] = true;
            }
            if is_option(&w.text) {
                reach[a + 1][r] = true;
                // `--git-dir=x` carries its value; `-C .` may be followed by it
                if !w.text.contains('=')
                    && args.get(a + 1).is_some_and(|v| !v.text.starts_with('-'))
                {
                    reach[a + 2][r] = true;
                }
            }
        }
    }
    false
}

fn render(c: &[Word]) -> String {
    let words: Vec<&str> = c.iter().map(|w| w.raw.as_str()).collect();
    clip(&words.join(" "))
}

fn clip(s: &str) -> String {
    const MAX: usize = 200;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn hit(rule: &str, line: &str) {
        assert!(
            CommandView::of_line(line).matches(rule).is_some(),
            "{rule:?} should match {line:?}"
        );
    }

    #[track_caller]
    fn miss(rule: &str, line: &str) {
        let why = CommandView::of_line(line).matches(rule);
        assert!(why.is_none(), "{rule:?} should not match {line:?}: {why:?}");
    }

    #[test]
    fn global_options_and_paths() {
        for line in [
            "git push",
            "git  push",
            "git -C . push",
            "git -c k=v push origin",
            "git --git-dir=x push",
            "git --git-dir x --work-tree y push",
            "git --no-pager push",
            "/usr/bin/git push",
            "./git push",
            "git push --force",
            "git $OPT",
            "git -C \"$D\" push",
        ] {
            hit("git push", line);
        }
        for line in [
            "git pushx",
            "gitk push",
            "git status",
            "git log push",
            "git --git-dir=x log push",
            "echo git push",
            "git-push",
            "git",
        ] {
            miss("git push", line);
        }
        hit("cargo publish", "cargo +nightly publish");
        hit("kubectl delete", "kubectl -n prod delete pod x");
        hit("git push --force", "git push -u origin --force");
        miss("git push --force", "git push origin");
        hit("/usr/bin/git push", "git push");
    }

    #[test]
    fn composed_lines() {
        for line in [
            "cd x && git push",
            "cd x; git push",
            "false || git push",
            "echo | git push",
            "(git push)",
            "{ git push; }",
            "echo $(git push)",
            "echo `git push`",
            "if true; then git push; fi",
            "ls\ngit push",
            "X=1 git push",
            "git status & git push",
        ] {
            hit("git push", line);
        }
        miss("git push", "cd x && git status; echo push");
    }

    #[test]
    fn wrappers() {
        for line in [
            "bash -c 'git push'",
            "sh -c \"cd x && git push\"",
            "bash -lc 'git push'",
            "bash -o pipefail -c 'git push'",
            "sh -c 'sh -c \"git push\"'",
            "/bin/sh -c 'git push'",
            "env git push",
            "env -i A=1 B=2 git push",
            "env -u HOME git push",
            "env -S 'git push'",
            "command git push",
            "command -p git push",
            "exec git push",
            "exec -a x git push",
            "xargs git push",
            "echo push | xargs git",
            "xargs -n 1 -I {} git push {}",
            "nice git push",
            "nice -n 5 git push",
            "nohup git push",
            "timeout 5 git push",
            "timeout -s KILL -k 1 5s git push",
            "time git push",
            "sudo -u me git push",
            "nohup nice env A=1 git push",
            "eval git push",
            "eval 'git push'",
            "find . -exec git push \\;",
            "watch 'git push'",
        ] {
            hit("git push", line);
        }
        // a shell reading stdin runs what loom cannot see; a git alias on the command line is any subcommand
        for line in [
            "echo 'git push' | bash",
            "bash <<< 'git push'",
            "sh -s",
            "sh - x",
            "git -c alias.p=push p",
            "git -c Alias.P=push p",
            "git --config-env=alias.p=X p",
            "busybox sh -c 'git push'",
        ] {
            hit("git push", line);
        }
        for line in [
            "bash script.sh",
            "env A=1 git status",
            "sh -c 'git status'",
            "nohup gitk push",
            "bash --version",
            "git -c user.name=x status",
        ] {
            miss("git push", line);
        }
    }

    #[test]
    fn unknown_programs_and_unreadable_lines() {
        hit("git push", "$G push");
        hit("rm -rf", "$(which rm) -rf x");
        hit("git push", "sh -c \"$CMD\"");
        hit("git push", "eval \"$CMD\"");
        // unreadable: the rule applies when its program is named in the text
        hit("git push", "case x in a) git status;; esac");
        hit("git push", "echo $((1)) && git status");
        miss("rm", "case x in a) git status;; esac");
        miss("rm", "echo 'unclosed");
    }

    #[test]
    fn argv_mode() {
        let v =
            |a: &[&str]| CommandView::of_argv(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(v(&["git", "-C", ".", "push"]).matches("git push").is_some());
        assert!(v(&["/usr/bin/git", "push"]).matches("git push").is_some());
        assert!(v(&["sh", "-c", "git push"]).matches("git push").is_some());
        assert!(v(&["env", "git", "push"]).matches("git push").is_some());
        // an argument is a literal word: `;` inside it is not an operator, `$X` is not an expansion
        assert!(v(&["echo", "a; git push"]).matches("git push").is_none());
        assert!(v(&["git", "pushx"]).matches("git push").is_none());
        assert!(v(&["gitk", "push"]).matches("git push").is_none());
    }

    #[test]
    fn the_reason_names_the_simple_command() {
        let why = CommandView::of_line("cd x && git -C . push origin").matches("git push");
        assert_eq!(
            why.as_deref(),
            Some("the simple command `git -C . push origin`")
        );
    }

    #[test]
    fn long_lines_stay_bounded() {
        let line = "nohup ".repeat(3000) + "git push";
        hit("git push", &line);
        let line = "a;".repeat(10_000);
        let v = CommandView::of_line(&line);
        assert!(v.matches("git push").is_none());
        assert!(v.matches("a").is_some());
    }
}
