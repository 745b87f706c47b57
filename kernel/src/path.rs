//! Lexical path normalisation and containment.
//!
//! Paths in grants are compared lexically, never by touching the filesystem: the caller passes the base directory
//! (the manifest's directory or the working directory) and the home directory as facts. Symlinks are the runtime's
//! business: it canonicalises a request before asking the kernel, and the sandbox binds roots by descriptor.

/// Facts the path algebra needs to read a relative or `~` path.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PathCtx {
    /// Absolute directory that relative paths (`./`, `src`, `..`) resolve against.
    pub base: String,
    /// Absolute home directory that `~` expands to; `None` keeps `~` as its own root.
    pub home: Option<String>,
}

impl PathCtx {
    /// A context with a base directory and a home directory.
    pub fn new(base: impl Into<String>, home: Option<String>) -> PathCtx {
        PathCtx {
            base: base.into(),
            home,
        }
    }

    /// Normalises `raw`: expands `~`, resolves relative paths against `base`, removes `.` and `..` and duplicate
    /// slashes. The result is absolute (starts with `/`), or starts with `~` when there is no home to expand to.
    /// `..` never climbs above the root.
    pub fn normalize(&self, raw: &str) -> String {
        let joined = if raw == "~" || raw.starts_with("~/") {
            match &self.home {
                Some(home) => format!("{home}/{}", &raw[1..]),
                None => raw.to_string(),
            }
        } else if raw.starts_with('/') {
            raw.to_string()
        } else {
            format!("{}/{raw}", self.base)
        };
        let (root, rest) = match joined.strip_prefix('~') {
            Some(rest) => ("~", rest),
            None => ("", joined.as_str()),
        };
        let mut parts: Vec<&str> = Vec::new();
        for seg in rest.split('/') {
            match seg {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                s => parts.push(s),
            }
        }
        if root == "~" && parts.is_empty() {
            return "~".into();
        }
        format!("{root}/{}", parts.join("/"))
    }

    /// True when `sub` lies at or below `root`, after normalising both.
    pub fn contains(&self, root: &str, sub: &str) -> bool {
        path_within(&self.normalize(root), &self.normalize(sub))
    }
}

/// True when normalised path `sub` equals normalised `root` or lies below it. `/` contains every absolute path;
/// `/tmp/work` contains `/tmp/work/a` but not `/tmp/workother`.
pub fn path_within(root: &str, sub: &str) -> bool {
    if root == "/" {
        return sub.starts_with('/');
    }
    match sub.strip_prefix(root) {
        Some("") => true,
        Some(rest) => rest.starts_with('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> PathCtx {
        PathCtx::new("/tmp/work", Some("/home/u".into()))
    }

    #[track_caller]
    fn norm(raw: &str, want: &str) {
        assert_eq!(ctx().normalize(raw), want, "normalize({raw:?})");
    }

    #[test]
    fn normalisation_table() {
        norm("./", "/tmp/work");
        norm(".", "/tmp/work");
        norm("src/../lib", "/tmp/work/lib");
        norm("../x", "/tmp/x");
        norm("~", "/home/u");
        norm("~/.ssh", "/home/u/.ssh");
        norm("/a//b/./c/", "/a/b/c");
        norm("/../..", "/");
        norm("/", "/");
    }

    #[test]
    fn tilde_without_home_stays_its_own_root() {
        let c = PathCtx::new("/w", None);
        assert_eq!(c.normalize("~/x/../y"), "~/y");
        assert!(!c.contains("/", "~/y"));
        assert!(c.contains("~", "~/y"));
    }

    #[test]
    fn containment_table() {
        let c = ctx();
        for (root, sub, want) in [
            ("/tmp/work", "/tmp/work/a", true),
            ("/tmp/work", "/tmp/work", true),
            ("/tmp/work", "/tmp/workother", false),
            ("/tmp/work", "/tmp", false),
            ("/", "/etc/passwd", true),
            ("./", "./src/main.rs", true),
            ("./src", "./", false),
            ("./", "../sibling", false),
            ("./", "./a/../../escape", false),
            ("~", "/home/u/x", true),
        ] {
            assert_eq!(c.contains(root, sub), want, "contains({root:?}, {sub:?})");
        }
    }
}
