//! The algebra of the path-scoped file tools (`read_file`, `write_file`, `edit_file`, `find`).

use super::default::{sample_rows, value_contains};
use super::Algebra;
use crate::lattice::grant::{Grant, Row};
use std::sync::Arc;

use crate::lattice::path::{is_clean_absolute, path_within, NormCache, PathCtx};
use crate::lattice::rng::Rng;
use crate::lattice::row_map::{Known, RowMap};
use crate::lattice::value::Value;

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
            (Some(roots), Some(subs)) => all_within(paths, [roots, &[]], subs),
            _ => false,
        },
    }
}

/// True when every element of `subs` lies within some element of the two root lists. Paths compare after
/// normalisation; clean absolute paths (the canonical form, see [`Algebra::canonicalize`]) are used as they are, and
/// each element of `subs` is normalised once, not once per root. Non-string elements compare by equality.
fn all_within(paths: &Paths, roots: [&[Value]; 2], subs: &[Value]) -> bool {
    'subs: for sub in subs {
        let Value::Str(raw) = sub else {
            let mut roots = roots.iter().flat_map(|list| list.iter());
            if roots.any(|root| !matches!(root, Value::Str(_)) && root == sub) {
                continue;
            }
            return false;
        };
        let normed;
        let sub: &str = if is_clean_absolute(raw) {
            raw
        } else {
            normed = paths.norm(raw);
            &normed
        };
        for list in roots {
            for root in list {
                let within = match root {
                    Value::Str(r) if is_clean_absolute(r) => path_within(r, sub),
                    Value::Str(r) => path_within(&paths.norm(r), sub),
                    _ => false,
                };
                if within {
                    continue 'subs;
                }
            }
        }
        return false;
    }
    true
}

/// Rewrites the path kinds of every row to their normalised absolute form (see [`Algebra::canonicalize`]). Rows
/// that are already canonical are kept (shared, not copied); a row is copied only if no other grant shares it.
pub(crate) fn canonicalize_paths(paths: &Paths, g: Grant) -> Grant {
    let Grant::Set(rows) = g else {
        return Grant::Unrestricted;
    };
    Grant::set(rows.into_iter().map(|r| canonical_row(paths, r)).collect())
}

fn canonical_row(paths: &Paths, mut row: Row) -> Row {
    let needs = |kind| row.0.known(kind).is_some_and(needs_canonical);
    let (rw, ro) = (needs(Known::Paths), needs(Known::ReadPaths));
    if !rw && !ro {
        return row;
    }
    let changes = |kind: &str| (rw && kind == "paths") || (ro && kind == "read_paths");
    match Arc::get_mut(&mut row.0) {
        // a row no one else holds is changed in place
        Some(map) => {
            for kind in ["paths", "read_paths"] {
                if let Some(Value::List(items)) = map.get_mut(kind).filter(|_| changes(kind)) {
                    for v in items.iter_mut() {
                        if let Value::Str(s) = v {
                            if !is_clean_absolute(s) {
                                *s = String::from(&*paths.norm(s));
                            }
                        }
                    }
                    items.sort();
                    items.dedup();
                }
            }
            row
        }
        // a shared row is rebuilt, its path lists normalised as they are copied
        None => Row::from(
            row.0
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::List(items) if changes(k) => Value::list(
                            items
                                .iter()
                                .map(|v| match v {
                                    Value::Str(s) if !is_clean_absolute(s) => {
                                        Value::Str(String::from(&*paths.norm(s)))
                                    }
                                    other => other.clone(),
                                })
                                .collect(),
                        ),
                        other => other.clone(),
                    };
                    (k.clone(), v)
                })
                .collect::<RowMap>(),
        ),
    }
}

/// True when a path list is not yet canonical: an element that normalisation would change, or not a sorted set.
fn needs_canonical(v: &Value) -> bool {
    match v {
        Value::List(items) => {
            items
                .iter()
                .any(|v| matches!(v, Value::Str(s) if !is_clean_absolute(s)))
                || !items.windows(2).all(|w| w[0] < w[1])
        }
        _ => false,
    }
}

/// The two path kinds of a row, found by index (see [`Known`]).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PathKinds<'a> {
    /// `paths` (read-write roots).
    pub(crate) paths: Option<&'a Value>,
    /// `read_paths` (read-only roots).
    pub(crate) read_paths: Option<&'a Value>,
}

impl<'a> PathKinds<'a> {
    pub(crate) fn of(row: &'a Row) -> PathKinds<'a> {
        PathKinds {
            paths: row.0.known(Known::Paths),
            read_paths: row.0.known(Known::ReadPaths),
        }
    }

    /// Does this row (the super side) cover the path kinds of `sub`? A kind `sub` lacks asks for nothing.
    pub(crate) fn cover(&self, paths: &Paths, sub: &PathKinds<'_>) -> bool {
        sub.paths.is_none_or(|v| self.covers_paths(paths, v))
            && sub
                .read_paths
                .is_none_or(|v| self.covers_read_paths(paths, v))
    }

    /// `paths = sub`: only `paths` roots cover read-write paths.
    fn covers_paths(&self, paths: &Paths, sub: &Value) -> bool {
        self.paths.is_some_and(|p| paths_contains(paths, p, sub))
    }

    /// `read_paths = sub`: read-write and read-only roots both cover read-only paths.
    fn covers_read_paths(&self, paths: &Paths, sub: &Value) -> bool {
        let (rw, ro) = (self.paths, self.read_paths);
        if matches!(rw, Some(Value::Star)) || matches!(ro, Some(Value::Star)) {
            return true;
        }
        let Some(subs) = sub.as_set() else {
            return false;
        };
        let roots = |v: Option<&'a Value>| v.and_then(Value::as_set).unwrap_or_default();
        all_within(paths, [roots(rw), roots(ro)], subs)
    }
}

/// Row containment for the file tools: path kinds by [`PathKinds`], every other kind by the default value order.
fn files_row_contains(paths: &Paths, sup: &Row, sub: &Row) -> bool {
    let (s, t) = (PathKinds::of(sup), PathKinds::of(sub));
    let path_kinds = usize::from(t.paths.is_some()) + usize::from(t.read_paths.is_some());
    s.cover(paths, &t)
        // every other kind by the default value order
        && (sub.0.len() == path_kinds
            || sub.0.iter().all(|(k, v)| {
                matches!(k.as_str(), "paths" | "read_paths")
                    || sup.get(k).is_some_and(|s| value_contains(s, v))
            }))
}

impl Algebra for FilesAlgebra {
    fn name(&self) -> &'static str {
        "files"
    }

    fn row_contains(&self, sup: &Row, sub: &Row) -> bool {
        files_row_contains(&self.paths, sup, sub)
    }

    fn canonicalize(&self, g: &Grant) -> Grant {
        canonicalize_paths(&self.paths, g.clone())
    }

    fn canonicalize_owned(&self, g: Grant) -> Grant {
        canonicalize_paths(&self.paths, g)
    }

    fn sample(&self, rng: &mut Rng) -> Grant {
        sample_rows(rng, |rng| {
            let mut row: [Option<Value>; Known::COUNT] = Default::default();
            if rng.one_in(2) {
                row[Known::Paths as usize] = Some(sample_paths(rng));
            }
            if rng.one_in(2) {
                row[Known::ReadPaths as usize] = Some(sample_paths(rng));
            }
            Row::from(RowMap::of_known(row))
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

    use crate::lattice::grant::test_grant as g;

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
    fn other_kinds_use_the_default_order() {
        // bash's kinds (and any other) mean nothing special to the file tools
        for kind in ["commands", "env", "network", "mode"] {
            let sub = format!("{{ paths = [\"./a\"], {kind} = [\"x\"] }}");
            contains("{ paths = [\"./\"] }", &sub, false);
            contains(
                &format!("{{ paths = [\"./\"], {kind} = [\"x\", \"y\"] }}"),
                &sub,
                true,
            );
            contains(
                &format!("{{ paths = [\"./\"], {kind} = [\"y\"] }}"),
                &sub,
                false,
            );
        }
    }

    #[test]
    fn canonicalize_owned_is_canonicalize() {
        // the boot check canonicalises b and c by value; it must get what canonicalize(&g) gives
        let ctx = PathCtx::new("/tmp/work", Some("/home/u".into()));
        for alg in [
            Box::new(FilesAlgebra::new(ctx.clone())) as Box<dyn Algebra>,
            Box::new(super::super::BashAlgebra::new(ctx)),
        ] {
            let mut rng = Rng::seeded(3);
            for _ in 0..500 {
                let g = alg.sample(&mut rng);
                let before = g.to_toml();
                assert_eq!(alg.canonicalize_owned(g.clone()), alg.canonicalize(&g));
                // rows shared with `g` are copied before they change, never changed under it
                assert_eq!(g.to_toml(), before);
            }
        }
        // a list out of order is sorted, even when every path is already clean
        let unsorted = Grant::row(Row::from_pairs([(
            "paths",
            Value::List(vec![Value::Str("/b".into()), Value::Str("/a".into())]),
        )]));
        let files = FilesAlgebra::new(PathCtx::new("/w", None));
        assert_eq!(
            files.canonicalize(&unsorted),
            g("{ paths = [\"/a\", \"/b\"] }")
        );
    }

    #[test]
    fn an_empty_request_is_contained_by_every_grant() {
        contains("{}", "{}", true);
        contains("{ paths = [\"./\"] }", "{}", true);
        contains("{ paths = [] }", "{ paths = [] }", true);
    }
}
