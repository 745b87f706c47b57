//! # loom-proofs
//!
//! The lattice laws of every built-in algebra, checked exhaustively over bounded domains and by random testing
//! (proptest and quickcheck). The checks live in `tests/`; this library holds what they share:
//!
//! - the **bounded domains** ([`Domain`]): every grant over a small, stated universe of kind values, up to a stated
//!   number of rows, plus `"*"` and `{}`;
//! - the **law checkers** ([`laws`]): each law checked over every value, pair or triple of a domain through the
//!   kernel's own `contains` / `merge`, returning the number of cases checked or the first counterexample.
//!
//! Grant containment is a preorder, not a partial order: two different grants may each contain the other (`"x"` and
//! `["x"]`, `network = "*"` and `network = true`). So "equal" in a law means *equivalent*
//! ([`loom_kernel::equivalent`]), never `==`.
//!
//! ## The domains
//!
//! Each algebra gets three domains, all built from a row universe (the cartesian product of the listed values of each
//! kind, "absent" included, minus the empty row which grants nothing), plus `"*"` and `{}`:
//!
//! - `rows`: every single-row grant over the algebra's **full** universe (bash: the 199 rows of
//!   [`bash_universe`]);
//! - `sets`: every capability set of **at most two** distinct rows over a **smaller** universe (two rows is where
//!   "rows never combine" and the union merge could go wrong; the full bash universe squared would be ~400 million
//!   pairs);
//! - `triples`: every set of at most two rows over a **tiny** universe ([`tiny_universe`]), for associativity.
//!
//! bash has a fourth, `edges` ([`bash_edges_domain`]): single rows over the spellings the kernel reads alike
//! (`network = true` / `"*"`, `false` / `[]` / absent, tier-1 and tier-2 env names, `AWS_S3_*` under `AWS_*`,
//! `read_paths` under `paths`).
//!
//! Every law but associativity runs over every grant, pair or triple of every domain (transitivity is decided from the
//! kernel's containment [`laws::Matrix`], so every triple is judged by the kernel's own answers); associativity over
//! every triple of
//! `triples`, and of `rows` for the algebras whose `rows` domain is small (default, files, mcp — bash's would be 8.1
//! million triples of merges). The tests print each bound with the number of cases checked; `proofs/README.md` lists
//! them.
//!
//! Relative paths resolve against [`ctx`]: base `/tmp/work`, home `/home/u`, so `/tmp/workother` is the sibling
//! that lexical containment must not confuse with the working directory.

use loom_kernel::{AlgebraKind, Grant, PathCtx, Row, Value};

pub mod laws;

/// The path facts every domain is checked under: base `/tmp/work`, home `/home/u`.
pub fn ctx() -> PathCtx {
    PathCtx::new("/tmp/work", Some("/home/u".into()))
}

/// One kind of a row universe: its name and the values it takes (`None` = the kind is absent from the row).
#[derive(Debug, Clone)]
pub struct KindValues {
    /// The kind name (`commands`, `paths`, ...).
    pub kind: &'static str,
    /// Every value the kind takes in the universe; `None` is "absent".
    pub values: Vec<Option<Value>>,
}

impl KindValues {
    /// A kind taking `values` (each `None` for absent, or a value).
    pub fn new(kind: &'static str, values: Vec<Option<Value>>) -> KindValues {
        KindValues { kind, values }
    }

    fn describe(&self) -> String {
        let vals: Vec<String> = self
            .values
            .iter()
            .map(|v| match v {
                None => "absent".to_string(),
                Some(v) => v.to_toml(),
            })
            .collect();
        format!("{} ∈ {{{}}}", self.kind, vals.join(", "))
    }
}

/// A row universe: the cartesian product of its kinds' values.
#[derive(Debug, Clone)]
pub struct Universe(pub Vec<KindValues>);

impl Universe {
    /// Every non-empty row of the universe, in a fixed order. (The empty row grants nothing and [`Grant::set`] drops
    /// it, so it is represented by `{}` instead.)
    pub fn rows(&self) -> Vec<Row> {
        let mut rows: Vec<Vec<(&'static str, Value)>> = vec![Vec::new()];
        for kv in &self.0 {
            let mut next = Vec::with_capacity(rows.len() * kv.values.len());
            for row in &rows {
                for v in &kv.values {
                    let mut r = row.clone();
                    if let Some(v) = v {
                        r.push((kv.kind, v.clone()));
                    }
                    next.push(r);
                }
            }
            rows = next;
        }
        rows.into_iter()
            .filter(|r| !r.is_empty())
            .map(Row::from_pairs)
            .collect()
    }

    /// A one-line statement of the universe, e.g. `commands ∈ {absent, "*", ["cat"]} × network ∈ {absent, "*"}`.
    pub fn describe(&self) -> String {
        self.0
            .iter()
            .map(KindValues::describe)
            .collect::<Vec<_>>()
            .join(" × ")
    }
}

/// `"*"`, `{}`, and every set of `1..=max_rows` distinct rows of `rows`, each exactly once.
pub fn grants_up_to(rows: &[Row], max_rows: usize) -> Vec<Grant> {
    let mut out = vec![Grant::Unrestricted, Grant::none()];
    let mut chosen = Vec::new();
    subsets(rows, 0, max_rows, &mut chosen, &mut out);
    out
}

fn subsets(rows: &[Row], from: usize, left: usize, chosen: &mut Vec<Row>, out: &mut Vec<Grant>) {
    if left == 0 {
        return;
    }
    for i in from..rows.len() {
        chosen.push(rows[i].clone());
        out.push(Grant::set(chosen.clone()));
        subsets(rows, i + 1, left - 1, chosen, out);
        chosen.pop();
    }
}

/// Number of grants [`grants_up_to`] yields: `2 + Σ_{k=1..max} C(n, k)`.
pub fn count_up_to(n: usize, max_rows: usize) -> usize {
    let mut total = 2;
    let mut c = 1usize;
    for k in 1..=max_rows.min(n) {
        c = c * (n - k + 1) / k;
        total += c;
    }
    total
}

/// A bounded domain: every grant over a stated universe up to a stated number of rows.
#[derive(Debug, Clone)]
pub struct Domain {
    /// The algebra it is checked under.
    pub algebra: AlgebraKind,
    /// `rows` or `sets`.
    pub name: &'static str,
    /// The row universe.
    pub universe: Universe,
    /// The largest number of rows in a grant (besides `"*"` and `{}`).
    pub max_rows: usize,
    /// The grants, each exactly once.
    pub grants: Vec<Grant>,
}

impl Domain {
    fn new(
        algebra: AlgebraKind,
        name: &'static str,
        universe: Universe,
        max_rows: usize,
    ) -> Domain {
        let grants = grants_up_to(&universe.rows(), max_rows);
        Domain {
            algebra,
            name,
            universe,
            max_rows,
            grants,
        }
    }

    /// The bound, stated: universe, number of rows per grant, and the domain's size.
    pub fn bound(&self) -> String {
        format!(
            "{:?}/{}: \"*\", {{}} and every set of 1..={} distinct rows over {} non-empty rows [{}] = {} grants",
            self.algebra,
            self.name,
            self.max_rows,
            self.universe.rows().len(),
            self.universe.describe(),
            self.grants.len()
        )
    }

    /// The single-row grants of the domain (the requests a tool call makes).
    pub fn single_rows(&self) -> Vec<Grant> {
        self.grants
            .iter()
            .filter(|g| g.rows().is_some_and(|r| r.len() == 1))
            .cloned()
            .collect()
    }
}

fn some(v: Value) -> Option<Value> {
    Some(v)
}

fn s(x: &str) -> Value {
    Value::Str(x.into())
}

fn strs(xs: &[&str]) -> Value {
    Value::strs(xs.iter().copied())
}

/// The default algebra's full universe: kinds `a`, `b` each ∈ {absent, `"*"`, `"x"`, `["x"]`, `["x", "y"]`, `[]`, `1`}
/// (48 rows). `"x"` and `["x"]` are different values that must be equivalent.
pub fn default_universe() -> Universe {
    let vals = || {
        vec![
            None,
            some(Value::Star),
            some(s("x")),
            some(strs(&["x"])),
            some(strs(&["x", "y"])),
            some(Value::list(vec![])),
            some(Value::Int(1)),
        ]
    };
    Universe(vec![
        KindValues::new("a", vals()),
        KindValues::new("b", vals()),
    ])
}

/// The default algebra's small universe: `a`, `b` each ∈ {absent, `"*"`, `"x"`, `["x", "y"]`, `1`} (24 rows).
pub fn default_small_universe() -> Universe {
    let vals = || {
        vec![
            None,
            some(Value::Star),
            some(s("x")),
            some(strs(&["x", "y"])),
            some(Value::Int(1)),
        ]
    };
    Universe(vec![
        KindValues::new("a", vals()),
        KindValues::new("b", vals()),
    ])
}

/// The file tools' full universe: `paths`, `read_paths` each ∈ {absent, `"*"`, `["./"]`, `["./src"]`,
/// `["/tmp/workother"]`, `["/"]`, `["~/.cfg", "src/../lib"]`} (48 rows).
pub fn files_universe() -> Universe {
    let vals = || {
        vec![
            None,
            some(Value::Star),
            some(strs(&["./"])),
            some(strs(&["./src"])),
            some(strs(&["/tmp/workother"])),
            some(strs(&["/"])),
            some(strs(&["~/.cfg", "src/../lib"])),
        ]
    };
    Universe(vec![
        KindValues::new("paths", vals()),
        KindValues::new("read_paths", vals()),
    ])
}

/// The file tools' small universe: `paths`, `read_paths` each ∈ {absent, `"*"`, `["./"]`, `["./src"]`,
/// `["/tmp/workother"]`} (24 rows).
pub fn files_small_universe() -> Universe {
    let vals = || {
        vec![
            None,
            some(Value::Star),
            some(strs(&["./"])),
            some(strs(&["./src"])),
            some(strs(&["/tmp/workother"])),
        ]
    };
    Universe(vec![
        KindValues::new("paths", vals()),
        KindValues::new("read_paths", vals()),
    ])
}

/// bash's full universe (199 rows): `commands` ∈ {absent, `"*"`, `["cat"]`, `["cat", "ls"]`} × `paths` ∈ {absent,
/// `"*"`, `["./"]`, `["./src"]`, `["/tmp/workother"]`} × `network` ∈ {absent, `"*"`} × `env` ∈ {absent, `[]`,
/// `["AWS_*"]`, `["AWS_KEY"]`, `"*"`}.
pub fn bash_universe() -> Universe {
    Universe(vec![
        KindValues::new(
            "commands",
            vec![
                None,
                some(Value::Star),
                some(strs(&["cat"])),
                some(strs(&["cat", "ls"])),
            ],
        ),
        KindValues::new(
            "paths",
            vec![
                None,
                some(Value::Star),
                some(strs(&["./"])),
                some(strs(&["./src"])),
                some(strs(&["/tmp/workother"])),
            ],
        ),
        KindValues::new("network", vec![None, some(Value::Star)]),
        KindValues::new(
            "env",
            vec![
                None,
                some(Value::list(vec![])),
                some(strs(&["AWS_*"])),
                some(strs(&["AWS_KEY"])),
                some(Value::Star),
            ],
        ),
    ])
}

/// bash's small universe (35 rows): `commands` ∈ {absent, `"*"`, `["cat"]`} × `paths` ∈ {absent, `["./"]`,
/// `["./src"]`} × `network` ∈ {absent, `"*"`} × `env` ∈ {absent, `["AWS_*"]`}.
pub fn bash_small_universe() -> Universe {
    Universe(vec![
        KindValues::new(
            "commands",
            vec![None, some(Value::Star), some(strs(&["cat"]))],
        ),
        KindValues::new(
            "paths",
            vec![None, some(strs(&["./"])), some(strs(&["./src"]))],
        ),
        KindValues::new("network", vec![None, some(Value::Star)]),
        KindValues::new("env", vec![None, some(strs(&["AWS_*"]))]),
    ])
}

/// bash's edge universe (319 rows): the value spellings the kernel reads alike — `network` ∈ {absent, `"*"`,
/// `true`, `false`, `[]`}, `env` ∈ {absent, `[]`, `["PATH"]`, `["HOME"]`, `["AWS_*"]`, `["AWS_S3_*"]`,
/// `["AWS_S3_KEY"]`, `"*"`}, `read_paths` ∈ {absent, `"*"`, `["./src"]`, `["/"]`}, with `commands = "*"` or absent.
pub fn bash_edge_universe() -> Universe {
    Universe(vec![
        KindValues::new("commands", vec![None, some(Value::Star)]),
        KindValues::new(
            "network",
            vec![
                None,
                some(Value::Star),
                some(Value::Bool(true)),
                some(Value::Bool(false)),
                some(Value::list(vec![])),
            ],
        ),
        KindValues::new(
            "env",
            vec![
                None,
                some(Value::list(vec![])),
                some(strs(&["PATH"])),
                some(strs(&["HOME"])),
                some(strs(&["AWS_*"])),
                some(strs(&["AWS_S3_*"])),
                some(strs(&["AWS_S3_KEY"])),
                some(Value::Star),
            ],
        ),
        KindValues::new(
            "read_paths",
            vec![
                None,
                some(Value::Star),
                some(strs(&["./src"])),
                some(strs(&["/"])),
            ],
        ),
    ])
}

/// MCP's full universe: `status` ∈ {absent, `"*"`, `"online"`, `["online"]`, `["online", "away"]`} × `path` ∈
/// {absent, `"*"`, `"/doc/1"`} × `limit` ∈ {absent, `1`, `[1, 2]`} (44 rows).
pub fn mcp_universe() -> Universe {
    Universe(vec![
        KindValues::new(
            "status",
            vec![
                None,
                some(Value::Star),
                some(s("online")),
                some(strs(&["online"])),
                some(strs(&["online", "away"])),
            ],
        ),
        KindValues::new("path", vec![None, some(Value::Star), some(s("/doc/1"))]),
        KindValues::new(
            "limit",
            vec![
                None,
                some(Value::Int(1)),
                some(Value::list(vec![Value::Int(1), Value::Int(2)])),
            ],
        ),
    ])
}

/// MCP's small universe: `status` ∈ {absent, `"*"`, `"online"`, `["online", "away"]`} × `path` ∈ {absent, `"*"`,
/// `"/doc/1"`} × `limit` ∈ {absent, `1`} (23 rows).
pub fn mcp_small_universe() -> Universe {
    Universe(vec![
        KindValues::new(
            "status",
            vec![
                None,
                some(Value::Star),
                some(s("online")),
                some(strs(&["online", "away"])),
            ],
        ),
        KindValues::new("path", vec![None, some(Value::Star), some(s("/doc/1"))]),
        KindValues::new("limit", vec![None, some(Value::Int(1))]),
    ])
}

/// The server-tool universe (71 rows): `allowed_domains` ∈ {absent, `"*"`, `["a.org"]`, `["a.org", "b.org"]`} ×
/// `blocked_domains` ∈ {absent, `["a.org"]`, `["a.org", "b.org"]`} × `max_uses` ∈ {absent, `1`, `3`} ×
/// `user_location` ∈ {absent, `"x"`}.
pub fn server_universe() -> Universe {
    Universe(vec![
        KindValues::new(
            "allowed_domains",
            vec![
                None,
                some(Value::Star),
                some(strs(&["a.org"])),
                some(strs(&["a.org", "b.org"])),
            ],
        ),
        KindValues::new(
            "blocked_domains",
            vec![
                None,
                some(strs(&["a.org"])),
                some(strs(&["a.org", "b.org"])),
            ],
        ),
        KindValues::new(
            "max_uses",
            vec![None, some(Value::Int(1)), some(Value::Int(3))],
        ),
        KindValues::new("user_location", vec![None, some(s("x"))]),
    ])
}

/// The server-tool small universe (17 rows): `allowed_domains` ∈ {absent, `["a.org"]`, `["a.org", "b.org"]`} ×
/// `max_uses` ∈ {absent, `1`, `3`} × `blocked_domains` ∈ {absent, `["a.org"]`}.
pub fn server_small_universe() -> Universe {
    Universe(vec![
        KindValues::new(
            "allowed_domains",
            vec![
                None,
                some(strs(&["a.org"])),
                some(strs(&["a.org", "b.org"])),
            ],
        ),
        KindValues::new(
            "max_uses",
            vec![None, some(Value::Int(1)), some(Value::Int(3))],
        ),
        KindValues::new("blocked_domains", vec![None, some(strs(&["a.org"]))]),
    ])
}

/// The tiny universes of the `triples` domains (associativity over every triple):
/// - default: `a` ∈ {absent, `"*"`, `"x"`, `["x"]`, `["x", "y"]`} × `b` ∈ {absent, `1`} (9 rows);
/// - files: `paths` ∈ {absent, `"*"`, `["./"]`, `["./src"]`, `["/tmp/workother"]`} × `read_paths` ∈ {absent,
///   `["./src"]`} (9 rows);
/// - bash: `commands` ∈ {absent, `"*"`, `["cat"]`} × `network` ∈ {absent, `"*"`} × `env` ∈ {absent, `["AWS_*"]`}
///   (11 rows);
/// - mcp: `status` ∈ {absent, `"*"`, `"online"`, `["online"]`, `["online", "away"]`} × `limit` ∈ {absent, `1`}
///   (9 rows).
pub fn tiny_universe(kind: AlgebraKind) -> Universe {
    match kind {
        AlgebraKind::Default => Universe(vec![
            KindValues::new(
                "a",
                vec![
                    None,
                    some(Value::Star),
                    some(s("x")),
                    some(strs(&["x"])),
                    some(strs(&["x", "y"])),
                ],
            ),
            KindValues::new("b", vec![None, some(Value::Int(1))]),
        ]),
        AlgebraKind::Files => Universe(vec![
            KindValues::new(
                "paths",
                vec![
                    None,
                    some(Value::Star),
                    some(strs(&["./"])),
                    some(strs(&["./src"])),
                    some(strs(&["/tmp/workother"])),
                ],
            ),
            KindValues::new("read_paths", vec![None, some(strs(&["./src"]))]),
        ]),
        AlgebraKind::Bash => Universe(vec![
            KindValues::new(
                "commands",
                vec![None, some(Value::Star), some(strs(&["cat"]))],
            ),
            KindValues::new("network", vec![None, some(Value::Star)]),
            KindValues::new("env", vec![None, some(strs(&["AWS_*"]))]),
        ]),
        AlgebraKind::Mcp => Universe(vec![
            KindValues::new(
                "status",
                vec![
                    None,
                    some(Value::Star),
                    some(s("online")),
                    some(strs(&["online"])),
                    some(strs(&["online", "away"])),
                ],
            ),
            KindValues::new("limit", vec![None, some(Value::Int(1))]),
        ]),
        AlgebraKind::ServerTool => Universe(vec![
            KindValues::new("allowed_domains", vec![None, some(strs(&["a.org"]))]),
            KindValues::new(
                "max_uses",
                vec![None, some(Value::Int(1)), some(Value::Int(3))],
            ),
        ]),
    }
}

/// The `triples` domain of an algebra: `"*"`, `{}` and every set of at most two rows of its [`tiny_universe`].
pub fn triples_domain(kind: AlgebraKind) -> Domain {
    Domain::new(kind, "triples", tiny_universe(kind), 2)
}

/// bash's `network` spellings that are neither on (`"*"`, `true`) nor off (absent, `false`, `[]`): `commands` ∈
/// {absent, `"*"`} × `network` ∈ {absent, `"*"`, `true`, `false`, `[]`, `[false]`, `"x"`}, single rows. The kernel
/// compares such values with the default order, which breaks transitivity (see `proofs/README.md`, "Findings").
pub fn bash_network_spellings_domain() -> Domain {
    let u = Universe(vec![
        KindValues::new("commands", vec![None, some(Value::Star)]),
        KindValues::new(
            "network",
            vec![
                None,
                some(Value::Star),
                some(Value::Bool(true)),
                some(Value::Bool(false)),
                some(Value::list(vec![])),
                some(Value::list(vec![Value::Bool(false)])),
                some(s("x")),
            ],
        ),
    ]);
    Domain::new(AlgebraKind::Bash, "network-spellings", u, 1)
}

/// The `rows` domain of an algebra: `"*"`, `{}` and every single row of its full universe.
pub fn rows_domain(kind: AlgebraKind) -> Domain {
    let u = match kind {
        AlgebraKind::Default => default_universe(),
        AlgebraKind::Files => files_universe(),
        AlgebraKind::Bash => bash_universe(),
        AlgebraKind::Mcp => mcp_universe(),
        AlgebraKind::ServerTool => server_universe(),
    };
    Domain::new(kind, "rows", u, 1)
}

/// The `sets` domain of an algebra: `"*"`, `{}` and every set of at most two rows of its small universe.
pub fn sets_domain(kind: AlgebraKind) -> Domain {
    let u = match kind {
        AlgebraKind::Default => default_small_universe(),
        AlgebraKind::Files => files_small_universe(),
        AlgebraKind::Bash => bash_small_universe(),
        AlgebraKind::Mcp => mcp_small_universe(),
        AlgebraKind::ServerTool => server_small_universe(),
    };
    Domain::new(kind, "sets", u, 2)
}

/// bash's `edges` domain: `"*"`, `{}` and every single row of [`bash_edge_universe`].
pub fn bash_edges_domain() -> Domain {
    Domain::new(AlgebraKind::Bash, "edges", bash_edge_universe(), 1)
}

/// Every built-in algebra.
pub const ALL_KINDS: [AlgebraKind; 5] = [
    AlgebraKind::Default,
    AlgebraKind::Files,
    AlgebraKind::Bash,
    AlgebraKind::Mcp,
    AlgebraKind::ServerTool,
];

/// The `[agent] secrets` of the secret-aware bash domain: one name the edge universe lists exactly, and a tier-1 name.
pub const EDGE_SECRETS: [&str; 2] = ["AWS_S3_KEY", "HOME"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_the_formula() {
        for kind in ALL_KINDS {
            for d in [rows_domain(kind), sets_domain(kind), triples_domain(kind)] {
                let n = d.universe.rows().len();
                assert_eq!(d.grants.len(), count_up_to(n, d.max_rows), "{}", d.bound());
                let mut sorted = d.grants.clone();
                sorted.sort();
                sorted.dedup();
                assert_eq!(sorted.len(), d.grants.len(), "duplicates in {}", d.bound());
            }
        }
        assert_eq!(bash_universe().rows().len(), 199);
        assert_eq!(bash_edges_domain().grants.len(), 321);
        assert_eq!(bash_network_spellings_domain().grants.len(), 15);
    }
}
