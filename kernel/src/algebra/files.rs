//! The algebra of the path-scoped file tools (`read_file`, `write_file`, `edit_file`, `find`).

use super::default::{sample_rows, value_contains};
use super::Algebra;
use crate::grant::{Grant, Row};
use crate::path::PathCtx;
use crate::rng::Rng;
use crate::value::Value;

/// Path kinds compare by lexical containment after normalisation against [`PathCtx`]; `paths` (read-write) contains
/// `read_paths` (read-only). Every other kind uses the default value order.
#[derive(Debug, Clone)]
pub struct FilesAlgebra {
    ctx: PathCtx,
}

impl FilesAlgebra {
    /// The algebra for grants whose relative paths resolve against `ctx`.
    pub fn new(ctx: PathCtx) -> FilesAlgebra {
        FilesAlgebra { ctx }
    }
}

/// Does the path-list value `sup` cover the path-list value `sub`? `"*"` covers any path; a list covers a list when
/// every path of the smaller lies at or below some root of the larger. Non-string elements compare by equality.
pub fn paths_value_contains(ctx: &PathCtx, sup: &Value, sub: &Value) -> bool {
    match (sup, sub) {
        (Value::Star, _) => true,
        (_, Value::Star) => false,
        _ => match (sup.elements(), sub.elements()) {
            (Some(roots), Some(subs)) => subs
                .iter()
                .all(|s| roots.iter().any(|r| path_elem_within(ctx, r, s))),
            _ => false,
        },
    }
}

fn path_elem_within(ctx: &PathCtx, root: &Value, sub: &Value) -> bool {
    match (root, sub) {
        (Value::Str(r), Value::Str(s)) => ctx.contains(r, s),
        _ => root == sub,
    }
}

/// Row containment over `paths` and `read_paths`, shared by the file tools and bash. Returns `None` for other kinds.
pub(crate) fn path_kind_contains(
    ctx: &PathCtx,
    sup: &Row,
    kind: &str,
    sub: &Value,
) -> Option<bool> {
    match kind {
        "paths" => Some(
            sup.get("paths")
                .is_some_and(|p| paths_value_contains(ctx, p, sub)),
        ),
        "read_paths" => {
            let rw = sup.get("paths");
            let ro = sup.get("read_paths");
            if matches!(rw, Some(Value::Star)) || matches!(ro, Some(Value::Star)) {
                return Some(true);
            }
            let Some(subs) = sub.elements() else {
                return Some(false);
            };
            let roots: Vec<&Value> = [rw, ro]
                .into_iter()
                .flatten()
                .filter_map(Value::elements)
                .flatten()
                .collect();
            Some(
                subs.iter()
                    .all(|s| roots.iter().any(|r| path_elem_within(ctx, r, s))),
            )
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
            .all(|(k, v)| match path_kind_contains(&self.ctx, sup, k, v) {
                Some(ok) => ok,
                None => sup.get(k).is_some_and(|s| value_contains(s, v)),
            })
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

pub(crate) fn sample_paths(rng: &mut Rng) -> Value {
    if rng.one_in(6) {
        Value::Star
    } else {
        Value::strs(rng.subset(&SAMPLE_PATHS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(src: &str) -> Grant {
        let t: toml::Table = toml::from_str(&format!("g = {src}")).unwrap();
        Grant::from_toml(&t["g"]).unwrap()
    }

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
