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
        if is_clean_absolute(raw) {
            return raw.to_string();
        }
        let (root, prefix, rest) = if raw == "~" || raw.starts_with("~/") {
            match &self.home {
                Some(home) => ("", home.as_str(), &raw[1..]),
                None => ("~", "", &raw[1..]),
            }
        } else if raw.starts_with('/') {
            ("", "", raw)
        } else {
            ("", self.base.as_str(), raw)
        };
        // one allocation: segments are appended as `/seg`, and `..` truncates back to the previous slash
        let mut out = String::with_capacity(root.len() + prefix.len() + rest.len() + 2);
        out.push_str(root);
        for seg in prefix.split('/').chain(rest.split('/')) {
            match seg {
                "" | "." => {}
                ".." => {
                    if let Some(i) = out.rfind('/') {
                        out.truncate(i.max(root.len()));
                    }
                }
                s => {
                    out.push('/');
                    out.push_str(s);
                }
            }
        }
        if out.len() == root.len() && root.is_empty() {
            out.push('/');
        }
        out
    }

    /// True when `sub` lies at or below `root`, after normalising both.
    pub fn contains(&self, root: &str, sub: &str) -> bool {
        path_within(&self.normalize(root), &self.normalize(sub))
    }
}

/// A bounded memo of [`PathCtx::normalize`] for one context. Containment compares the same few grant paths many
/// times (every row pair of every check), so algebras normalise each distinct string once. Pure: the memo is only an
/// optimisation and never changes an answer; it is cleared when it reaches [`NormCache::CAPACITY`] entries.
#[derive(Debug, Default)]
pub struct NormCache {
    map: std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<str>>>,
}

impl NormCache {
    /// The most entries kept before the memo starts over.
    pub const CAPACITY: usize = 4096;

    /// `ctx.normalize(raw)`, memoised.
    pub fn normalize(&self, ctx: &PathCtx, raw: &str) -> std::sync::Arc<str> {
        let Ok(mut map) = self.map.lock() else {
            // a poisoned memo is only a lost optimisation
            return ctx.normalize(raw).into();
        };
        if let Some(hit) = map.get(raw) {
            return hit.clone();
        }
        if map.len() >= Self::CAPACITY {
            map.clear();
        }
        let n: std::sync::Arc<str> = ctx.normalize(raw).into();
        map.insert(raw.to_string(), n.clone());
        n
    }
}

impl Clone for NormCache {
    fn clone(&self) -> Self {
        NormCache::default()
    }
}

/// True for an absolute path that normalisation would leave unchanged: no empty, `.` or `..` segment and no
/// trailing slash (except `/` itself). The common case, so it skips the rebuild.
pub(crate) fn is_clean_absolute(raw: &str) -> bool {
    // one pass over the bytes: at every `/`, the next segment must be non-empty and neither `.` nor `..`
    let b = raw.as_bytes();
    if b == b"/" {
        return true;
    }
    if b.first() != Some(&b'/') {
        return false;
    }
    let mut i = 0;
    loop {
        let rest = &b[i + 1..];
        let seg_len = rest.iter().position(|&c| c == b'/').unwrap_or(rest.len());
        if matches!(&rest[..seg_len], b"" | b"." | b"..") {
            return false;
        }
        if seg_len == rest.len() {
            return true;
        }
        i += 1 + seg_len;
    }
}

/// Why a relative grant path (`./`, `docs`, `../x`) lands somewhere its author probably did not mean, or `None`.
/// Relative grant paths resolve against the directory loom runs from (`ctx.base`), not the manifest's, so the same
/// manifest grants different directories depending on where it is run. Warned, in this order: a `..` component; a
/// path that resolves to `/`; one that covers the home directory; one outside `manifest_dir` (absolute, normalised).
/// Absolute and `~` paths say where they land and are never warned about here.
pub fn landing_warning(ctx: &PathCtx, manifest_dir: &str, raw: &str) -> Option<String> {
    if raw.starts_with('/') || raw == "~" || raw.starts_with("~/") || raw == "*" {
        return None;
    }
    let resolved = ctx.normalize(raw);
    let run_from = format!(
        "relative grant paths resolve against the directory loom runs from ({})",
        ctx.base
    );
    if raw.split('/').any(|c| c == "..") {
        return Some(format!(
            "`{raw}` climbs out with `..` to {resolved}; {run_from}, so write the absolute path you mean"
        ));
    }
    if resolved == "/" {
        return Some(format!(
            "`{raw}` resolves to / (the whole filesystem); {run_from}"
        ));
    }
    if let Some(home) = ctx.home.as_deref() {
        if path_within(&resolved, home) {
            return Some(format!(
                "`{raw}` resolves to {resolved}, which covers your home directory (~/.ssh, shell profiles); \
                 {run_from} — run loom from the project's directory, or write the absolute path you mean"
            ));
        }
    }
    if !path_within(manifest_dir, &resolved) {
        return Some(format!(
            "`{raw}` resolves to {resolved}, outside the manifest's directory {manifest_dir}; {run_from} — run loom \
             from the manifest's directory, or write the absolute path you mean"
        ));
    }
    None
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

    #[test]
    fn a_relative_grant_that_lands_badly_is_named() {
        let at = |base: &str, raw: &str| {
            landing_warning(
                &PathCtx::new(base, Some("/home/u".into())),
                "/home/u/proj",
                raw,
            )
        };
        // run from the project: fine
        assert_eq!(at("/home/u/proj", "./"), None);
        assert_eq!(at("/home/u/proj", "docs"), None);
        // absolute and ~ paths say where they land
        assert_eq!(at("/", "/etc"), None);
        assert_eq!(at("/", "~/notes"), None);
        // run from ~: the minimal example grants the home directory
        let home = at("/home/u", "./").unwrap();
        assert!(home.contains("covers your home directory"), "{home}");
        assert!(at("/", "./")
            .unwrap()
            .contains("resolves to / (the whole filesystem)"));
        assert!(at("/home/u/proj", "../")
            .unwrap()
            .contains("climbs out with `..`"));
        let elsewhere = at("/tmp/x", "./").unwrap();
        assert!(
            elsewhere.contains("outside the manifest's directory /home/u/proj"),
            "{elsewhere}"
        );
    }

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
    fn clean_absolute_paths() {
        for (p, want) in [
            ("/", true),
            ("/a", true),
            ("/a/b.c/..d", true),
            ("/a/", false),
            ("//a", false),
            ("/a//b", false),
            ("/./a", false),
            ("/a/.", false),
            ("/a/../b", false),
            ("/a/..", false),
            ("a", false),
            ("", false),
            ("~/a", false),
        ] {
            assert_eq!(is_clean_absolute(p), want, "{p:?}");
            if want {
                assert_eq!(ctx().normalize(p), p, "a clean path normalises to itself");
            }
        }
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
