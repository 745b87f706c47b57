//! The tool-aware gate rules (issue 25 item 2) as properties, over grants drawn by the kernel's own samplers:
//! - a key that names another tool is growth, whatever its grant, and the same tool is never growth of itself;
//! - a bound MCP argument dropped, or widened to an enum, is never contained;
//! - a bash row naming a secret exactly is contained only by a row naming it exactly;
//! - a provider-run server tool's limit dropped is never contained;
//! - sub-agent containment and the CI gate agree on every pair of grants.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use loom_kernel::{
    ceiling_excess, ceiling_growth, parse_manifest, Algebra, AlgebraKind, Grant, Manifest,
    McpAlgebra, Rng, Row, ServerToolAlgebra, Value,
};
use loom_proofs::ctx;
use proptest::prelude::*;

const TOOLS: [&str; 5] = ["read_file", "write_file", "edit_file", "bash", "find"];

fn manifest(body: &str) -> Manifest {
    parse_manifest(
        &format!("[agent]\nname = \"a\"\n{body}"),
        "a.toml",
        &BTreeMap::new(),
    )
    .unwrap_or_else(|e| panic!("{e}\n{body}"))
}

fn renamed(tool: &str, grant: &Grant, secrets: &str) -> Manifest {
    manifest(&format!(
        "secrets = {secrets}\n[tools]\nk = {{ provider = \"builtin\", tool = \"{tool}\" }}\n[capabilities]\nk = {}\n",
        grant.to_toml()
    ))
}

fn growth(old: &Manifest, new: &Manifest) -> usize {
    let c = ctx();
    ceiling_growth(
        "",
        new,
        &new.effective_ceiling(&c),
        old,
        &old.effective_ceiling(&c),
        &c,
    )
    .len()
}

fn excess(parent: &Manifest, child: &Manifest) -> usize {
    let c = ctx();
    ceiling_excess(
        parent,
        &parent.effective_ceiling(&c),
        child,
        &child.effective_ceiling(&c),
        &c,
    )
    .len()
}

/// A row without `kind`, as a grant (`None` when nothing is left: an empty grant grants nothing).
fn without(row: &Row, kind: &str) -> Option<Grant> {
    let pairs: Vec<(String, Value)> = row
        .0
        .iter()
        .filter(|(k, _)| k.as_str() != kind)
        .map(|(k, v)| (k.as_str().to_string(), v.clone()))
        .collect();
    (!pairs.is_empty()).then(|| Grant::row(Row::from_pairs(pairs)))
}

fn with(row: &Row, kind: &str, v: Value) -> Grant {
    let mut pairs: Vec<(String, Value)> = row
        .0
        .iter()
        .filter(|(k, _)| k.as_str() != kind)
        .map(|(k, v)| (k.as_str().to_string(), v.clone()))
        .collect();
    pairs.push((kind.to_string(), v));
    Grant::row(Row::from_pairs(pairs))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_key_that_names_another_tool_is_growth(seed in any::<u64>(), a in 0usize..5, b in 0usize..5) {
        let mut rng = Rng::seeded(seed);
        let g = AlgebraKind::for_builtin(TOOLS[a]).build(&ctx()).sample(&mut rng);
        prop_assume!(!g.is_none());
        let (old, new) = (renamed(TOOLS[a], &g, "[]"), renamed(TOOLS[b], &g, "[]"));
        if a == b {
            prop_assert_eq!(growth(&old, &new), 0, "the same grant on the same tool grew");
            prop_assert_eq!(excess(&old, &new), 0);
        } else {
            prop_assert_eq!(growth(&old, &new), 1, "{} -> {} with {} passed", TOOLS[a], TOOLS[b], g);
            prop_assert_eq!(excess(&old, &new), 1, "contained across tools");
        }
    }

    #[test]
    fn a_bound_mcp_argument_stays_bound(seed in any::<u64>()) {
        let mut rng = Rng::seeded(seed);
        let Grant::Set(rows) = McpAlgebra.sample(&mut rng) else { return Ok(()) };
        for row in &rows {
            for (k, v) in row.0.iter() {
                if matches!(v, Value::Star | Value::List(_)) {
                    continue;
                }
                let sup = Grant::row(row.clone());
                if let Some(sub) = without(row, k.as_str()) {
                    prop_assert!(!McpAlgebra.contains(&sup, &sub), "dropping {} of {}", k.as_str(), sup);
                }
                let widened = with(row, k.as_str(), Value::list(vec![v.clone()]));
                prop_assert!(!McpAlgebra.contains(&sup, &widened), "{} widened in {}", k.as_str(), sup);
            }
        }
    }

    #[test]
    fn a_secret_is_covered_only_by_its_exact_name(pick in 0usize..6, extra in 0usize..3) {
        let sup_env = [
            Value::Star,
            Value::strs(["GH_*"]),
            Value::strs(["G*", "PATH"]),
            Value::strs(["GH_TOKEN"]),
            Value::strs(["PATH"]),
            Value::strs(["GH_TOKEN", "GH_*"]),
        ];
        let listed = |v: &Value, name: &str| {
            matches!(v, Value::Star) || v.as_set().is_some_and(|xs| {
                xs.iter().filter_map(Value::as_str).any(|p| match p.strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => p == name,
                })
            })
        };
        let sup_v = &sup_env[pick];
        let mut sub_names = vec!["GH_TOKEN"];
        sub_names.extend([None, Some("PATH"), Some("GH_HOST")][extra]);
        let sup = Grant::row(Row::from_pairs([("commands", Value::Star), ("env", sup_v.clone())]));
        let sub = Grant::row(Row::from_pairs([
            ("commands", Value::strs(["gh"])),
            ("env", Value::strs(sub_names.clone())),
        ]));
        let secrets = "[\"GH_TOKEN\"]";
        let (old, new) = (renamed("bash", &sup, secrets), renamed("bash", &sub, secrets));
        let exact = sup_v.as_set().is_some_and(|xs| xs.contains(&Value::Str("GH_TOKEN".into())));
        let others = sub_names[1..].iter().all(|n| listed(sup_v, n));
        prop_assert_eq!(growth(&old, &new) == 0, exact && others, "{} within {}", sub, sup);
        prop_assert_eq!(excess(&old, &new) == 0, exact && others);
        // without the secret declared, the pattern order applies
        let (old, new) = (renamed("bash", &sup, "[]"), renamed("bash", &sub, "[]"));
        prop_assert_eq!(growth(&old, &new) == 0, sub_names.iter().all(|n| listed(sup_v, n)));
    }

    #[test]
    fn a_server_tool_limit_dropped_is_growth(seed in any::<u64>()) {
        let mut rng = Rng::seeded(seed);
        let Grant::Set(rows) = ServerToolAlgebra.sample(&mut rng) else { return Ok(()) };
        for row in &rows {
            let sup = Grant::row(row.clone());
            for kind in ["allowed_domains", "blocked_domains", "max_uses"] {
                let limits = match row.get(kind) {
                    Some(Value::Star) | None => false,
                    Some(Value::List(items)) => !items.is_empty() || kind == "allowed_domains",
                    Some(_) => true,
                };
                if !limits {
                    continue;
                }
                if let Some(sub) = without(row, kind) {
                    prop_assert!(!ServerToolAlgebra.contains(&sup, &sub), "dropping {} of {}", kind, sup);
                }
            }
        }
    }

    #[test]
    fn containment_and_the_gate_agree(seed in any::<u64>(), secrets in 0usize..2) {
        let mut rng = Rng::seeded(seed);
        let alg = AlgebraKind::Bash.build(&ctx());
        let (a, b) = (alg.sample(&mut rng), alg.sample(&mut rng));
        let s = ["[]", "[\"AWS_KEY\"]"][secrets];
        let (parent, child) = (renamed("bash", &a, s), renamed("bash", &b, s));
        prop_assert_eq!(growth(&parent, &child) == 0, excess(&parent, &child) == 0, "{} vs {}", a, b);
    }
}
