//! The bash tool's algebra: per row over `commands`, `paths`, `read_paths`, `network` and `env`.

use super::default::{sample_rows, sample_strs, value_contains};
use super::files::{canonicalize_paths, sample_paths, PathKinds, Paths};
use super::Algebra;
use crate::lattice::grant::{Grant, Row};
use crate::lattice::path::PathCtx;
use crate::lattice::rng::Rng;
use crate::lattice::row_map::{Known, RowMap};
use crate::lattice::value::Value;

/// Tier 1 of bash's environment: always inherited, never overridable (locale and terminal plumbing).
pub const ENV_TIER1: [&str; 10] = [
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "COLORTERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
];
/// Tier 2: inherited by default (when `env` is absent), dropped when `env` is an explicit list.
pub const ENV_TIER2: [&str; 6] = ["PATH", "PWD", "TMPDIR", "EDITOR", "VISUAL", "PAGER"];

/// bash compares one row at a time:
/// - `commands`: `"*"` (shell mode) contains every command list; a list contains its subsets.
/// - `paths` / `read_paths`: lexical path containment; `paths` contains `read_paths`.
/// - `network`: `"*"` is on; absent or `[]` is off; off is contained by everything, on only by on.
/// - `env`: compared as the set of variables the command would see beyond tier 1: absent means tier 2, a list means
///   its names and `PREFIX_*` patterns, `"*"` means all. Tier-1 names are always covered.
#[derive(Debug, Clone)]
pub struct BashAlgebra {
    paths: Paths,
    /// Variable names that carry a shared secret: named exactly in a sub-row, only an exact name covers them.
    secret_names: Vec<String>,
}

impl BashAlgebra {
    /// The algebra for grants whose relative paths resolve against `ctx`.
    pub fn new(ctx: PathCtx) -> BashAlgebra {
        BashAlgebra {
            paths: Paths::new(ctx),
            secret_names: Vec::new(),
        }
    }

    /// The same order, made secret-aware: a secret in `[agent] secrets` reaches a command only through a row whose
    /// `env` names it exactly (see [`crate::env_var_passes`]), so an `env` that names one of `secrets` (under any of
    /// the [`crate::secret_env_names`] it is looked up by) exactly is covered only by an `env` naming it exactly —
    /// never by `"*"`, a `PREFIX_*` pattern or tier 2. Still a preorder: exactness is kept along every chain.
    pub fn with_secrets(mut self, secrets: &[String]) -> BashAlgebra {
        let mut names: Vec<String> = secrets
            .iter()
            .flat_map(|s| crate::policy::secrets::secret_env_names(s))
            .collect();
        names.sort();
        names.dedup();
        self.secret_names = names;
        self
    }

    /// True when every secret-carrying name that `sub` lists exactly is listed exactly by `sup` as well.
    fn secrets_named_exactly(&self, sup: Option<&Value>, sub: Option<&Value>) -> bool {
        if self.secret_names.is_empty() {
            return true;
        }
        let Some(subs) = sub.and_then(Value::as_set) else {
            return true;
        };
        let sups = sup.and_then(Value::as_set).unwrap_or_default();
        subs.iter().all(|v| match v.as_str() {
            Some(name) if self.secret_names.iter().any(|n| n == name) => sups.contains(v),
            _ => true,
        })
    }
}

/// A `network` value read as a level: off (absent, `false`, `[]`) below any other spelling, which is below on
/// (`"*"`, `true`). Other spellings (a host list, a string) contain only themselves: the sandbox refuses them, but
/// the order stays a partial order whatever a manifest writes.
enum Net<'a> {
    Off,
    Other(&'a Value),
    On,
}

fn net(v: Option<&Value>) -> Net<'_> {
    match v {
        None | Some(Value::Bool(false)) => Net::Off,
        Some(Value::List(items)) if items.is_empty() => Net::Off,
        Some(Value::Star) | Some(Value::Bool(true)) => Net::On,
        Some(other) => Net::Other(other),
    }
}

fn network_contains(sup: Option<&Value>, sub: &Value) -> bool {
    match (net(sup), net(Some(sub))) {
        (_, Net::Off) | (Net::On, _) => true,
        (Net::Other(a), Net::Other(b)) => a == b,
        _ => false,
    }
}

/// The env patterns a value stands for beyond tier 1: `None` means every variable. Absent means tier 2.
fn env_patterns(v: Option<&Value>) -> Option<EnvSet<'_>> {
    match v {
        None => Some(EnvSet::Tier2),
        Some(Value::Star) => None,
        Some(other) => Some(EnvSet::Listed(other.as_set().unwrap_or_default())),
    }
}

/// A finite env grant, without allocating.
enum EnvSet<'a> {
    Tier2,
    Listed(&'a [Value]),
}

impl EnvSet<'_> {
    fn covers(&self, name: &str) -> bool {
        // tier 1 is checked once here, not again for every pattern
        ENV_TIER1.contains(&name)
            || match self {
                EnvSet::Tier2 => ENV_TIER2.iter().any(|p| pattern_covers(p, name)),
                EnvSet::Listed(items) => items
                    .iter()
                    .filter_map(Value::as_str)
                    .any(|p| pattern_covers(p, name)),
            }
    }
}

/// Does env pattern `sup` cover `sub`? `AWS_*` covers `AWS_KEY` and `AWS_S3_*`; a name covers itself. (Tier-1 names
/// are covered whatever the patterns: [`EnvSet::covers`] checks them once.)
fn pattern_covers(sup: &str, sub: &str) -> bool {
    match sup.strip_suffix('*') {
        Some(prefix) => sub.starts_with(prefix),
        None => sup == sub,
    }
}

fn env_contains(sup: Option<&Value>, sub: Option<&Value>) -> bool {
    if sup == sub {
        return true;
    }
    match (env_patterns(sup), env_patterns(sub)) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(sups), Some(subs)) => match subs {
            EnvSet::Tier2 => ENV_TIER2.iter().all(|s| sups.covers(s)),
            EnvSet::Listed(items) => {
                // non-string elements never match a pattern; compare them by equality
                items.iter().all(|v| match v.as_str() {
                    Some(s) => sups.covers(s),
                    None => matches!(&sups, EnvSet::Listed(xs) if xs.contains(v)),
                })
            }
        },
    }
}

/// The kinds bash reads, found by index (see [`Known`]).
#[derive(Debug, Default, Clone, Copy)]
struct BashKinds<'a> {
    commands: Option<&'a Value>,
    env: Option<&'a Value>,
    network: Option<&'a Value>,
    paths: PathKinds<'a>,
    /// The row has a kind bash does not know.
    other: bool,
}

impl<'a> BashKinds<'a> {
    fn of(row: &'a Row) -> BashKinds<'a> {
        let map = &row.0;
        BashKinds {
            commands: map.known(Known::Commands),
            env: map.known(Known::Env),
            network: map.known(Known::Network),
            paths: PathKinds::of(row),
            other: map.has_others(),
        }
    }

    fn knows(kind: &str) -> bool {
        matches!(
            kind,
            "commands" | "env" | "network" | "paths" | "read_paths"
        )
    }
}

impl BashAlgebra {
    /// Row containment, given each row's kinds.
    fn fits(&self, s: &BashKinds<'_>, sup: &Row, t: &BashKinds<'_>, sub: &Row) -> bool {
        // cheapest first: most comparisons of random rows fail, and the order changes no answer
        t.network.is_none_or(|v| network_contains(s.network, v))
            && t.commands
                .is_none_or(|v| s.commands.is_some_and(|c| value_contains(c, v)))
            // env is special: its absence is a request (tier 2), so it is compared even when the sub-row omits it
            && env_contains(s.env, t.env)
            && self.secrets_named_exactly(s.env, t.env)
            && s.paths.cover(&self.paths, &t.paths)
            // kinds bash does not know compare by the default value order
            && (!t.other
                || sub.0.iter().all(|(k, v)| {
                    BashKinds::knows(k) || sup.get(k).is_some_and(|s| value_contains(s, v))
                }))
    }
}

impl Algebra for BashAlgebra {
    fn name(&self) -> &'static str {
        "bash"
    }

    fn row_contains(&self, sup: &Row, sub: &Row) -> bool {
        self.fits(&BashKinds::of(sup), sup, &BashKinds::of(sub), sub)
    }

    fn canonicalize(&self, g: &Grant) -> Grant {
        canonicalize_paths(&self.paths, g.clone())
    }

    fn canonicalize_owned(&self, g: Grant) -> Grant {
        canonicalize_paths(&self.paths, g)
    }

    fn sample(&self, rng: &mut Rng) -> Grant {
        const COMMANDS: [&str; 4] = ["cat", "ls", "gcalcli", "dig"];
        const ENV: [&str; 6] = ["PATH", "AWS_*", "AWS_KEY", "AWS_S3_*", "PWD", "HOME"];
        sample_rows(rng, |rng| {
            let mut row: [Option<Value>; Known::COUNT] = Default::default();
            if !rng.one_in(5) {
                let c = if rng.one_in(3) {
                    Value::Star
                } else {
                    sample_strs(rng, &COMMANDS)
                };
                row[Known::Commands as usize] = Some(c);
            }
            if rng.one_in(2) {
                row[Known::Paths as usize] = Some(sample_paths(rng));
            }
            if rng.one_in(3) {
                row[Known::ReadPaths as usize] = Some(sample_paths(rng));
            }
            if rng.one_in(3) {
                row[Known::Network as usize] = Some(if rng.one_in(2) {
                    Value::Star
                } else {
                    Value::list(vec![])
                });
            }
            if rng.one_in(2) {
                row[Known::Env as usize] = Some(if rng.one_in(4) {
                    Value::Star
                } else {
                    sample_strs(rng, &ENV)
                });
            }
            Row::from(RowMap::of_known(row))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::lattice::grant::test_grant as g;

    #[track_caller]
    fn contains(sup: &str, sub: &str, want: bool) {
        let alg = BashAlgebra::new(PathCtx::new("/w", Some("/home/u".into())));
        assert_eq!(
            alg.contains(&g(sup), &g(sub)),
            want,
            "contains({sup}, {sub})"
        );
    }

    const GCAL_SET: &str =
        "[{ commands = \"*\", paths = [\"./\"] }, { commands = [\"gcalcli\"], network = \"*\", paths = [\"~/.gcalcli\"] }]";

    #[test]
    fn the_seed_gcalcli_capability_set() {
        // the calendar skill's declaration fits the gcalcli row, row for row
        contains(
            GCAL_SET,
            "{ commands = [\"gcalcli\"], network = \"*\", paths = [\"~/.gcalcli\"] }",
            true,
        );
        // the general row never gets the network
        contains(GCAL_SET, "{ commands = \"*\", network = \"*\" }", false);
        contains(
            GCAL_SET,
            "{ commands = [\"curl\"], network = \"*\" }",
            false,
        );
        // rows never combine: gcalcli with the workspace AND the network fits no single row
        contains(
            GCAL_SET,
            "{ commands = [\"gcalcli\"], network = \"*\", paths = [\"./\"] }",
            false,
        );
        // drop the second row and the skill no longer fits
        contains(
            "{ commands = \"*\", paths = [\"./\"] }",
            "{ commands = [\"gcalcli\"], network = \"*\" }",
            false,
        );
    }

    #[test]
    fn commands() {
        contains("{ commands = \"*\" }", "{ commands = [\"ls\"] }", true);
        contains(
            "{ commands = [\"ls\", \"cat\"] }",
            "{ commands = [\"ls\"] }",
            true,
        );
        contains("{ commands = [\"ls\"] }", "{ commands = \"*\" }", false);
    }

    #[test]
    fn network_off_is_contained_by_everything() {
        contains(
            "{ commands = \"*\" }",
            "{ commands = \"*\", network = [] }",
            true,
        );
        contains(
            "{ commands = \"*\", network = [] }",
            "{ commands = \"*\", network = \"*\" }",
            false,
        );
    }

    #[test]
    fn network_spellings_stay_transitive() {
        // found by proofs/: off < any other spelling < on, and other spellings contain only themselves
        contains(
            "{ commands = \"*\" }",
            "{ commands = \"*\", network = false }",
            true,
        );
        contains(
            "{ commands = \"*\", network = false }",
            "{ commands = \"*\", network = [false] }",
            false,
        );
        contains("{ network = true }", "{ network = \"*\" }", true);
        contains("{ network = \"*\" }", "{ network = \"x\" }", true);
        contains("{ network = \"x\" }", "{ network = \"*\" }", false);
        contains(
            "{ network = [\"a.com\"] }",
            "{ network = [\"a.com\"] }",
            true,
        );
        contains(
            "{ network = [\"a.com\", \"b.com\"] }",
            "{ network = [\"a.com\"] }",
            false,
        );
    }

    #[test]
    fn env_two_tier_inheritance() {
        // absent = tier 2; a list replaces tier 2
        contains(
            "{ commands = \"*\", env = [\"HOME\"] }",
            "{ commands = \"*\" }",
            false,
        );
        contains(
            "{ commands = \"*\" }",
            "{ commands = \"*\", env = [] }",
            true,
        );
        contains(
            "{ commands = \"*\" }",
            "{ commands = \"*\", env = [\"PATH\", \"HOME\"] }",
            true,
        );
        contains(
            "{ commands = \"*\", env = [\"AWS_*\"] }",
            "{ commands = \"*\", env = [\"AWS_KEY\", \"AWS_S3_*\"] }",
            true,
        );
        contains(
            "{ commands = \"*\", env = [\"AWS_KEY\"] }",
            "{ commands = \"*\", env = [\"AWS_*\"] }",
            false,
        );
        contains(
            "{ commands = \"*\", env = \"*\" }",
            "{ commands = \"*\" }",
            true,
        );
        contains(
            "{ commands = \"*\" }",
            "{ commands = \"*\", env = \"*\" }",
            false,
        );
    }

    #[test]
    fn a_secret_named_exactly_is_covered_only_by_its_exact_name() {
        // K5: `"*"` and `PREFIX_*` never pass a secret; the exact name does
        let alg = BashAlgebra::new(PathCtx::new("/w", None)).with_secrets(&["GH_TOKEN".into()]);
        let c = |sup: &str, sub: &str| alg.contains(&g(sup), &g(sub));
        assert!(!c(
            "{ commands = \"*\", env = \"*\" }",
            "{ commands = \"*\", env = [\"GH_TOKEN\", \"PATH\"] }"
        ));
        assert!(!c(
            "{ commands = \"*\", env = [\"GH_*\"] }",
            "{ commands = \"*\", env = [\"GH_TOKEN\"] }"
        ));
        // under its looked-up names too
        assert!(!c(
            "{ commands = \"*\", env = [\"LOOM_*\"] }",
            "{ commands = \"*\", env = [\"LOOM_GH_TOKEN\"] }"
        ));
        assert!(c(
            "{ commands = \"*\", env = [\"GH_TOKEN\", \"PATH\"] }",
            "{ commands = \"*\", env = [\"GH_TOKEN\"] }"
        ));
        // names that carry no secret keep the pattern order
        assert!(c(
            "{ commands = \"*\", env = \"*\" }",
            "{ commands = \"*\", env = [\"GH_HOST\", \"PATH\"] }"
        ));
        // without secrets, the plain order
        contains(
            "{ commands = \"*\", env = \"*\" }",
            "{ commands = \"*\", env = [\"GH_TOKEN\"] }",
            true,
        );
    }

    #[test]
    fn read_paths_inside_paths() {
        contains(
            "{ commands = \"*\", paths = [\"./\"] }",
            "{ commands = \"*\", read_paths = [\"./x\"] }",
            true,
        );
        contains(
            "{ commands = \"*\", read_paths = [\"./\"] }",
            "{ commands = \"*\", paths = [\"./x\"] }",
            false,
        );
    }
}
