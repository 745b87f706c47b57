//! Finding where a name is *declared* in source text, for the `find_symbol` tool.
//!
//! This is bounded, line-based declaration matching: no language server, no
//! parser, no filesystem. The caller walks the files, picks a [`Lang`] with
//! [`lang_of`], skips files that [`Matcher::may_match`] rules out, and hands
//! the text of the rest to [`Matcher::declarations`].
//!
//! A line is a declaration when it starts (after indentation) with one of the
//! declaring forms below, with the name as a whole identifier (`foo` never
//! matches `foobar` or `my_foo`):
//!
//! - Rust: `fn` (after `pub`, `pub(crate)`, `pub(super)`, `pub(in path)`,
//!   `default`, `const`, `async`, `unsafe`, `safe`, `extern "ABI"`), `struct`,
//!   `enum`, `union`, `trait`, `type`, `const`, `static` (and `static mut`),
//!   `mod`, `macro` (`macro_rules! name` or `macro name`), and `impl` when the
//!   implementing type is the name (`impl Name`, `impl<T> Name<T>`,
//!   `impl Trait for Name`).
//! - Python: `def`, `async def` (any indentation), `class`, `type` aliases,
//!   and `variable` for `NAME =` / `NAME: type =` at column 0.
//! - JavaScript: `function` (also `function*`, `async`, `export`,
//!   `export default`), `class`, `variable` (`const`, `let`, `var`), and
//!   `method` for an indented `name(…) {` with optional `static`, `async`,
//!   `get`, `set`, `*`, `#` and TypeScript modifiers.
//! - TypeScript: the JavaScript kinds plus `interface`, `type`, `enum`
//!   (also `const enum`), `namespace` (also `module`), `abstract class` and
//!   a `declare` prefix.
//! - Go: `func`, `method` (`func (r *T) Name(`), `type`, `var`, `const`, and
//!   the members of `var (`, `const (` and `type (` blocks (one level of
//!   indentation inside a block opened at column 0).
//!
//! Limits: a declaration must start on one line (a Rust `impl` header whose
//! generics span lines, or a JavaScript method whose parameters span lines
//! without a modifier before the name, is missed). Line comments (`//`, `#`)
//! never match, but lines inside block comments, doc strings and multi-line
//! string literals are not recognised as such and can match. Declarations
//! that are not at the start of their line (`let a = 1; fn foo() {}`),
//! destructuring, tuple assignments, enum variants, struct fields and class
//! fields are not found. Names are ASCII identifiers only, and only ASCII
//! letters, digits, `_` and `$` continue an identifier (`foo` matches in
//! `fn fooé()`).
//!
//! Cost: [`Matcher::new`] compiles one regex per language (a few ms in all);
//! a search runs that language's regex once over the text from the line of
//! the name's first occurrence, and does per-line work only for matches.

use std::path::Path;

use regex::Regex;

/// The longest name, in bytes, that [`Matcher::new`] accepts.
pub const MAX_NAME_LEN: usize = 200;

/// The most characters of a declaring line kept in [`Declaration::text`].
pub const MAX_TEXT_CHARS: usize = 200;

/// A source language whose declarations [`Matcher`] recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Rust (`.rs`).
    Rust,
    /// Python (`.py`, `.pyi`).
    Python,
    /// JavaScript (`.js`, `.mjs`, `.cjs`, `.jsx`).
    JavaScript,
    /// TypeScript (`.ts`, `.mts`, `.cts`, `.tsx`).
    TypeScript,
    /// Go (`.go`).
    Go,
}

/// The language of a file, by its extension: `rs`; `py`, `pyi`; `js`, `mjs`,
/// `cjs`, `jsx`; `ts`, `mts`, `cts`, `tsx`; `go` (ASCII case ignored).
/// `None` for any other extension or none.
pub fn lang_of(path: &Path) -> Option<Lang> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "rs" => Some(Lang::Rust),
        "py" | "pyi" => Some(Lang::Python),
        "js" | "mjs" | "cjs" | "jsx" => Some(Lang::JavaScript),
        "ts" | "mts" | "cts" | "tsx" => Some(Lang::TypeScript),
        "go" => Some(Lang::Go),
        _ => None,
    }
}

/// One declaration of the searched name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declaration {
    /// The 1-based line number of the declaring line.
    pub line: usize,
    /// What is declared, e.g. `"fn"`, `"struct"`, `"impl"`, `"def"`,
    /// `"class"`, `"method"`, `"variable"`, `"func"` (see the module doc).
    pub kind: &'static str,
    /// The declaring line, trimmed, cut to [`MAX_TEXT_CHARS`] characters with
    /// `"…"` appended when it was longer.
    pub text: String,
}

/// Why a [`Matcher`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SymbolError {
    /// The name is not an identifier that can be searched for.
    #[error(
        "bad symbol name: {0}; a name must be an identifier of ASCII letters, digits, `_` or `$`, \
         not starting with a digit, at most 200 bytes (e.g. `parse_args` or `HttpClient`)"
    )]
    BadName(String),
    /// A pattern built from a valid name failed to compile (a bug in this module).
    #[error("internal pattern error: {0}; this is a bug in the symbol matcher, please report it")]
    Pattern(String),
}

/// What to check on a line after its kind's pattern matched.
#[derive(Debug, Clone, Copy)]
enum Check {
    /// Nothing: the pattern is enough.
    Plain,
    /// The implementing type of a Rust `impl` header must be the name.
    RustImpl,
    /// The line must look like a method definition, not a call.
    JsMethod,
    /// The line must sit in a Go `var (`, `const (` or `type (` block; the
    /// kind is the block's keyword.
    GoBlock,
}

/// One kind of declaration: its pattern template and the check after it.
struct Spec {
    kind: &'static str,
    template: &'static str,
    check: Check,
}

const fn plain(kind: &'static str, template: &'static str) -> Spec {
    Spec {
        kind,
        template,
        check: Check::Plain,
    }
}

// Templates: `\s` is a blank (space or tab, never a line break), `@N` the
// escaped name, `@E` the end of an identifier, `@V` a Rust visibility, and
// `@P` the JavaScript/TypeScript export (and for TypeScript `declare`) prefix.
// Every template starts with `^` so each line matches at most once, and a
// kind with a check comes last in its list (a failed check does not fall
// through to the kinds after it).

const RUST_SPECS: &[Spec] = &[
    plain(
        "fn",
        r##"^\s*@V(?:(?:default|const|async|unsafe|safe|extern(?:\s*"[^"\n]*")?)\s+)*fn\s+(?:r#)?@N@E"##,
    ),
    plain("struct", r"^\s*@Vstruct\s+(?:r#)?@N@E"),
    plain("enum", r"^\s*@Venum\s+(?:r#)?@N@E"),
    plain("union", r"^\s*@Vunion\s+(?:r#)?@N@E"),
    plain(
        "trait",
        r"^\s*@V(?:unsafe\s+)?(?:auto\s+)?trait\s+(?:r#)?@N@E",
    ),
    plain("type", r"^\s*@Vtype\s+(?:r#)?@N@E"),
    plain("const", r"^\s*@Vconst\s+(?:r#)?@N\s*:"),
    plain("static", r"^\s*@Vstatic\s+(?:mut\s+)?(?:r#)?@N\s*:"),
    plain("mod", r"^\s*@Vmod\s+(?:r#)?@N@E"),
    plain("macro", r"^\s*(?:macro_rules!\s*|@Vmacro\s+)@N@E"),
    Spec {
        kind: "impl",
        template: r"^\s*(?:unsafe\s+)?impl[<\s](?:[^\n]*[^A-Za-z0-9_$])?@N@E",
        check: Check::RustImpl,
    },
];

const PYTHON_SPECS: &[Spec] = &[
    plain("def", r"^\s*(?:async\s+)?def\s+@N\s*[(\[]"),
    plain("class", r"^\s*class\s+@N@E"),
    plain("type", r"^type\s+@N\s*[=\[]"),
    plain("variable", r"^@N\s*(?::|=(?:[^=]|$))"),
];

const JS_FUNCTION: Spec = plain(
    "function",
    r"^\s*@P(?:async\s+)?function(?:\s*\*\s*|\s+)@N@E",
);
const JS_CLASS: Spec = plain("class", r"^\s*@P(?:abstract\s+)?class\s+@N@E");
const JS_VARIABLE: Spec = plain("variable", r"^\s*@P(?:const|let|var)\s+@N\s*(?:[:=;,!]|$)");
const JS_METHOD: Spec = Spec {
    kind: "method",
    template: r"^\s+(?:(?:static|async|get|set|public|private|protected|readonly|override|abstract|accessor|declare)\s+)*(?:\*\s*)?#?@N\s*\??\s*(?:<[^\n]*>)?\s*\(",
    check: Check::JsMethod,
};

const JS_SPECS: &[Spec] = &[JS_FUNCTION, JS_CLASS, JS_VARIABLE, JS_METHOD];

const TS_SPECS: &[Spec] = &[
    JS_FUNCTION,
    JS_CLASS,
    JS_VARIABLE,
    plain("interface", r"^\s*@Pinterface\s+@N@E"),
    plain("type", r"^\s*@Ptype\s+@N\s*(?:[=<]|$)"),
    plain("enum", r"^\s*@P(?:const\s+)?enum\s+@N@E"),
    plain("namespace", r"^\s*@P(?:namespace|module)\s+@N@E"),
    JS_METHOD,
];

const GO_SPECS: &[Spec] = &[
    plain("func", r"^func\s+@N\s*[(\[]"),
    plain("method", r"^func\s*\([^)\n]*\)\s*@N\s*[(\[]"),
    plain("type", r"^\s*type\s+@N@E"),
    plain("var", r"^\s*var\s+@N@E"),
    plain("const", r"^\s*const\s+@N@E"),
    Spec {
        kind: "var",
        template: r"^(?:\t| {1,8})@N(?:\s*(?:$|//|=(?:[^=]|$)|,)|\s+[A-Za-z_*\[(<]|\[)",
        check: Check::GoBlock,
    },
];

const RUST_VIS: &str = r"(?:pub(?:\s*\([^)\n]*\))?\s+)?";
const JS_PREFIX: &str = r"(?:export\s+(?:default\s+)?)?";
const TS_PREFIX: &str = r"(?:export\s+(?:default\s+)?)?(?:declare\s+)?";
const IDENT_END: &str = r"(?:[^A-Za-z0-9_$\r\n]|$)";

/// Words that start control flow or expressions in JavaScript, never methods.
const JS_NOT_METHODS: &[&str] = &[
    "if",
    "for",
    "while",
    "switch",
    "catch",
    "return",
    "function",
    "with",
    "do",
    "else",
    "new",
    "typeof",
    "void",
    "delete",
    "await",
    "yield",
    "super",
    "throw",
    "case",
    "in",
    "of",
    "instanceof",
];

/// One kind of a compiled language: its name and the check after a match.
#[derive(Debug, Clone)]
struct Kind {
    kind: &'static str,
    check: Check,
}

/// The compiled patterns of one language.
#[derive(Debug, Clone)]
struct LangPatterns {
    /// All kinds at once, multi-line, over a whole text; capture group `i + 1`
    /// is `kinds[i]`. Every alternative starts at a line start, so the
    /// leftmost-first match of a line is its first kind in order.
    scan: Regex,
    kinds: Vec<Kind>,
}

impl LangPatterns {
    fn new(specs: &[Spec], prefix: &str, escaped: &str) -> Result<Self, SymbolError> {
        let alternatives: Vec<String> = specs
            .iter()
            .map(|spec| {
                let pattern = spec
                    .template
                    .replace("@V", RUST_VIS)
                    .replace("@P", prefix)
                    .replace(r"\s", r"[ \t]")
                    .replace("@E", IDENT_END)
                    .replace("@N", escaped);
                format!("({pattern})")
            })
            .collect();
        let scan = Regex::new(&format!("(?mR){}", alternatives.join("|")))
            .map_err(|e| SymbolError::Pattern(e.to_string()))?;
        if scan.captures_len() != specs.len() + 1 {
            return Err(SymbolError::Pattern(format!(
                "{} groups for {} kinds",
                scan.captures_len(),
                specs.len()
            )));
        }
        let kinds = specs
            .iter()
            .map(|spec| Kind {
                kind: spec.kind,
                check: spec.check,
            })
            .collect();
        Ok(Self { scan, kinds })
    }
}

/// The compiled declaration patterns for one name; build it once per query
/// and reuse it for every file.
#[derive(Debug, Clone)]
pub struct Matcher {
    name: String,
    rust: LangPatterns,
    python: LangPatterns,
    javascript: LangPatterns,
    typescript: LangPatterns,
    go: LangPatterns,
}

impl Matcher {
    /// Compiles the patterns for `name`, which must be an identifier
    /// (`[A-Za-z_$][A-Za-z0-9_$]*`, at most [`MAX_NAME_LEN`] bytes); anything
    /// else is [`SymbolError::BadName`] with a message saying what a name may be.
    pub fn new(name: &str) -> Result<Matcher, SymbolError> {
        check_name(name)?;
        let escaped = regex::escape(name);
        Ok(Matcher {
            name: name.to_owned(),
            rust: LangPatterns::new(RUST_SPECS, "", &escaped)?,
            python: LangPatterns::new(PYTHON_SPECS, "", &escaped)?,
            javascript: LangPatterns::new(JS_SPECS, JS_PREFIX, &escaped)?,
            typescript: LangPatterns::new(TS_SPECS, TS_PREFIX, &escaped)?,
            go: LangPatterns::new(GO_SPECS, "", &escaped)?,
        })
    }

    /// The name this matcher searches for.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Fast pre-check: `false` when `text` cannot hold a declaration of the
    /// name because the name's bytes are absent; `true` otherwise.
    pub fn may_match(&self, text: &str) -> bool {
        text.contains(self.name.as_str())
    }

    /// The declarations of the name in `text` read as `lang`, in line order,
    /// at most `limit` of them.
    pub fn declarations(&self, lang: Lang, text: &str, limit: usize) -> Vec<Declaration> {
        let mut out = Vec::new();
        if limit == 0 {
            return out;
        }
        // Nothing before the first occurrence of the name can match.
        let Some(first) = text.find(self.name.as_str()) else {
            return out;
        };
        let from = line_start(text, first);
        let patterns = self.patterns(lang);
        let mut line_no = 1 + count_newlines(&text[..from]);
        let mut counted = from;
        let mut last_line: Option<usize> = None;
        let mut go_memo: Option<(usize, Option<&'static str>)> = None;
        for caps in patterns.scan.captures_iter(&text[from..]) {
            let Some((index, group)) = caps
                .iter()
                .skip(1)
                .enumerate()
                .find_map(|(i, g)| Some((i, g?)))
            else {
                continue;
            };
            let Some(kind) = patterns.kinds.get(index) else {
                continue;
            };
            let start = line_start(text, from + group.start());
            if last_line == Some(start) || start < counted {
                continue;
            }
            last_line = Some(start);
            line_no += count_newlines(&text[counted..start]);
            counted = start;
            let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
            let raw = &text[start..end];
            let line = raw.strip_suffix('\r').unwrap_or(raw);
            let found = match kind.check {
                Check::Plain => Some(kind.kind),
                Check::RustImpl => {
                    (rust_impl_target(line) == Some(self.name.as_str())).then_some(kind.kind)
                }
                Check::JsMethod => {
                    let open = from + group.end() - start;
                    js_method_definition(line, open, &self.name).then_some(kind.kind)
                }
                Check::GoBlock => go_block_kind(text, start, &mut go_memo),
            };
            if let Some(kind) = found {
                out.push(Declaration {
                    line: line_no,
                    kind,
                    text: clip(line),
                });
                if out.len() >= limit {
                    break;
                }
            }
        }
        out
    }

    fn patterns(&self, lang: Lang) -> &LangPatterns {
        match lang {
            Lang::Rust => &self.rust,
            Lang::Python => &self.python,
            Lang::JavaScript => &self.javascript,
            Lang::TypeScript => &self.typescript,
            Lang::Go => &self.go,
        }
    }
}

fn check_name(name: &str) -> Result<(), SymbolError> {
    let bad = |why: String| Err(SymbolError::BadName(why));
    if name.is_empty() {
        return bad("the name is empty".to_owned());
    }
    if name.len() > MAX_NAME_LEN {
        return bad(format!("the name is {} bytes long", name.len()));
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        return bad("the name starts with a digit".to_owned());
    }
    if let Some(c) = name
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
    {
        return bad(format!("the name contains {c:?}"));
    }
    Ok(())
}

/// The byte offset where the line holding byte `at` starts.
fn line_start(text: &str, at: usize) -> usize {
    text.get(..at)
        .and_then(|before| before.rfind('\n'))
        .map_or(0, |i| i + 1)
}

fn count_newlines(text: &str) -> usize {
    text.bytes().filter(|&b| b == b'\n').count()
}

/// The line trimmed and cut to [`MAX_TEXT_CHARS`] characters, with `…` when cut.
fn clip(line: &str) -> String {
    let trimmed = line.trim();
    match trimmed.char_indices().nth(MAX_TEXT_CHARS) {
        Some((cut, _)) => format!("{}…", &trimmed[..cut]),
        None => trimmed.to_owned(),
    }
}

/// The last path segment of the implementing type of a one-line Rust `impl`
/// header: `Foo` for `impl<T> fmt::Display for &'a crate::Foo<T> {`.
fn rust_impl_target(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    let rest = rest.strip_prefix("unsafe").map_or(rest, str::trim_start);
    let rest = rest.strip_prefix("impl")?;
    if !rest.starts_with(['<', ' ', '\t']) {
        return None;
    }
    let rest = rest.trim_start();
    let rest = if rest.starts_with('<') {
        skip_generics(rest)?
    } else {
        rest
    };
    let bytes = rest.as_bytes();
    let mut depth = 0usize;
    let mut header_end = rest.len();
    let mut target = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' | b'(' | b'[' => depth += 1,
            b'>' if i > 0 && bytes[i - 1] == b'-' => {}
            b'>' | b')' | b']' => depth = depth.saturating_sub(1),
            b'{' if depth == 0 => {
                header_end = i;
                break;
            }
            b' ' | b'\t' if depth == 0 => {
                let word = &rest[i + 1..];
                if word.starts_with("where") && !word[5..].starts_with(is_ident_char) {
                    header_end = i;
                    break;
                }
                if word.starts_with("for ") || word.starts_with("for\t") {
                    target = i + 4;
                }
            }
            _ => {}
        }
    }
    let mut ty = rest.get(target..header_end)?.trim_start();
    loop {
        let before = ty;
        ty = ty.trim_start_matches(['&', '*', ' ', '\t']);
        for word in ["mut ", "const ", "dyn "] {
            if let Some(after) = ty.strip_prefix(word) {
                ty = after;
            }
        }
        if ty.starts_with('\'') {
            // A lifetime: `&'a Foo`.
            let end = ty[1..]
                .find(|c: char| !is_ident_char(c))
                .map_or(ty.len(), |i| i + 1);
            ty = &ty[end..];
        }
        if ty == before {
            break;
        }
    }
    let path_end = ty
        .find(|c: char| !(is_ident_char(c) || c == ':' || c == '#'))
        .unwrap_or(ty.len());
    let last = ty[..path_end].rsplit("::").next()?;
    let last = last.strip_prefix("r#").unwrap_or(last);
    (!last.is_empty()).then_some(last)
}

/// What follows the balanced `<…>` that `text` starts with, or `None` when it
/// does not close on this line.
fn skip_generics(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' => depth += 1,
            b'>' if i > 0 && bytes[i - 1] == b'-' => {}
            b'>' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(&text[i + 1..]);
                }
            }
            _ => {}
        }
    }
    None
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// Whether an indented `name(` line (`open` is the byte just after the `(`)
/// defines a method rather than calling a function: its parameter list must
/// close and be followed by a body `{` (or `: ReturnType {`), or, when the
/// list goes on past the line, a modifier must stand before the name.
fn js_method_definition(line: &str, open: usize, name: &str) -> bool {
    if JS_NOT_METHODS.contains(&name) {
        return false;
    }
    let Some(params) = line.get(open..) else {
        return false;
    };
    let bytes = params.as_bytes();
    let mut depth = 1usize;
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(q) = quote {
            if b == b'\\' {
                i += 1;
            } else if b == q {
                quote = None;
            }
        } else {
            match b {
                b'\'' | b'"' | b'`' => quote = Some(b),
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        let after = &params[i + 1..];
                        let after = after.find("//").map_or(after, |c| &after[..c]).trim();
                        return after.starts_with('{')
                            || (after.starts_with(':') && after.ends_with('{'));
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    // The parameters go on past this line: trust it only after a modifier.
    !line
        .trim_start()
        .trim_start_matches(['*', '#', ' ', '\t'])
        .starts_with(name)
}

/// The kind (`var`, `const` or `type`) of the Go block that the indented
/// line starting at `start` sits in, or `None` when it is in no such block.
/// `memo` remembers the previous answer so walking back stays linear.
fn go_block_kind(
    text: &str,
    start: usize,
    memo: &mut Option<(usize, Option<&'static str>)>,
) -> Option<&'static str> {
    let mut end = start;
    let kind = loop {
        if end == 0 {
            break None;
        }
        let newline = end - 1;
        let prev = line_start(text, newline);
        if let Some((seen, kind)) = *memo {
            if prev <= seen {
                // No column-0 line between here and the previous candidate.
                break kind;
            }
        }
        end = prev;
        let line = text[prev..newline].trim_end_matches('\r');
        match line.as_bytes().first() {
            None | Some(b' ' | b'\t') => continue,
            _ if line.starts_with("//") => continue,
            _ => {}
        }
        let code = line.find("//").map_or(line, |c| &line[..c]).trim_end();
        let Some(keyword) = code.strip_suffix('(') else {
            break None;
        };
        break match keyword.trim_end() {
            "var" => Some("var"),
            "const" => Some("const"),
            "type" => Some("type"),
            _ => None,
        };
    };
    *memo = Some((start, kind));
    kind
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(lang: Lang, name: &str, text: &str) -> Vec<(usize, &'static str)> {
        let m = Matcher::new(name).unwrap();
        m.declarations(lang, text, usize::MAX)
            .into_iter()
            .map(|d| (d.line, d.kind))
            .collect()
    }

    #[test]
    fn lang_by_extension() {
        let cases = [
            ("a/b.rs", Some(Lang::Rust)),
            ("x.py", Some(Lang::Python)),
            ("x.pyi", Some(Lang::Python)),
            ("x.js", Some(Lang::JavaScript)),
            ("x.mjs", Some(Lang::JavaScript)),
            ("x.cjs", Some(Lang::JavaScript)),
            ("x.jsx", Some(Lang::JavaScript)),
            ("x.ts", Some(Lang::TypeScript)),
            ("x.mts", Some(Lang::TypeScript)),
            ("x.cts", Some(Lang::TypeScript)),
            ("x.tsx", Some(Lang::TypeScript)),
            ("x.go", Some(Lang::Go)),
            ("X.RS", Some(Lang::Rust)),
            ("x.rs.bak", None),
            ("Makefile", None),
            ("rs", None),
            (".rs", None),
            ("x.c", None),
        ];
        for (path, want) in cases {
            assert_eq!(lang_of(Path::new(path)), want, "{path}");
        }
    }

    #[test]
    fn names_are_validated() {
        for ok in ["foo", "_", "$", "$el", "Foo_9", "a".repeat(200).as_str()] {
            assert!(Matcher::new(ok).is_ok(), "{ok}");
        }
        let cases = [
            ("", "the name is empty"),
            ("9lives", "the name starts with a digit"),
            ("foo bar", "the name contains ' '"),
            ("a.b", "the name contains '.'"),
            ("foo(", "the name contains '('"),
            ("naïve", "the name contains 'ï'"),
        ];
        for (name, why) in cases {
            assert_eq!(
                Matcher::new(name).unwrap_err(),
                SymbolError::BadName(why.to_owned()),
                "{name}"
            );
        }
        let long = "a".repeat(201);
        let err = Matcher::new(&long).unwrap_err();
        assert_eq!(
            err,
            SymbolError::BadName("the name is 201 bytes long".to_owned())
        );
        let message = err.to_string();
        assert!(message.starts_with(
            "bad symbol name: the name is 201 bytes long; a name must be an identifier"
        ));
        assert!(message.contains("at most 200 bytes"));
    }

    #[test]
    fn checked_kinds_come_last() {
        // A failed check never falls through to another kind, so a line that
        // matches a checked kind must match no later kind: keep them last.
        for specs in [RUST_SPECS, PYTHON_SPECS, JS_SPECS, TS_SPECS, GO_SPECS] {
            let first_checked = specs
                .iter()
                .position(|s| !matches!(s.check, Check::Plain))
                .unwrap_or(specs.len());
            assert!(specs.len() - first_checked <= 1);
        }
    }

    #[test]
    fn may_match_checks_the_bytes() {
        let m = Matcher::new("needle").unwrap();
        assert!(m.may_match("a needles b"));
        assert!(!m.may_match("a needl e b"));
        assert!(!m.may_match(""));
        assert_eq!(m.name(), "needle");
    }

    #[test]
    fn rust_functions() {
        let src = "\
pub(crate) async fn foo<T>(x: T) {}
fn foobar() {}
fn my_foo() {}
// fn foo() {}
    /// fn foo() {}
    let y = foo(1);
    pub const unsafe extern \"C\" fn foo() {}
pub(in crate::a) fn foo() {}
    default fn foo(&self) {}
pub(super) fn r#foo() {}
    x.foo();
fn foo_() {}
  //! fn foo
fn\tfoo() {}
pub(crate) fn
foo() {}
";
        assert_eq!(
            kinds(Lang::Rust, "foo", src),
            vec![
                (1, "fn"),
                (7, "fn"),
                (8, "fn"),
                (9, "fn"),
                (10, "fn"),
                (14, "fn")
            ]
        );
    }

    #[test]
    fn rust_types_and_impls() {
        let src = "\
pub struct Foo {
struct FooBar;
enum Foo { A }
pub(crate) union Foo { a: u8 }
pub unsafe trait Foo {}
type Foo<T> = Vec<T>;
impl Display for Foo {
impl<T: Into<String>> From<T> for Foo<T> {
impl Foo {
impl<'a> Foo<'a> {
impl From<Foo> for Bar {
impl Foo for Bar {
unsafe impl<T> Send for crate::x::Foo<T> {}
let f = Foo::new();
impl FooBar {
impl fmt::Debug for &'a mut Foo {
impl<F: Fn() -> u8> Trait for Foo where F: Copy {
impl<T> Trait for Vec<Foo> {}
    type Foo = u8;
impl Foo<Bar> for Baz {}
";
        assert_eq!(
            kinds(Lang::Rust, "Foo", src),
            vec![
                (1, "struct"),
                (3, "enum"),
                (4, "union"),
                (5, "trait"),
                (6, "type"),
                (7, "impl"),
                (8, "impl"),
                (9, "impl"),
                (10, "impl"),
                (13, "impl"),
                (16, "impl"),
                (17, "impl"),
                (19, "type"),
            ]
        );
    }

    #[test]
    fn rust_items_and_macros() {
        let src = "\
pub const FOO: u32 = 1;
static mut FOO: u32 = 0;
pub(crate) static FOO: &str = \"\";
const FOO_BAR: u8 = 0;
mod FOO;
macro_rules! FOO {
    let x = FOO;
const fn FOO() {}
pub mod FOO {
    FOO!();
";
        assert_eq!(
            kinds(Lang::Rust, "FOO", src),
            vec![
                (1, "const"),
                (2, "static"),
                (3, "static"),
                (5, "mod"),
                (6, "macro"),
                (8, "fn"),
                (9, "mod"),
            ]
        );
    }

    #[test]
    fn rust_impl_targets() {
        let cases = [
            ("impl Foo {", Some("Foo")),
            ("impl<T> a::b::Foo<T> {", Some("Foo")),
            ("impl<T: Fn() -> u8> X for Y<T> where T: Copy {", Some("Y")),
            ("unsafe impl Send for r#Foo {}", Some("Foo")),
            ("impl !Send for Foo {}", Some("Foo")),
            ("impl dyn Foo + Send {", Some("Foo")),
            ("impl<T", None),
            ("implement Foo", None),
        ];
        for (line, want) in cases {
            assert_eq!(rust_impl_target(line), want, "{line}");
        }
    }

    #[test]
    fn python_declarations() {
        let src = "\
def foo(a):
class Foo:
    def foo(self):
    async def foo(self):
# def foo():
foo = 1
foo: int = 2
foo == 3
    foo = 4
foobar = 5
x = foo()
class foo(Base):
foo += 1
def foo_bar():
        def foo[T](x: T) -> T:
type foo = int
\"\"\"def foo\"\"\"
";
        assert_eq!(
            kinds(Lang::Python, "foo", src),
            vec![
                (1, "def"),
                (3, "def"),
                (4, "def"),
                (6, "variable"),
                (7, "variable"),
                (12, "class"),
                (15, "def"),
                (16, "type"),
            ]
        );
    }

    #[test]
    fn javascript_declarations() {
        let src = "\
function foo() {}
export function* foo() {}
export default async function foo() {}
const foo = 1;
let foo;
var foo = function () {};
// function foo() {}
foo();
class A {
  foo(a, b) {
  static async foo() {
  get foo() {
  foo(a, b);
  if (foo(x)) {
  foo({
  it('foo', () => {
  #foo() {
  foo(x).then(() => {
  foobar() {
}
const foobar = 1;
async function*foo() {}
  foo(a = \")\") { return a; }
  foo(cb, function () {
  *foo() {
functionfoo() {}
  foo()
";
        assert_eq!(
            kinds(Lang::JavaScript, "foo", src),
            vec![
                (1, "function"),
                (2, "function"),
                (3, "function"),
                (4, "variable"),
                (5, "variable"),
                (6, "variable"),
                (10, "method"),
                (11, "method"),
                (12, "method"),
                (17, "method"),
                (22, "function"),
                (23, "method"),
                (25, "method"),
            ]
        );
    }

    #[test]
    fn javascript_has_no_typescript_kinds() {
        let src = "interface foo {}\ntype foo = 1;\nenum foo {}\nnamespace foo {}\n";
        assert_eq!(kinds(Lang::JavaScript, "foo", src), vec![]);
        assert_eq!(
            kinds(Lang::TypeScript, "foo", src),
            vec![(1, "interface"), (2, "type"), (3, "enum"), (4, "namespace")]
        );
    }

    #[test]
    fn control_keywords_are_not_methods() {
        let src = "  if (x) {\n  for (;;) {\n  while (x) {\n  switch (x) {\n  catch (e) {\n";
        for name in ["if", "for", "while", "switch", "catch"] {
            assert_eq!(kinds(Lang::JavaScript, name, src), vec![], "{name}");
            assert_eq!(kinds(Lang::TypeScript, name, src), vec![], "{name}");
        }
    }

    #[test]
    fn typescript_declarations() {
        let src = "\
export default class Foo {}
export abstract class Foo<T> {}
interface Foo {}
export interface FooProps {}
type Foo = string;
export type Foo<T> = T[];
export const enum Foo { A }
enum Foo { A }
declare namespace Foo {}
declare module Foo {}
export declare class Foo {}
const x: Foo = y;
let y = new Foo();
export declare const Foo: number;
export declare function Foo(): void;
type Foo
";
        assert_eq!(
            kinds(Lang::TypeScript, "Foo", src),
            vec![
                (1, "class"),
                (2, "class"),
                (3, "interface"),
                (5, "type"),
                (6, "type"),
                (7, "enum"),
                (8, "enum"),
                (9, "namespace"),
                (10, "namespace"),
                (11, "class"),
                (14, "variable"),
                (15, "function"),
                (16, "type"),
            ]
        );
    }

    #[test]
    fn typescript_methods() {
        let src = "\
class A {
  private async load(id: string): Promise<void> {
  public static load<T>(x: T): T {
  abstract load(): void;
  protected load(
  load(
  load(a) { return a; }
  readonly load = 1;
  load?(x: number): string {
  load(): void
  this.load();
}
";
        assert_eq!(
            kinds(Lang::TypeScript, "load", src),
            vec![
                (2, "method"),
                (3, "method"),
                (5, "method"),
                (7, "method"),
                (9, "method")
            ]
        );
    }

    #[test]
    fn go_declarations() {
        let src = "\
package x
func Foo(a int) error {
func (r *T) Foo(a int) {
func (T) Foo() {}
type Foo struct {
var Foo = 1
const Foo = 2
func FooBar() {}
\tx := Foo(1)
// func Foo() {}
func Map[T any](x T) {}
var (
\tFoo = 3
\tBar int
\tFoo, Baz = 1, 2
)
const (
\tFoo Kind = iota
\t// Foo is next.
\tFoo
)
type (
\tFoo struct {
\t\tFoo int
\t}
)
func g() {
\tFoo = 4
\tvar Foo int
\tFoo(1)
}
func Foo[T any](x T) {}
func (l *List[T]) Foo() {}
";
        assert_eq!(
            kinds(Lang::Go, "Foo", src),
            vec![
                (2, "func"),
                (3, "method"),
                (4, "method"),
                (5, "type"),
                (6, "var"),
                (7, "const"),
                (13, "var"),
                (15, "var"),
                (18, "const"),
                (20, "const"),
                (23, "type"),
                (29, "var"),
                (32, "func"),
                (33, "method"),
            ]
        );
    }

    #[test]
    fn text_line_and_limit() {
        let src =
            "// header\r\nfn foo() {}\r\n\r\n    pub fn foo(x: u8) -> u8 { x }   \r\nfn foo() {}";
        let m = Matcher::new("foo").unwrap();
        assert_eq!(
            m.declarations(Lang::Rust, src, 10),
            vec![
                Declaration {
                    line: 2,
                    kind: "fn",
                    text: "fn foo() {}".to_owned()
                },
                Declaration {
                    line: 4,
                    kind: "fn",
                    text: "pub fn foo(x: u8) -> u8 { x }".to_owned()
                },
                Declaration {
                    line: 5,
                    kind: "fn",
                    text: "fn foo() {}".to_owned()
                },
            ]
        );
        assert_eq!(m.declarations(Lang::Rust, src, 2).len(), 2);
        assert_eq!(m.declarations(Lang::Rust, src, 0), vec![]);
        assert_eq!(m.declarations(Lang::Rust, "", 5), vec![]);
        assert_eq!(m.declarations(Lang::Rust, "fn bar() {}", 5), vec![]);
    }

    #[test]
    fn long_lines_are_cut_on_char_boundaries() {
        let body = "é".repeat(300);
        let src = format!("fn foo() {{ {body} }}\n");
        let m = Matcher::new("foo").unwrap();
        let found = m.declarations(Lang::Rust, &src, 1);
        assert_eq!(found.len(), 1);
        let text = &found[0].text;
        assert_eq!(text.chars().count(), MAX_TEXT_CHARS + 1);
        assert!(text.starts_with("fn foo() { éé"));
        assert!(text.ends_with("é…"));
        let exact = format!("fn foo() {{{}}}", "x".repeat(MAX_TEXT_CHARS - 11));
        assert_eq!(exact.chars().count(), MAX_TEXT_CHARS);
        assert_eq!(m.declarations(Lang::Rust, &exact, 1)[0].text, exact);
    }

    #[test]
    fn dollar_names() {
        let src = "const $el = 1;\nconst $elem = 2;\nfunction $() {}\n";
        assert_eq!(kinds(Lang::JavaScript, "$el", src), vec![(1, "variable")]);
        assert_eq!(kinds(Lang::JavaScript, "$", src), vec![(3, "function")]);
    }

    #[test]
    fn large_text() {
        let mut src = String::new();
        let mut want = Vec::new();
        for i in 0..64_000 {
            if i % 7_500 == 0 {
                src.push_str("pub fn needle(x: u32) -> u32 {\n");
                want.push((i + 1, "fn"));
            } else if i % 7_500 == 3_000 {
                src.push_str("impl Haystack for needle {\n");
                want.push((i + 1, "impl"));
            } else {
                src.push_str(
                    "    let value = needle_helper(my_needle, needle(x)); // fn needle, not declared\n",
                );
            }
        }
        assert!(src.len() > 5_000_000);
        let m = Matcher::new("needle").unwrap();
        assert!(m.may_match(&src));
        assert_eq!(kinds(Lang::Rust, "needle", &src), want);
        let first = m.declarations(Lang::Rust, &src, 3);
        assert_eq!(
            first.iter().map(|d| d.line).collect::<Vec<_>>(),
            vec![1, 3_001, 7_501]
        );
        assert_eq!(first[1].text, "impl Haystack for needle {");
        assert!(!Matcher::new("needles").unwrap().may_match(&src));
    }
}
