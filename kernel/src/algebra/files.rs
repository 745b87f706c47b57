//! The algebra of the path-scoped file tools (`read_file`, `write_file`, `edit_file`, `find`).

use super::default::{sample_rows, value_contains};
use super::Algebra;
use crate::grant::{Grant, Row};
use std::sync::Arc;

use crate::path::{is_clean_absolute, path_within, NormCache, PathCtx};
use crate::rng::Rng;
use crate::value::Value;

/// Path kinds compare by lexical containment after normalisation against [`PathCtx`]; `paths` (read-write) contains
/// `read_paths` (read-only). Every other kind uses the default value order.
#[derive(Debug, Clone)]
pub struct FilesAlgebra {
    paths: Paths,
}

impl FilesAlgebra {
    /// The algebra for grants whose relative paths resolve against `ctx`.
    pub fn new(ctx: PathCtx) -> FilesAlgebra {
        FilesAlgebra {
            paths: Paths::new(ctx),
        }
    }
}

/// A path context with its normalisation memo: what the path kinds of every algebra compare with.
#[derive(Debug, Clone)]
pub struct Paths {
    ctx: PathCtx,
    cache: NormCache,
}

impl Paths {
    /// Paths resolved against `ctx`.
    pub fn new(ctx: PathCtx) -> Paths {
        Paths {
            ctx,
            cache: NormCache::default(),
        }
    }

    fn norm(&self, raw: &str) -> Arc<str> {
        self.cache.normalize(&self.ctx, raw)
    }
}

/// Does the path-list value `sup` cover the path-list value `sub`? `"*"` covers any path; a list covers a list when
/// every path of the smaller lies at or below some root of the larger. Non-string elements compare by equality.
pub fn paths_value_contains(ctx: &PathCtx, sup: &Value, sub: &Value) -> bool {
    paths_contains(&Paths::new(ctx.clone()), sup, sub)
}

fn paths_contains(paths: &Paths, sup: &Value, sub: &Value) -> bool {
    match (sup, sub) {
        (Value::Star, _) => true,
        (_, Value::Star) => false,
        _ => match (sup.as_set(), sub.as_set()) {
            (Some(roots), Some(subs)) => all_within(paths, roots.iter(), subs),
            _ => false,
        },
    }
}

/// A path element normalised once, so a list-against-list comparison normalises each element once, not per pair.
/// Clean absolute paths (the canonical form, see [`Algebra::canonicalize`]) are used as they are.
enum Norm<'a> {
    Clean(&'a str),
    Path(Arc<str>),
    Other(&'a Value),
}

impl Norm<'_> {
    fn path(&self) -> Option<&str> {
        match self {
            Norm::Clean(s) => Some(s),
            Norm::Path(s) => Some(s),
            Norm::Other(_) => None,
        }
    }
}

fn norm<'a>(paths: &Paths, v: &'a Value) -> Norm<'a> {
    match v {
        Value::Str(s) if is_clean_absolute(s) => Norm::Clean(s),
        Value::Str(s) => Norm::Path(paths.norm(s)),
        other => Norm::Other(other),
    }
}

fn within(root: &Norm<'_>, sub: &Norm<'_>) -> bool {
    match (root.path(), sub.path(), root, sub) {
        (Some(r), Some(s), _, _) => path_within(r, s),
        (None, None, Norm::Other(r), Norm::Other(s)) => r == s,
        _ => false,
    }
}

/// True when every element of `subs` lies within some element of `roots`.
fn all_within<'r>(
    paths: &Paths,
    roots: impl Iterator<Item = &'r Value> + Clone,
    subs: &[Value],
) -> bool {
    subs.iter().all(|s| {
        let s = norm(paths, s);
        roots.clone().any(|r| within(&norm(paths, r), &s))
    })
}

/// Rewrites the path kinds of every row to their normalised absolute form (see [`Algebra::canonicalize`]).
pub(crate) fn canonicalize_paths(paths: &Paths, g: &Grant) -> Grant {
    let Grant::Set(rows) = g else {
        return Grant::Unrestricted;
    };
    Grant::set(
        rows.iter()
            .map(|r| {
                let mut r = r.clone();
                for kind in ["paths", "read_paths"] {
                    if let Some(Value::List(items)) = r.0.get(kind) {
                        let items = items
                            .iter()
                            .map(|v| match v {
                                Value::Str(s) => Value::Str(paths.norm(s).to_string()),
                                other => other.clone(),
                            })
                            .collect();
                        r.insert(kind, Value::list(items));
                    }
                }
                r
            })
            .collect(),
    )
}

/// Row containment over `paths` and `read_paths`, shared by the file tools and bash. Returns `None` for other kinds.
pub(crate) fn path_kind_contains(
    paths: &Paths,
    sup: &Row,
    kind: &str,
    sub: &Value,
) -> Option<bool> {
    match kind {
        "paths" => Some(
            sup.get("paths")
                .is_some_and(|p| paths_contains(paths, p, sub)),
        ),
        "read_paths" => {
            let rw = sup.get("paths");
            let ro = sup.get("read_paths");
            if matches!(rw, Some(Value::Star)) || matches!(ro, Some(Value::Star)) {
                return Some(true);
            }
            let Some(subs) = sub.as_set() else {
                return Some(false);
            };
            let roots = [rw, ro]
                .into_iter()
                .flatten()
                .filter_map(Value::as_set)
                .flatten();
            Some(all_within(paths, roots, subs))
        }
        _ => None,
    }
}

impl Algebra for FilesAlgebra {
    fn name(&self) -> &'static str {
        "files"
    }

    fn row_contains(&self, sup: &Row, sub: &Row) -> bool {
        sub.0
            .iter()
            .all(|(k, v)| match path_kind_contains(&self.paths, sup, k, v) {
                Some(ok) => ok,
                None => sup.get(k).is_some_and(|s| value_contains(s, v)),
            })
    }

    fn canonicalize(&self, g: &Grant) -> Grant {
        canonicalize_paths(&self.paths, g)
    }

    fn sample(&self, rng: &mut Rng) -> Grant {
        sample_rows(rng, |rng| {
            let mut row = Vec::new();
            if rng.one_in(2) {
                row.push(("paths", sample_paths(rng)));
            }
            if rng.one_in(2) {
                row.push(("read_paths", sample_paths(rng)));
            }
            Row::from_pairs(row)
        })
    }
}

/// Paths chosen so that containment chains, siblings, `..`, `~` and the root all occur.
pub(crate) const SAMPLE_PATHS: [&str; 9] = [
    "./",
    "./src",
    "./src/a",
    "src/../lib",
    "/",
    "/tmp/work",
    "/tmp/workother",
    "../x",
    "~/.cfg",
];

/// `"*"`, or a list of up to two of [`SAMPLE_PATHS`].
pub(crate) fn sample_paths(rng: &mut Rng) -> Value {
    if rng.one_in(6) {
        return Value::Star;
    }
    let n = rng.below(3);
    Value::strs((0..n).map(|_| *rng.pick(&SAMPLE_PATHS)))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::grant::test_grant as g;

    #[track_caller]
    fn contains(sup: &str, sub: &str, want: bool) {
        let alg = FilesAlgebra::new(PathCtx::new("/tmp/work", Some("/home/u".into())));
        assert_eq!(
            alg.contains(&g(sup), &g(sub)),
            want,
            "contains({sup}, {sub})"
        );
    }

    #[test]
    fn lexical_containment() {
        contains("{ paths = [\"./\"] }", "{ paths = [\"./src\"] }", true);
        contains("{ paths = [\"./src\"] }", "{ paths = [\"./\"] }", false);
        contains("{ paths = [\"/tmp/work\"] }", "{ paths = [\"./a\"] }", true);
        contains(
            "{ paths = [\"/tmp/work\"] }",
            "{ paths = [\"/tmp/workother\"] }",
            false,
        );
        contains(
            "{ paths = [\"/\"] }",
            "{ paths = [\"/etc\", \"~/x\"] }",
            true,
        );
        contains(
            "{ paths = [\"./\"] }",
            "{ paths = [\"./a/../../b\"] }",
            false,
        );
        contains("{ paths = [\"./\"] }", "{ paths = \"*\" }", false);
        contains("{ paths = \"*\" }", "{ paths = [\"/\"] }", true);
    }

    #[test]
    fn paths_contains_read_paths_but_not_the_reverse() {
        contains(
            "{ paths = [\"./\"] }",
            "{ read_paths = [\"./docs\"] }",
            true,
        );
        contains(
            "{ read_paths = [\"./\"] }",
            "{ paths = [\"./docs\"] }",
            false,
        );
        contains("{ paths = \"*\" }", "{ read_paths = \"*\" }", true);
        contains("{ read_paths = \"*\" }", "{ paths = [\"/\"] }", false);
        contains(
            "{ paths = [\"./a\"], read_paths = [\"./b\"] }",
            "{ read_paths = [\"./a/x\", \"./b/y\"] }",
            true,
        );
    }

    #[test]
    fn an_empty_request_is_contained_by_every_grant() {
        contains("{}", "{}", true);
        contains("{ paths = [\"./\"] }", "{}", true);
        contains("{ paths = [] }", "{ paths = [] }", true);
    }
}
