//! Table-driven tests over the seed README's manifests and the grammar's refusals.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::policy::rules::{Permissions, Rule};
use crate::{Grant, Row, Value};

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

#[track_caller]
#[test]
fn named_harnesses_and_the_supervisor_parse_with_their_defaults() {
    let m = parses(
        "[agent]\nname = \"a\"\n[harnesses.cheap]\nprovider = \"anthropic\"\nmodel = \"claude-haiku-4-5\"\n\
         [supervisor]\nenabled = true\nreview = \"cheap\"\n\
         [session]\nlayers = [\"compacting\", \"in-memory\"]\n[session.compacting]\nsummarizer = \"cheap\"\n",
    );
    assert_eq!(m.harnesses["cheap"].provider, "anthropic");
    assert_eq!(
        m.supervisor,
        crate::SupervisorSpec {
            enabled: true,
            max_rounds: crate::DEFAULT_MAX_ROUNDS,
            review: Some("cheap".into()),
            review_budget: crate::DEFAULT_REVIEW_BUDGET,
        }
    );
    let plain = parses("[agent]\nname = \"a\"\n");
    assert!(plain.harnesses.is_empty() && !plain.supervisor.enabled);
    // a named harness's keys are checked like [harness]'s
    let e = parse_manifest(
        "[agent]\nname = \"a\"\n[harnesses.c]\nprovider = \"anthropic\"\nmodle = \"x\"\n",
        "agent.toml",
        &BTreeMap::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("harnesses.c.modle: unknown key"), "{e}");
}

#[test]
fn the_agent_switches_take_their_defaults_and_refuse_other_types() {
    let plain = parses("[agent]\nname = \"a\"\n");
    assert!(plain.agent.environment && !plain.agent.read_before_write);
    let set = parses("[agent]\nname = \"a\"\nenvironment = false\nread_before_write = true\n");
    assert!(!set.agent.environment && set.agent.read_before_write);
    fails(
        "[agent]\nname = \"a\"\nread_before_write = \"yes\"\n",
        "agent.read_before_write: expected true or false",
    );
    fails(
        "[agent]\nname = \"a\"\nread_befor_write = true\n",
        "agent.read_befor_write: unknown key",
    );
}

fn parses(text: &str) -> Manifest {
    parses_with(text, &env(&[]))
}

#[track_caller]
fn parses_with(text: &str, env: &BTreeMap<String, String>) -> Manifest {
    match parse_manifest(text, "agent.toml", env) {
        Ok(m) => m,
        Err(e) => panic!("expected a manifest, got: {e}\n--- text ---\n{text}"),
    }
}

#[track_caller]
fn fails(text: &str, want: &str) -> ManifestError {
    fails_with(text, &env(&[]), want)
}

#[track_caller]
fn fails_with(text: &str, env: &BTreeMap<String, String>, want: &str) -> ManifestError {
    match parse_manifest(text, "agent.toml", env) {
        Ok(m) => {
            panic!("expected an error containing {want:?}, parsed {m:#?}\n--- text ---\n{text}")
        }
        Err(e) => {
            let shown = e.to_string();
            assert!(
                shown.contains(want),
                "error {shown:?} does not contain {want:?}"
            );
            assert!(
                !shown.contains('\n')
                    || want.contains('\n')
                    || e.hint.as_deref().is_some_and(|h| h.contains('\n')),
                "error is not one paragraph: {shown:?}"
            );
            e
        }
    }
}

fn grant(src: &str) -> Grant {
    let t: toml::Table = toml::from_str(&format!("g = {src}")).unwrap();
    Grant::from_toml(&t["g"]).unwrap()
}

fn handles(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_string()).collect()
}

#[track_caller]
fn group(tools: &str, providers: Option<&str>) -> ToolGroup {
    match parse_tool_group(
        "skill test",
        tools,
        providers,
        "skills/test/SKILL.md",
        &env(&[("SKILL_DIR", "/home/u/.skills/test")]),
        &handles(&["notes"]),
    ) {
        Ok(g) => g,
        Err(e) => panic!("expected a group, got: {e}"),
    }
}

#[track_caller]
fn group_fails(tools: &str, providers: Option<&str>, want: &str) -> ManifestError {
    group_fails_in(tools, providers, &env(&[]), want)
}

#[track_caller]
fn group_fails_in(
    tools: &str,
    providers: Option<&str>,
    env: &BTreeMap<String, String>,
    want: &str,
) -> ManifestError {
    match parse_tool_group(
        "skill test",
        tools,
        providers,
        "skills/test/SKILL.md",
        env,
        &handles(&["notes"]),
    ) {
        Ok(g) => panic!("expected an error containing {want:?}, parsed {g:#?}"),
        Err(e) => {
            assert!(
                e.to_string().contains(want),
                "error {e} does not contain {want:?}"
            );
            e
        }
    }
}

// ---- Seed README examples ------------------------------------------------------------------------------------------

const TOP_EXAMPLE: &str = r#"
[agent]
name = "example-agent"
system_prompt = "You are a helpful assistant."

[harness]
provider = "anthropic" # This harness will inform Loom it needs an ANTHROPIC_API_KEY
model    = "claude-sonnet-4-5"

# Context management as composable layers.
[session]
layers = ["skills", "compacting", "in-memory"]

# Tools carry their own capabilities.
# Each builtin is sandboxed to exactly what you grant.
[tools]
read_file  = { capabilities = { paths = ["./"] } }
write_file = { capabilities = { paths = ["./"] } }
edit_file  = { capabilities = { paths = ["./"] } }
bash = { capabilities = [
  { commands = "*", paths = ["./"] },        # any command: this dir, no network
  { commands = ["gcalcli"], network = "*" }, # gcalcli alone may reach the network
] }
"#;

#[test]
fn top_example() {
    let m = parses(TOP_EXAMPLE);
    assert_eq!(m.agent.name, "example-agent");
    assert_eq!(
        m.agent.system_prompt,
        Some(SystemPrompt::Text("You are a helpful assistant.".into()))
    );
    let h = m.harness.as_ref().unwrap();
    assert_eq!(h.provider, "anthropic");
    assert_eq!(h.config["model"].as_str(), Some("claude-sonnet-4-5"));
    assert!(!h.config.contains_key("provider"));
    let layers: Vec<(&str, bool)> = m
        .session
        .layers
        .iter()
        .map(|l| (l.provider.as_str(), l.storage))
        .collect();
    assert_eq!(
        layers,
        [
            ("skills", false),
            ("compacting", false),
            ("in-memory", true)
        ]
    );
    assert!(!m.session.defaulted);
    assert!(!m.tools_defaulted);
    assert_eq!(m.capabilities, None);
    assert_eq!(m.tools.len(), 4);
    let bash = &m.tools["bash"];
    assert_eq!(bash.provider, ProviderRef::Builtin);
    assert_eq!(bash.tool, None);
    assert_eq!(
        bash.capabilities,
        Some(grant(
            r#"[{ commands = "*", paths = ["./"] }, { commands = ["gcalcli"], network = "*" }]"#
        ))
    );
    assert_eq!(bash.capabilities.as_ref().unwrap().rows().unwrap().len(), 2);
    assert_eq!(
        m.tools["read_file"].capabilities,
        Some(Grant::row(Row::from_pairs([(
            "paths",
            Value::strs(["./"])
        )])))
    );
    assert!(m.subagents.is_empty());
    assert_eq!(m.permissions, Permissions::default());
}

#[test]
fn no_tools_no_session_gets_defaults() {
    let m = parses("[agent]\nname = \"minimal\"\n");
    assert!(m.tools_defaulted);
    assert_eq!(
        m.tools.keys().collect::<Vec<_>>(),
        ["bash", "edit_file", "read_file", "write_file"]
    );
    assert!(m
        .tools
        .values()
        .all(|t| t.provider == ProviderRef::Builtin && t.capabilities.is_none()));
    assert!(m.session.defaulted);
    let layers: Vec<(&str, bool)> = m
        .session
        .layers
        .iter()
        .map(|l| (l.provider.as_str(), l.storage))
        .collect();
    assert_eq!(
        layers,
        [
            ("skills", false),
            ("compacting", false),
            ("in-memory", true)
        ]
    );
    assert_eq!(m.capabilities, None);
    assert_eq!(m.harness, None);
}

#[test]
fn capabilities_reference_example() {
    let m = parses(
        r#"
[agent]
name = "caps"

[capabilities]
bash      = { commands = "*", paths = ["./"], env = ["PATH", "HOME"] }
read_file = { paths = ["./"] }
edit_file = "*"                # whole-tool unrestricted
fetch_url = "*"
nothing   = {}
"#,
    );
    let caps = m.capabilities.unwrap();
    assert_eq!(caps["edit_file"], Grant::Unrestricted);
    assert_eq!(caps["fetch_url"], Grant::Unrestricted);
    assert!(caps["nothing"].is_none());
    assert_eq!(
        caps["bash"],
        grant(r#"{ commands = "*", paths = ["./"], env = ["HOME", "PATH"] }"#)
    );
    assert!(
        parses("[agent]\nname = \"a\"\n[capabilities]\n").capabilities == Some(BTreeMap::new())
    );
}

const MCP_EXAMPLE: &str = r#"
[agent]
name = "mcp-agent"

[providers]
# Configured-factory form: `provider = "mcp-server"` names the
# built-in factory; the rest of the table is server-spawn config
# (command/args/npm, env, secrets).
fs_mcp = { provider = "mcp-server", npm = "@modelcontextprotocol/server-filesystem" }
linear = { provider = "mcp-server", command = "npx", args = ["@linear/mcp-server"], secrets = { LINEAR_API_KEY = "LINEAR_API_KEY" } }

# Every tool the model can call MUST appear by name here.
[tools.read_text_file]
provider = "fs_mcp"

[tools.list_directory]
provider = "fs_mcp"

[tools.read_one_doc]
provider = "fs_mcp"
tool = "read_text_file"          # underlying MCP tool name

[tools.inline_fs]
provider = { provider = "mcp-server", npm = "@modelcontextprotocol/server-filesystem" }

[capabilities]
read_text_file = { path = "*" }
list_directory = { path = "*" }
read_one_doc = { path = "/path/to/welcome.md" }
"#;

#[test]
fn mcp_providers_example() {
    let m = parses(MCP_EXAMPLE);
    let fs = ProviderSpec::Configured {
        factory: "mcp-server".into(),
        config: toml::from_str(r#"npm = "@modelcontextprotocol/server-filesystem""#).unwrap(),
    };
    assert_eq!(m.providers["fs_mcp"], fs);
    match &m.providers["linear"] {
        ProviderSpec::Configured { factory, config } => {
            assert_eq!(factory, "mcp-server");
            assert_eq!(config["command"].as_str(), Some("npx"));
            assert_eq!(
                config["secrets"]["LINEAR_API_KEY"].as_str(),
                Some("LINEAR_API_KEY")
            );
        }
        other => panic!("{other:?}"),
    }
    let t = &m.tools["read_text_file"];
    assert_eq!(t.provider, ProviderRef::Handle("fs_mcp".into()));
    assert!(!t.provider.ships_implementation());
    assert_eq!(
        m.tools["read_one_doc"].tool.as_deref(),
        Some("read_text_file")
    );
    match &m.tools["inline_fs"].provider {
        ProviderRef::Shipped(s) => assert_eq!(s.spec, fs),
        other => panic!("{other:?}"),
    }
    assert!(m.tools["inline_fs"].provider.ships_implementation());
    let caps = m.capabilities.unwrap();
    assert_eq!(
        caps["read_one_doc"],
        grant(r#"{ path = "/path/to/welcome.md" }"#)
    );
}

#[test]
fn provider_package_example() {
    let m = parses(
        r#"
[agent]
name = "fetcher"

[providers]
fetch = { provider = "@my-org/loom-fetch", url_prefix = "https://api.example.com/" }
versioned = { provider = "@my-org/loom-fetch@2.0.0", retries = 3, nested = { deep = [1, "two"] } }
local = { provider = "./fetch-provider", url_prefix = "${PREFIX:-https://env.example/}" }
from_git = { provider = "git+https://example.com/f.git#v2", x = true }
bare = { provider = "./fetch-provider" }
notes = { path = "./notes-provider" }
pinned = { npm = "@my-org/x", version = "^1.2" }
repo = { git = "https://example.com/r.git", rev = "v1" }
short = "./bin/provider"

[tools]
fetch_url = { provider = "fetch" }

[capabilities]
fetch_url = { network = "*" }
"#,
    );
    // a provider package with construction config: installed like its source, the config passed at start
    let fetch = &m.providers["fetch"];
    match fetch {
        ProviderSpec::Package { source, config } => {
            assert_eq!(
                source,
                &Source::Npm {
                    name: "@my-org/loom-fetch".into(),
                    version: None
                }
            );
            assert_eq!(
                config["url_prefix"].as_str(),
                Some("https://api.example.com/")
            );
            assert_eq!(config.len(), 1);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        fetch.source().map(Source::describe).as_deref(),
        Some("npm @my-org/loom-fetch")
    );
    assert_eq!(
        fetch.describe(),
        "npm @my-org/loom-fetch (config: url_prefix)"
    );
    assert!(fetch.package_config().is_some());
    // every source form works as a package, pins included; without config it is a plain source
    match &m.providers["versioned"] {
        ProviderSpec::Package { source, config } => {
            assert_eq!(source.describe(), "npm @my-org/loom-fetch@2.0.0");
            assert_eq!(config["retries"].as_integer(), Some(3));
            assert_eq!(config["nested"]["deep"].as_array().map(Vec::len), Some(2));
        }
        other => panic!("{other:?}"),
    }
    match &m.providers["local"] {
        ProviderSpec::Package { source, config } => {
            assert_eq!(source, &Source::Path("./fetch-provider".into()));
            assert_eq!(config["url_prefix"].as_str(), Some("https://env.example/"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        m.providers["from_git"]
            .source()
            .map(Source::describe)
            .as_deref(),
        Some("git https://example.com/f.git#v2")
    );
    assert_eq!(
        m.providers["bare"],
        ProviderSpec::Source(Source::Path("./fetch-provider".into()))
    );
    assert_eq!(m.providers["bare"].package_config(), None);
    assert_eq!(
        m.providers["notes"]
            .source()
            .map(Source::describe)
            .as_deref(),
        Some("path ./notes-provider")
    );
    assert_eq!(
        m.providers["notes"],
        ProviderSpec::Source(Source::Path("./notes-provider".into()))
    );
    assert_eq!(
        m.providers["pinned"],
        ProviderSpec::Source(Source::Npm {
            name: "@my-org/x".into(),
            version: Some("^1.2".into())
        })
    );
    assert_eq!(
        m.providers["repo"],
        ProviderSpec::Source(Source::Git {
            url: "https://example.com/r.git".into(),
            rev: Some("v1".into())
        })
    );
    assert_eq!(
        m.providers["short"],
        ProviderSpec::Source(Source::Path("./bin/provider".into()))
    );
    assert_eq!(
        m.tools["fetch_url"].provider,
        ProviderRef::Handle("fetch".into())
    );
}

const SUBAGENT_EXAMPLE: &str = r#"
[agent]
name = "lead"

[tools]
spawn_subagent = "builtin"

[capabilities.spawn_subagent.manifest]
name = "researcher"

[capabilities.spawn_subagent.manifest.harness]
provider = "anthropic"
model = "claude-haiku-4-5"

[capabilities.spawn_subagent.manifest.tools]
read_file = "builtin"

[capabilities.spawn_subagent.manifest.capabilities]
read_file = { paths = ["./"] }
"#;

#[test]
fn spawn_subagent_nested_tables() {
    let m = parses(SUBAGENT_EXAMPLE);
    assert_eq!(m.subagents.len(), 1);
    let sub = &m.subagents[0];
    assert_eq!(sub.key, "spawn_subagent");
    let SubagentSource::Inline(child) = &sub.source else {
        panic!("{sub:?}")
    };
    assert_eq!(child.agent.name, "researcher");
    assert_eq!(
        child.harness.as_ref().unwrap().config["model"].as_str(),
        Some("claude-haiku-4-5")
    );
    assert_eq!(child.tools["read_file"].provider, ProviderRef::Builtin);
    assert!(!child.tools_defaulted);
    assert_eq!(
        child.capabilities.as_ref().unwrap()["read_file"],
        grant(r#"{ paths = ["./"] }"#)
    );
    // The grant itself carries the manifest kind.
    let caps = m.capabilities.unwrap();
    assert!(caps["spawn_subagent"].rows().unwrap()[0]
        .get("manifest")
        .is_some());

    // Errors inside the sub-manifest name its full key path.
    let bad = SUBAGENT_EXAMPLE.replace("model = \"claude-haiku-4-5\"", "modle = \"x\"");
    fails(
        &bad,
        "agent.toml: capabilities.spawn_subagent.manifest.harness.modle: unknown key; did you mean model?",
    );
    // The [agent] form inside the sub-manifest is accepted too; both at once is not.
    let m = parses(
        "[agent]\nname = \"lead\"\n[capabilities.spawn_subagent.manifest.agent]\nname = \"researcher\"\n",
    );
    let SubagentSource::Inline(child) = &m.subagents[0].source else {
        panic!()
    };
    assert_eq!(child.agent.name, "researcher");
    fails(
        "[agent]\nname = \"lead\"\n[capabilities.spawn_subagent.manifest]\nname = \"r\"\n[capabilities.spawn_subagent.manifest.agent]\nname = \"r\"\n",
        "capabilities.spawn_subagent.manifest.agent: agent fields are written both at the top level and in [agent]",
    );
    fails(
        "[agent]\nname = \"lead\"\n[capabilities.spawn_subagent.manifest]\ntools = {}\n",
        "capabilities.spawn_subagent.manifest.name: missing; every agent needs a name",
    );
}

#[test]
fn subagents_by_path_in_rows_and_tool_entries() {
    let m = parses(
        r#"
[agent]
name = "lead"

[tools]
helper = { provider = "builtin", tool = "spawn_subagent", capabilities = { manifest = { name = "h", tools = {} } } }

[capabilities]
spawn_subagent = [{ manifest = "./researcher.toml" }, { manifest = { name = "inline" } }]
"#,
    );
    let keys: Vec<(&str, bool)> = m
        .subagents
        .iter()
        .map(|s| (s.key.as_str(), matches!(s.source, SubagentSource::Path(_))))
        .collect();
    assert_eq!(
        keys,
        [
            ("spawn_subagent", true),
            ("spawn_subagent", false),
            ("helper", false)
        ]
    );
    assert_eq!(
        m.subagents[0].source,
        SubagentSource::Path("./researcher.toml".into())
    );
    fails(
        "[agent]\nname = \"a\"\n[capabilities]\nspawn_subagent = { manifest = 3 }\n",
        "capabilities.spawn_subagent.manifest: expected an inline sub-manifest table or a path, found an integer",
    );
}

#[test]
fn self_copy_spawn_subagent() {
    let m = parses(
        r#"
[agent]
name = "forker"

[tools]
spawn_subagent = "builtin"
bash           = "builtin"

[capabilities]
spawn_subagent = "*"
bash           = { commands = "*", paths = ["./"] }
"#,
    );
    assert!(m.subagents.is_empty());
    assert_eq!(
        m.tools["bash"],
        ToolEntry {
            provider: ProviderRef::Builtin,
            tool: None,
            capabilities: None
        }
    );
}

#[test]
fn web_search_flavours() {
    let m = parses(
        r#"
[agent]
name = "searcher"

[tools]
web_search = "anthropic"
web_fetch  = "anthropic"
other      = "openai"

[capabilities]
web_search = { max_uses = 3, allowed_domains = ["docs.python.org"] }
web_fetch  = { max_uses = 2, max_content_tokens = 8000 }
"#,
    );
    assert_eq!(
        m.tools["web_search"].provider,
        ProviderRef::Harness("anthropic".into())
    );
    assert_eq!(
        m.tools["other"].provider,
        ProviderRef::Harness("openai".into())
    );
    assert!(!m.tools["web_fetch"].provider.ships_implementation());
    assert_eq!(
        m.capabilities.unwrap()["web_fetch"],
        grant("{ max_uses = 2, max_content_tokens = 8000 }")
    );
    let m = parses("[agent]\nname = \"b\"\n[tools]\nweb_search = \"builtin\"\n");
    assert_eq!(m.tools["web_search"].provider, ProviderRef::Builtin);
}

const GLASS: &str = r#"
[agent]
name = "glass"
system_prompt = "vault lives at ${VAULT_PATH:-~/Dropbox/glass-vault}"

[harness]
provider = "anthropic"
model = "${MODEL_ID:-claude-sonnet-4-5}"

[capabilities]
read_file = { paths = ["${VAULT_PATH}", "./local"] }
"#;

#[test]
fn env_substitution_example() {
    let m = parses_with(
        GLASS,
        &env(&[("VAULT_PATH", "/srv/vault"), ("MODEL_ID", "claude-opus-4")]),
    );
    assert_eq!(
        m.agent.system_prompt,
        Some(SystemPrompt::Text("vault lives at /srv/vault".into()))
    );
    assert_eq!(
        m.harness.unwrap().config["model"].as_str(),
        Some("claude-opus-4")
    );
    assert_eq!(
        m.capabilities.unwrap()["read_file"],
        grant(r#"{ paths = ["/srv/vault", "./local"] }"#)
    );

    let m = parses_with(&GLASS.replace("${VAULT_PATH}", "./v"), &env(&[]));
    assert_eq!(
        m.agent.system_prompt,
        Some(SystemPrompt::Text(
            "vault lives at ~/Dropbox/glass-vault".into()
        ))
    );
    assert_eq!(
        m.harness.unwrap().config["model"].as_str(),
        Some("claude-sonnet-4-5")
    );

    let e = fails_with(
        GLASS,
        &env(&[("SECRETISH", "hunter2")]),
        "agent.toml: capabilities.read_file.paths[1]: undefined variable ${VAULT_PATH}",
    );
    assert!(e.hint.unwrap().contains("${VAULT_PATH:-default}"));
    fails(
        "[agent]\nname = \"${NAME\"\n",
        "agent.toml: agent.name: malformed variable reference",
    );
    fails(
        "[agent]\nname = \"${1X}\"\n",
        "agent.name: malformed variable reference",
    );
    let m = parses("[agent]\nname = \"a\"\ndescription = \"$NAME is literal\"\n");
    assert_eq!(m.agent.description.as_deref(), Some("$NAME is literal"));
    // An env value is substituted once, never re-scanned, and never echoed in an error.
    let m = parses_with(
        "[agent]\nname = \"a\"\ndescription = \"${A}\"\n",
        &env(&[("A", "${B}")]),
    );
    assert_eq!(m.agent.description.as_deref(), Some("${B}"));
    let e = fails_with(
        "[agent]\nname = \"${TOKEN}\"\ndescription = \"${MISSING}\"\n",
        &env(&[("TOKEN", "sk-secret-value")]),
        "undefined variable ${MISSING}",
    );
    assert!(!e.to_string().contains("sk-secret-value"));
    // A later error that would echo a substituted value names the variable instead.
    let e = fails_with(
        "[agent]\nname = \"a\"\n[tools]\nx = \"${PROVIDER}\"\n",
        &env(&[("PROVIDER", "secret-handle")]),
        "tools.x: provider \"${PROVIDER}\" is a bare handle",
    );
    assert!(!format!("{e} {e:?}").contains("secret-handle"));
    let e = group_fails_in(
        "x = { capabilities = \"${CAP}\" }",
        None,
        &env(&[("CAP", "sk-live-123")]),
        "tools.x.capabilities: \"${CAP}\" is not a grant",
    );
    assert!(!e.to_string().contains("sk-live-123"));
    let t: toml::Table = toml::from_str("name = \"a\"\n[tools]\nx = \"${P}\"\n").unwrap();
    let e = manifest_from_table(&t, "agent.ts", "", &env(&[("P", "hidden-name")])).unwrap_err();
    assert!(!e.to_string().contains("hidden-name"), "{e}");
}

#[test]
fn sdk_example_as_toml_and_layer_forms() {
    let m = parses(
        r#"
[agent]
name = "demo"
system_prompt = { path = "./prompt.md" }
secrets = ["FETCH_KEY"]
storage_id = "demo-v1"
description = "a demo"
metadata = { team = "infra", tier = 2 }

[session]
layers = [
  { provider = "compacting", threshold = 60 },
  { provider = "file", path = "./demo.jsonl" },
]

[tools]
bash = "builtin"
read_file = "builtin"

[capabilities]
bash = { commands = "*", paths = ["./"] }
read_file = { paths = ["./"] }
"#,
    );
    assert_eq!(
        m.agent.system_prompt,
        Some(SystemPrompt::Path("./prompt.md".into()))
    );
    assert_eq!(m.agent.secrets, ["FETCH_KEY"]);
    assert_eq!(m.agent.storage_id.as_deref(), Some("demo-v1"));
    assert_eq!(m.agent.metadata["tier"].as_integer(), Some(2));
    assert_eq!(
        m.session.layers[0].config["threshold"].as_integer(),
        Some(60)
    );
    assert_eq!(m.session.layers[1].provider, "file");
    assert!(m.session.layers[1].storage);

    let layers = |text: &str| -> Vec<(String, toml::Table, bool)> {
        parses(&format!("[agent]\nname = \"s\"\n{text}"))
            .session
            .layers
            .into_iter()
            .map(|l| (l.provider, l.config, l.storage))
            .collect()
    };
    let t = |s: &str| -> toml::Table { toml::from_str(s).unwrap() };
    assert_eq!(
        layers("[session]\nprovider = \"in-memory\"\n"),
        [("in-memory".into(), t(""), true)]
    );
    assert_eq!(
        layers("[session]\nprovider = \"file\"\npath = \"./s.jsonl\"\n"),
        [("file".into(), t("path = \"./s.jsonl\""), true)]
    );
    assert_eq!(
        layers("[session]\nlayers = [\"compacting\", \"in-memory\"]\n[session.compacting]\nthreshold = 60\n"),
        [("compacting".into(), t("threshold = 60"), false), ("in-memory".into(), t(""), true)]
    );
    assert_eq!(
        layers("[[session.layers]]\nprovider = \"skills\"\nroots = [\"~/.skills\", \"./skills\"]\n[[session.layers]]\nprovider = \"fork-of-parent\"\n"),
        [("skills".into(), t("roots = [\"~/.skills\", \"./skills\"]"), false), ("fork-of-parent".into(), t(""), true)]
    );
    // An external layer is storage-class, with open config.
    assert_eq!(
        layers("[session]\nlayers = [\"compacting\", \"notes\"]\n[session.notes]\nanything = { x = 1 }\n"),
        [("compacting".into(), t(""), false), ("notes".into(), t("anything = { x = 1 }"), true)]
    );
    assert_eq!(
        layers("[session]\nlayers = [\"compacting\", \"in-memory\"]\n[session.compacting]\ntoken_fraction = 0.75\nkeep = 10\npersist = true\n")[0].1,
        t("token_fraction = 0.75\nkeep = 10\npersist = true")
    );
}

// ---- Skills: contributed tool groups ---------------------------------------------------------------------------------

#[test]
fn skill_groups() {
    let g = group(
        r#"bash = { capabilities = { commands = ["gcalcli"], network = "*" } }"#,
        None,
    );
    assert_eq!(g.label, "skill test");
    assert_eq!(g.origin, "skills/test/SKILL.md");
    assert_eq!(g.tools["bash"].provider, ProviderRef::Host);
    assert!(!g.tools["bash"].provider.ships_implementation());
    assert_eq!(
        g.tools["bash"].capabilities,
        Some(grant(r#"{ commands = ["gcalcli"], network = "*" }"#))
    );

    let g = group(
        r#"bash = { capabilities = { commands = ["gcalcli"], network = "*", paths = ["~/.gcalcli"] } }"#,
        None,
    );
    assert_eq!(
        g.tools["bash"]
            .capabilities
            .as_ref()
            .unwrap()
            .rows()
            .unwrap()
            .len(),
        1
    );

    let g = group(
        r#"jq = { provider = "builtin", tool = "bash", capabilities = { commands = ["jq"] } }"#,
        None,
    );
    assert_eq!(g.tools["jq"].provider, ProviderRef::Builtin);
    assert_eq!(g.tools["jq"].tool.as_deref(), Some("bash"));

    let g = group("read_skill = {}", None);
    assert_eq!(
        g.tools["read_skill"],
        ToolEntry {
            provider: ProviderRef::Host,
            tool: None,
            capabilities: None
        }
    );

    let g = group(
        r#"read_skill = { provider = "session" }
remember = "session""#,
        None,
    );
    assert_eq!(g.tools["read_skill"].provider, ProviderRef::Session);
    assert_eq!(g.tools["remember"].provider, ProviderRef::Session);

    let g = group(
        r#"bash = { capabilities = { commands = ["./run.sh"], paths = ["${SKILL_DIR}"] } }"#,
        None,
    );
    assert_eq!(
        g.tools["bash"].capabilities,
        Some(grant(
            r#"{ commands = ["./run.sh"], paths = ["/home/u/.skills/test"] }"#
        ))
    );
    assert!(group("", None).tools.is_empty());
}

#[test]
fn consent_rule_shapes() {
    let shipped = |g: &ToolGroup, name: &str| -> Shipped {
        match &g.tools[name].provider {
            ProviderRef::Shipped(s) => {
                assert!(g.tools[name].provider.ships_implementation());
                s.clone()
            }
            other => panic!("{name}: {other:?}"),
        }
    };
    // Inline configured table.
    let g = group(
        r#"echo_note = { provider = { provider = "mcp-server", command = "node", args = ["${SKILL_DIR}/server.mjs"] } }"#,
        None,
    );
    match shipped(&g, "echo_note").spec {
        ProviderSpec::Configured { factory, config } => {
            assert_eq!(factory, "mcp-server");
            assert_eq!(
                config["args"][0].as_str(),
                Some("/home/u/.skills/test/server.mjs")
            );
        }
        other => panic!("{other:?}"),
    }
    // Source strings.
    let g = group(
        r#"a = { provider = "./bin" }
b = { provider = "@scope/pkg" }
c = "../x"
d = "git+https://example.com/x.git#main"
e = { provider = { path = "./x" } }"#,
        None,
    );
    assert_eq!(
        shipped(&g, "a").spec,
        ProviderSpec::Source(Source::Path("./bin".into()))
    );
    assert_eq!(shipped(&g, "a").label, "./bin");
    assert_eq!(
        shipped(&g, "b").spec,
        ProviderSpec::Source(Source::Npm {
            name: "@scope/pkg".into(),
            version: None
        })
    );
    assert_eq!(
        shipped(&g, "c").spec,
        ProviderSpec::Source(Source::Path("../x".into()))
    );
    assert_eq!(
        shipped(&g, "d").spec,
        ProviderSpec::Source(Source::Git {
            url: "https://example.com/x.git".into(),
            rev: Some("main".into())
        })
    );
    assert_eq!(
        shipped(&g, "e").spec,
        ProviderSpec::Source(Source::Path("./x".into()))
    );
    // Group-local handle, substituted; a root handle stays root-trusted; local shadows root.
    let g = group(
        r#"echo_note = { provider = "echo" }
take_note = { provider = "notes" }
shadow = { provider = "shadowed" }"#,
        Some(
            r#"echo = { provider = "mcp-server", command = "node", args = ["${SKILL_DIR}/server.mjs"] }
shadowed = { path = "./local" }"#,
        ),
    );
    let s = shipped(&g, "echo_note");
    assert_eq!(s.label, "echo");
    assert_eq!(s.spec, g.providers["echo"]);
    assert_eq!(
        g.tools["take_note"].provider,
        ProviderRef::Handle("notes".into())
    );
    assert_eq!(
        shipped(&g, "shadow").spec,
        ProviderSpec::Source(Source::Path("./local".into()))
    );
    let g = parse_tool_group(
        "skill x",
        r#"t = { provider = "notes" }"#,
        Some(r#"notes = { path = "./mine" }"#),
        "x/SKILL.md",
        &env(&[]),
        &handles(&["notes"]),
    )
    .unwrap();
    assert!(g.tools["t"].provider.ships_implementation());
}

#[test]
fn sidecar_group() {
    let g = parse_sidecar_group(
        "skill notes",
        "[tools]\nnote = { provider = \"srv\", tool = \"echo\" }\n[providers]\nsrv = { provider = \"mcp-server\", npm = \"@x/srv\" }\n",
        "skills/notes/loom.toml",
        &env(&[]),
        &handles(&[]),
    )
    .unwrap();
    assert_eq!(g.tools["note"].tool.as_deref(), Some("echo"));
    let e = parse_sidecar_group(
        "s",
        "[tool]\n",
        "skills/x/loom.toml",
        &env(&[]),
        &handles(&[]),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "skills/x/loom.toml: tool: unknown key; did you mean tools?"
    );
}

#[test]
fn group_refusals() {
    group_fails(
        "x = {}",
        Some(r#"builtin = { path = "./b" }"#),
        "skills/test/SKILL.md: providers.builtin: \"builtin\" is a reserved provider name",
    );
    group_fails(
        "x = {}",
        Some(r#"session = { path = "./b" }"#),
        "providers.session: \"session\" is a reserved",
    );
    let e = group_fails(
        r#"x = { provider = "mystery" }"#,
        None,
        "tools.x.provider: provider \"mystery\" is a bare handle",
    );
    assert!(e.hint.unwrap().contains("./mystery"));
    group_fails(r#"x = { provider = "builtin", command = "ls" }"#, None, "tools.x.command: unknown key; a [tools.x] entry never configures: put construction config on its [providers] entry");
    group_fails(
        "x = { capabilities = \"all\" }",
        None,
        "tools.x.capabilities: \"all\" is not a grant",
    );
    group_fails("x = ", None, "invalid TOML at line 1");
    group_fails(
        "[tools]\nbash = { capabilities = { commands = [\"dig\"] } }",
        None,
        "tools.tools: looks like a whole [tools] table; a tool group's tools text is the body of [tools]",
    );
    group_fails(
        "x = {}\n[providers]\nsrv = { path = \"./s\" }",
        None,
        "tools.providers: looks like a whole [providers] table",
    );
    // A tool that happens to be named `tools` is still fine.
    assert_eq!(
        group("tools = { provider = \"builtin\" }", None).tools["tools"].provider,
        ProviderRef::Builtin
    );
    group_fails(
        "x = \"${UNSET}\"",
        None,
        "tools.x: ${UNSET}: a skill's declarations never read the environment; no variable is substituted here",
    );
}

// ---- Refusals ---------------------------------------------------------------------------------------------------------

#[test]
fn unknown_keys_with_suggestions() {
    let cases: &[(&str, &str)] = &[
        ("[agent]\nname = \"a\"\nsytem_prompt = \"x\"\n", "agent.toml: agent.sytem_prompt: unknown key; did you mean system_prompt?"),
        ("[agent]\nname = \"a\"\n[tool]\nbash = \"builtin\"\n", "agent.toml: tool: unknown key; did you mean tools?"),
        ("[agent]\nname = \"a\"\n[capabilites]\n", "agent.toml: capabilites: unknown key; did you mean capabilities?"),
        ("[agent]\nname = \"a\"\n[zzzzzzzz]\n", "agent.toml: zzzzzzzz: unknown key; expected one of: agent, harness"),
        ("name = \"a\"\n", "agent.toml: name: unknown key"),
        ("[agent]\nname = \"a\"\n[harness]\nprovider = \"anthropic\"\nmax_tokens = 5\n", "harness.max_tokens: unknown key; did you mean maxTokens?"),
        ("[agent]\nname = \"a\"\n[harness]\nprovider = \"openai\"\nmaxTokens = 5\n", "harness.maxTokens: unknown key; did you mean maxOutputTokens?"),
        ("[agent]\nname = \"a\"\n[harness]\nprovider = \"small-model-of-parent\"\nstream = true\n", "harness.stream: unknown key"),
        ("[agent]\nname = \"a\"\n[tools]\nbash = { capabilites = \"*\" }\n", "tools.bash.capabilites: unknown key; did you mean capabilities?"),
        ("[agent]\nname = \"a\"\n[tools.bash]\nprovider = \"builtin\"\ntimeout_ms = 5\n", "tools.bash.timeout_ms: unknown key; a [tools.bash] entry never configures: put construction config on its [providers] entry"),
        ("[agent]\nname = \"a\"\n[session]\nprovider = \"compacting\"\nthreshhold = 5\n", "session.threshhold: unknown key; did you mean threshold?"),
        ("[agent]\nname = \"a\"\n[session]\nlayers = [\"in-memory\"]\nlayer = 1\n", "session.layer: unknown key; did you mean layers?"),
        ("[agent]\nname = \"a\"\n[session]\nprovider = \"in-memory\"\npath = \"x\"\n", "session.path: unknown key; this table takes no keys"),
        ("[agent]\nname = \"a\"\n[providers]\nm = { provider = \"mcp-server\", npm = \"x\", sercets = {} }\n", "providers.m.sercets: unknown key; did you mean secrets?"),
        ("[agent]\nname = \"a\"\n[providers]\nm = { path = \"./x\", rev = \"1\" }\n", "providers.m.rev: unknown key"),
        ("[agent]\nname = \"a\"\n[permissions]\nallow = []\n", "permissions.allow: unknown key; did you mean allow_rules?"),
        ("[agent]\nname = \"a\"\n[[permissions.deny_rules]]\ntool = \"fetch\"\nhots = \"x\"\n", "permissions.deny_rules[1].hots: unknown key; did you mean host?"),
        // a grant written straight into a [tools] entry gets the fix that applies: `capabilities`
        ("[agent]\nname = \"a\"\n[tools]\nread_file = { paths = [\"./\"] }\n", "tools.read_file.paths: unknown key; `paths` is a grant kind, and a [tools] entry grants through its `capabilities` key (hint: read_file = { provider = \"builtin\", capabilities = { paths = … } }, or read_file = { paths = … } in [capabilities])"),
        // a misspelt `layers` alone is named, not reported as "names no layers"
        ("[agent]\nname = \"a\"\n[session]\nlayer = [\"in-memory\"]\n", "session.layer: unknown key; did you mean layers?"),
        ("[agent]\nname = \"a\"\nsystem_prompt = { file = \"x\" }\n", "agent.system_prompt.file: unknown key"),
    ];
    for (text, want) in cases {
        fails(text, want);
    }
}

#[test]
fn wrong_types_and_shapes() {
    let cases: &[(&str, &str)] = &[
        ("[agent]\nname = 3\n", "agent.toml: agent.name: expected a string, found an integer"),
        ("[agent]\nname = \"\"\n", "agent.name: must not be empty"),
        ("agent = 1\n", "agent: expected a table, found an integer"),
        ("[agent]\ndescription = \"x\"\n", "agent.name: missing; every agent needs a name"),
        ("[harness]\nprovider = \"anthropic\"\n", "agent.toml: agent: missing; every manifest declares [agent]"),
        ("[agent]\nname = \"a\"\nsecrets = \"X\"\n", "agent.secrets: expected an array of strings, found a string"),
        ("[agent]\nname = \"a\"\nsecrets = [\"X\", 1]\n", "agent.secrets[2]: expected a string, found an integer"),
        ("[agent]\nname = \"a\"\nsystem_prompt = 1\n", "agent.system_prompt: expected a string or { path = \"...\" }, found an integer"),
        ("[agent]\nname = \"a\"\n[harness]\nmodel = \"x\"\n", "harness.provider: missing; a harness names its provider"),
        ("[agent]\nname = \"a\"\n[harness]\nprovider = \"anthropic\"\nmaxTokens = \"4096\"\n", "harness.maxTokens: expected an integer, found a string"),
        ("[agent]\nname = \"a\"\n[harness]\nprovider = \"anthropic\"\nstream = \"yes\"\n", "harness.stream: expected a boolean, found a string"),
        ("[agent]\nname = \"a\"\n[harness]\nprovider = \"local\"\ntemperature = \"hot\"\n", "harness.temperature: expected a number, found a string"),
        ("[agent]\nname = \"a\"\n[harness]\nprovider = \"test\"\nscript = 1\n", "harness.script: expected an array, found an integer"),
        ("[agent]\nname = \"a\"\n[tools]\nbash = 1\n", "tools.bash: expected a provider name or a { provider, tool, capabilities } table, found an integer"),
        ("[agent]\nname = \"a\"\n[tools]\nbash = \"*\"\n", "tools.bash: \"*\" is a grant, not a provider"),
        ("[agent]\nname = \"a\"\n[tools]\nbash = { provider = 1 }\n", "tools.bash.provider: expected a provider name, a source string, or an inline provider table, found an integer"),
        ("[agent]\nname = \"a\"\n[tools]\nbash = { tool = 1 }\n", "tools.bash.tool: expected a string, found an integer"),
        ("[agent]\nname = \"a\"\n[tools]\nbash = { capabilities = [1] }\n", "tools.bash.capabilities: row 1 of the capability set is an integer"),
        ("[agent]\nname = \"a\"\n[capabilities]\nbash = \"builtin\"\n", "capabilities.bash: \"builtin\" is not a grant"),
        ("[agent]\nname = \"a\"\n[capabilities]\nbash = { commands = [\"*\"] }\n", "capabilities.bash: kind `commands`: \"*\" inside a list is ambiguous"),
        ("capabilities = []\n[agent]\nname = \"a\"\n", "agent.toml: capabilities: expected a table, found an array"),
        ("[agent]\nname = \"a\"\n[providers]\nf = { provider = \"@x/fetch\", capabilities = \"*\" }\n", "providers.f.capabilities: a provider entry carries no authority"),
        ("[agent]\nname = \"a\"\n[session]\nlayers = [\"compacting\", \"in-memory\"]\n[session.compacting]\ntoken_fraction = 1.5\n", "session.compacting.token_fraction: 1.5 is not a fraction in (0, 1]"),
        ("[agent]\nname = \"a\"\n[session]\nlayers = [\"compacting\", \"in-memory\"]\n[session.compacting]\ntokenFraction = \"half\"\n", "session.compacting.tokenFraction: expected a number between 0 and 1, found a string"),
        ("[agent]\nname = \"a\"\n[harnesses.cheap]\nmodel = \"x\"\n", "harnesses.cheap.provider: missing; a harness names its provider"),
        ("[agent]\nname = \"a\"\n[harnesses.\"../x\"]\nprovider = \"test\"\n", "harnesses.\"../x\": a harness name is 1 to 64 characters"),
        ("[agent]\nname = \"a\"\n[harnesses.p]\nprovider = \"small-model-of-parent\"\n", "harnesses.p.provider: \"small-model-of-parent\" works only as a sub-agent's [harness]"),
        ("[agent]\nname = \"a\"\n[supervisor]\nenabled = \"yes\"\n", "supervisor.enabled: expected true or false, found a string"),
        ("[agent]\nname = \"a\"\n[supervisor]\nmax_rounds = 0\n", "supervisor.max_rounds: 0 is not between 1 and 20"),
        ("[agent]\nname = \"a\"\n[supervisor]\nmax_round = 2\n", "supervisor.max_round: unknown key"),
        ("[agent]\nname = \"a\"\n[supervisor]\nreview = \"judge\"\n", "supervisor.review: names no harness \"judge\" (there are none; declare one as [harnesses.NAME] with a provider)"),
        ("[agent]\nname = \"a\"\n[harnesses.cheap]\nprovider = \"test\"\n[session]\nlayers = [\"compacting\", \"in-memory\"]\n[session.compacting]\nsummarizer = \"big\"\n", "session.compacting.summarizer: names no harness \"big\" (the named harnesses are cheap)"),
        ("[agent]\nname = \"a\"\n[providers]\nx = 1\n", "providers.x: expected a provider table, found an integer"),
        ("[agent]\nname = \"a\"\n[providers]\nx = \"notes\"\n", "providers.x: \"notes\" is not a provider source"),
        ("[agent]\nname = \"a\"\n[providers]\nx = {}\n", "providers.x: names no source or factory"),
        ("[agent]\nname = \"a\"\n[providers]\nx = { path = \"./a\", npm = \"b\" }\n", "providers.x: names several sources (path, npm)"),
        ("[agent]\nname = \"a\"\n[providers]\nbuiltin = { path = \"./a\" }\n", "providers.builtin: \"builtin\" is a reserved provider name"),
        ("[agent]\nname = \"a\"\n[providers]\nm = { provider = \"mcp-server\" }\n", "providers.m: an mcp-server needs exactly one of command, npm or url (found none)"),
        ("[agent]\nname = \"a\"\n[providers]\nm = { provider = \"mcp-server\", npm = \"x\", command = \"y\" }\n", "providers.m: an mcp-server needs exactly one of command, npm or url (found command and npm)"),
        ("[agent]\nname = \"a\"\n[providers]\nm = { provider = \"mcp-server\", npm = \"x\", args = [\"a\"] }\n", "providers.m.args: args only go with command"),
        ("[agent]\nname = \"a\"\n[providers]\nm = { provider = \"mcp-server\", npm = \"x\", cwd = \"proj\" }\n", "providers.m.cwd: \"proj\" is not a directory path"),
        ("[agent]\nname = \"a\"\n[providers]\nm = { provider = \"mcp-server\", npm = \"x\", cwd = \"\" }\n", "providers.m.cwd: \"\" is not a directory path"),
        ("[agent]\nname = \"a\"\n[providers]\nm = { provider = \"mcp-server\", npm = \"x\", cwd = 3 }\n", "providers.m.cwd: expected a string"),
        ("[agent]\nname = \"a\"\n[providers]\nm = { provider = \"mcp-server\", url = \"https://x\", cwd = \"./\" }\n", "providers.m.cwd: cwd only goes with a spawned server"),
        ("[agent]\nname = \"a\"\n[providers]\nm = { provider = \"mcp-server\", url = \"https://x\", headers = { A = 1 } }\n", "providers.m.headers.A: expected a string, found an integer"),
        ("[agent]\nname = \"a\"\n[providers]\nm = { provider = \"mcp-server\", command = \"x\", call_timeout_ms = -1 }\n", "providers.m.call_timeout_ms: must not be negative"),
        ("[agent]\nname = \"a\"\n[providers]\nf = { provider = \"fetch\", url_prefix = \"x\" }\n", "providers.f.provider: \"fetch\" is neither a built-in factory (mcp-server) nor a provider package's source (hint: name a provider package by its source: \"./fetch\""),
        ("[agent]\nname = \"a\"\n[providers]\nf = { provider = \"mcp_server\", npm = \"x\" }\n", "providers.f.provider: \"mcp_server\" is neither a built-in factory (mcp-server) nor a provider package's source (hint: did you mean \"mcp-server\"?)"),
        ("[agent]\nname = \"a\"\n[providers]\nf = { provider = \"@x/fetch\", version = \"1\" }\n", "providers.f.version: `version` is not construction config for the provider package \"@x/fetch\" (hint: pin an npm version in the source: provider = \"@scope/pkg@1.2.0\")"),
        ("[agent]\nname = \"a\"\n[providers]\nf = { provider = \"./f\", path = \"./g\" }\n", "providers.f.path: `path` is not construction config"),
        ("[agent]\nname = \"a\"\n[providers]\nf = { provider = \"git+https://x/f.git\", rev = \"v1\" }\n", "providers.f.rev: `rev` is not construction config"),
        ("[agent]\nname = \"a\"\n[providers]\nf = { provider = \"@x/fetch\", secrets = { K = \"K\" } }\n", "providers.f.secrets: `secrets` is not construction config for the provider package \"@x/fetch\" (hint: loom passes no secrets to a provider package"),
        ("[agent]\nname = \"a\"\n[providers]\nf = { provider = \"\" }\n", "providers.f.provider: must not be empty"),
        ("[agent]\nname = \"a\"\n[permissions]\nallow_rules = { tool = \"x\" }\n", "permissions.allow_rules: expected an array of rule tables, found a table"),
        ("[agent]\nname = \"a\"\n[[permissions.ask_rules]]\n", "permissions.ask_rules[1]: an empty rule would match every call"),
        ("[agent]\nname = \"a\"\n[[permissions.ask_rules]]\ntool = 1\n", "permissions.ask_rules[1].tool: expected a string, found an integer"),
        ("[agent]\nname = \"a\"\n[hooks]\npre_tool = \"x\"\n", "agent.toml: hooks.pre_tool: unknown key; did you mean PreToolUse?"),
    ];
    for (text, want) in cases {
        fails(text, want);
    }
}

#[test]
fn names_and_storage_ids_are_single_safe_path_components() {
    for ok in ["a", "my-agent", "Agent_2", "demo.v1", "0x", &"a".repeat(64)] {
        let m = parses(&format!(
            "[agent]\nname = \"{ok}\"\nstorage_id = \"{ok}\"\n"
        ));
        assert_eq!(
            (m.agent.name.as_str(), m.agent.storage_id.as_deref()),
            (ok, Some(ok))
        );
    }
    let why = "not a safe identifier: it names the agent's storage directory, so it must be 1-64 characters from \
               A-Z a-z 0-9 . _ - starting with a letter or a digit";
    for bad in [
        "../../etc",
        "..",
        ".",
        "a/b",
        "/abs",
        ".hidden",
        "-rf",
        "my agent",
        "a\\u0000b",
        "ü",
        "a:b",
        &"a".repeat(65),
    ] {
        fails(
            &format!("[agent]\nname = \"a\"\nstorage_id = \"{bad}\"\n"),
            &format!("agent.toml: agent.storage_id: {why} (hint: storage_id = \"my-agent\"; put a longer display text in description)"),
        );
        fails(
            &format!("[agent]\nname = \"{bad}\"\n"),
            &format!("agent.toml: agent.name: {why} (hint: name = \"my-agent\"; put a longer display text in description)"),
        );
    }
    // a substituted value is judged, and not echoed
    let e = fails_with(
        "[agent]\nname = \"${N}\"\n",
        &env(&[("N", "../secret-ish")]),
        "agent.name: not a safe identifier",
    );
    assert!(!e.to_string().contains("secret-ish"));
}

#[test]
fn bare_handle() {
    let e = fails(
        "[agent]\nname = \"a\"\n[tools]\nremember = { provider = \"notes\" }\n",
        "agent.toml: tools.remember.provider: provider \"notes\" is a bare handle: no [providers].notes is defined",
    );
    let hint = e.hint.unwrap();
    assert!(
        hint.contains("[providers].notes") && hint.contains("\"./notes\""),
        "{hint}"
    );
    let e = fails(
        "[agent]\nname = \"a\"\n[tools]\nx = \"biultin\"\n",
        "tools.x: provider \"biultin\" is a bare handle",
    );
    assert!(e.hint.unwrap().starts_with("did you mean \"builtin\"?"));
    // Defining the handle makes it resolve.
    let m = parses("[agent]\nname = \"a\"\n[providers]\nnotes = { path = \"./notes-provider\" }\n[tools]\nremember = { provider = \"notes\" }\n");
    assert_eq!(
        m.tools["remember"].provider,
        ProviderRef::Handle("notes".into())
    );
}

#[test]
fn session_refusals() {
    let head = "[agent]\nname = \"a\"\n";
    let cases: &[(&str, &str)] = &[
        ("[session]\nlayers = [\"compacting\", { provider = \"in-memory\" }]\n", "session.layers: mixes names and tables (hint: write all names"),
        ("[session]\nlayers = [\"compacting\", 3]\n", "session.layers: layer 1 is an integer"),
        ("[session]\nlayers = \"in-memory\"\n", "session.layers: expected an array of layer names or layer tables, found a string"),
        ("[session]\nlayers = [\"compacting\", \"in-memory\"]\n[session.file]\npath = \"x\"\n", "session.file: configures the layer \"file\", which is not in session.layers"),
        ("[session]\nlayers = [\"compacting\", \"in-memory\"]\n[session.compactin]\nthreshold = 1\n", "(hint: did you mean [session.compacting]?)"),
        ("[session]\nlayers = [\"in-memory\", \"compacting\"]\n", "session.layers: the chain ends in the pass-through layer \"compacting\", so nothing stores events and every turn would see an empty history"),
        ("[session]\nprovider = \"skills\"\n", "agent.toml: session: the chain ends in the pass-through layer \"skills\""),
        ("[session]\nlayers = []\n", "session.layers: is empty; every turn would see an empty history"),
        ("[session]\nprovider = \"in-memory\"\nlayers = [\"in-memory\"]\n", "session: has both provider and layers"),
        ("[session]\n", "session: names no layers"),
        ("[session]\nlayers = [\"skills\", \"in-memory\"]\n[session.skills]\ndefault_tools = [\"bash\"]\n", "session.skills.default_tools: default_tools no longer exists: skills declare the tools they need themselves"),
        ("[session]\nlayers = [\"compacting\", \"in-memory\"]\n[session.compacting]\nthreshold = \"many\"\n", "session.compacting.threshold: expected an integer, found a string"),
        ("[session]\nlayers = [{ provider = \"compacting\", threshold = 1 }, { provider = \"in-memory\" }]\n[session.compacting]\nthreshold = 2\n", "session.compacting.threshold: is configured twice, here and at session.layers[1]"),
        ("[[session.layers]]\nthreshold = 1\n", "session.layers[1].provider: missing; every layer names its provider"),
        ("[session]\nlayers = [\"compacting\", \"in-memory\"]\n[session.in-memory]\npath = \"x\"\n", "session.in-memory.path: unknown key; this table takes no keys"),
        ("[session]\nlayers = [\"\"]\n", "session.layers[1]: must not be empty"),
    ];
    for (text, want) in cases {
        fails(&format!("{head}{text}"), want);
    }
    fails(
        "session = 1\n[agent]\nname = \"a\"\n",
        "agent.toml: session: expected a table, found an integer",
    );
}

#[test]
fn permissions_rules() {
    let m = parses(
        r#"
[agent]
name = "perm"

[[permissions.allow_rules]]
tool = "bash"
command_prefix = "cargo test"

[[permissions.ask_rules]]
tool = "bash"
command_prefix = "git push"

[[permissions.deny_rules]]
tool = "web_search"
host = "private.example"

[[permissions.deny_rules]]
path_prefix = "/etc"
"#,
    );
    assert_eq!(
        m.permissions.allow,
        [Rule {
            tool: Some("bash".into()),
            command_prefix: Some("cargo test".into()),
            ..Rule::default()
        }]
    );
    assert_eq!(
        m.permissions.ask[0].command_prefix.as_deref(),
        Some("git push")
    );
    assert_eq!(m.permissions.deny.len(), 2);
    assert_eq!(
        m.permissions.deny[0].host.as_deref(),
        Some("private.example")
    );
    assert_eq!(m.permissions.deny[1].path_prefix.as_deref(), Some("/etc"));
}

#[test]
fn a_host_rule_on_a_tool_that_reports_no_host_is_refused() {
    // K14: only web_search reports a host; elsewhere the rule would parse and never match
    for tool in ["", "tool = \"bash\"\n", "tool = \"fetch\"\n"] {
        let e = fails(
            &format!("[agent]\nname = \"a\"\n[[permissions.deny_rules]]\n{tool}host = \"pastebin.com\"\n"),
            "permissions.deny_rules[1].host: only the built-in web_search reports the host a call reaches",
        );
        assert!(e.to_string().contains("set tool = \"web_search\""), "{e}");
    }
    // a renamed web_search reports it too
    parses("[agent]\nname = \"a\"\n[tools]\nsearch = { provider = \"builtin\", tool = \"web_search\" }\n[[permissions.ask_rules]]\ntool = \"search\"\nhost = \"api.search.brave.com\"\n");
}

#[test]
fn external_harness_config_is_open() {
    let m = parses("[agent]\nname = \"a\"\n[harness]\nprovider = \"@me/deepseek\"\nendpoint = \"http://localhost\"\nknobs = { a = 1 }\n");
    let h = m.harness.unwrap();
    assert_eq!(h.provider, "@me/deepseek");
    assert_eq!(h.config.len(), 2);
    let m = parses("[agent]\nname = \"a\"\n[harness]\nprovider = \"test\"\necho = true\n");
    assert_eq!(m.harness.unwrap().config["echo"].as_bool(), Some(true));
    parses("[agent]\nname = \"a\"\n[harness]\nprovider = \"local\"\nmodel = \"m.gguf\"\nthreads = 2\ncontext = 4096\ntemperature = 0.2\ntop_p = 1\ntop_k = 40\nseed = 7\nmaxTurnRequests = 8\n");
    parses("[agent]\nname = \"a\"\n[harness]\nprovider = \"openai-chat\"\nmodel = \"m\"\napiBase = \"http://x\"\nmaxOutputTokens = 10\nmaxTurnRequests = 1\nstream = false\n");
}

/// A local harness's worked examples call only the agent's own tools (their shape is the harness's to check).
#[test]
fn local_examples_call_only_the_agent_s_tools() {
    let head = "[agent]\nname = \"a\"\n[harness]\nprovider = \"local\"\n";
    let example = |tool: &str| {
        format!(
            "[[harness.examples]]\ntask = \"t\"\ncalls = [{{ tool = \"read_file\", input = {{ path = \"a\" }}, result = \"x\" }}, {{ tool = \"{tool}\", input = {{}}, result = \"\" }}]\nanswer = \"a\"\n"
        )
    };
    let tools = "[tools]\nread_file = \"builtin\"\nbash = \"builtin\"\n";
    let m = parses(&format!("{head}{}{tools}", example("bash")));
    assert_eq!(
        m.harness.unwrap().config["examples"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    let e = fails(
        &format!("{head}{}{tools}", example("write_file")),
        "harness.examples[1].calls[2].tool",
    );
    let shown = e.to_string();
    assert!(
        shown.contains("\"write_file\", which is not one of the agent's [tools]"),
        "{shown}"
    );
    assert!(shown.contains("bash, read_file"), "{shown}");
    // examples are a key of the local harness only
    fails(
        &format!(
            "[agent]\nname = \"a\"\n[harness]\nprovider = \"anthropic\"\n{}",
            example("bash")
        ),
        "examples",
    );
}

#[test]
fn context_window_is_a_count_of_the_http_harnesses() {
    for provider in ["anthropic", "openai", "openai-chat"] {
        let m = parses(&format!(
            "[agent]\nname = \"a\"\n[harness]\nprovider = \"{provider}\"\ncontextWindow = 32768\n"
        ));
        assert_eq!(
            m.harness.unwrap().config["contextWindow"].as_integer(),
            Some(32768)
        );
        fails(
            &format!("[agent]\nname = \"a\"\n[harness]\nprovider = \"{provider}\"\ncontextWindow = \"big\"\n"),
            "harness.contextWindow: expected an integer, found a string",
        );
    }
    fails(
        "[agent]\nname = \"a\"\n[harness]\nprovider = \"test\"\necho = true\ncontextWindow = 10\n",
        "harness.contextWindow: unknown key",
    );
    parses("[agent]\nname = \"a\"\n[harness]\nprovider = \"anthropic\"\nthinkingBudget = 2048\nmaxTokens = 8192\n");
    fails(
        "[agent]\nname = \"a\"\n[harness]\nprovider = \"openai\"\nthinkingBudget = 2048\n",
        "harness.thinkingBudget: unknown key",
    );
}

#[test]
fn manifest_from_table_for_sdk_use() {
    let t: toml::Table = toml::from_str(
        "name = \"sdk\"\nsystem_prompt = \"${P:-hi}\"\n[tools]\nbash = \"builtin\"\n[capabilities]\nbash = { commands = \"*\" }\n",
    )
    .unwrap();
    let m = manifest_from_table(&t, "agent.ts", "", &env(&[])).unwrap();
    assert_eq!(m.agent.name, "sdk");
    assert_eq!(m.agent.system_prompt, Some(SystemPrompt::Text("hi".into())));
    let t: toml::Table =
        toml::from_str("[agent]\nname = \"x\"\n[tools]\nbash = \"nope\"\n").unwrap();
    let e = manifest_from_table(&t, "agent.ts", "sub", &env(&[])).unwrap_err();
    assert_eq!(e.key_path, "sub.tools.bash");
    // A programmatic table nested beyond the limit is refused, not overflowed.
    let mut deep = toml::Value::Integer(1);
    for _ in 0..200 {
        let mut t = toml::Table::new();
        t.insert("b".into(), deep);
        deep = toml::Value::Table(t);
    }
    let mut t = toml::Table::new();
    t.insert("name".into(), toml::Value::String("deep".into()));
    t.insert("metadata".into(), deep);
    let e = manifest_from_table(&t, "agent.ts", "", &env(&[])).unwrap_err();
    assert!(e.message.contains("nesting deeper than 64 levels"), "{e}");
}

#[test]
fn size_and_nesting_limits() {
    let big = format!(
        "[agent]\nname = \"a\"\ndescription = \"{}\"\n",
        "x".repeat(MAX_MANIFEST_BYTES)
    );
    fails(
        &big,
        &format!(
            "agent.toml: manifest is {} bytes; the limit is 1 MiB",
            big.len()
        ),
    );
    let n = 10_000;
    fails(
        &format!("a = {}{}", "[".repeat(n), "]".repeat(n)),
        "agent.toml: nesting deeper than 64 levels at line 1",
    );
    fails(
        &format!("a = {}1{}", "{b=".repeat(n), "}".repeat(n)),
        "nesting deeper than 64 levels",
    );
    let e = group_fails(
        &format!("a = {}{}", "[".repeat(n), "]".repeat(n)),
        None,
        "nesting deeper than 64",
    );
    assert_eq!(e.file, "skills/test/SKILL.md");
    group_fails(
        "x = {}",
        Some(&format!("p = \"{}\"", "y".repeat(MAX_MANIFEST_BYTES))),
        "the limit is 1 MiB",
    );
}

#[test]
fn syntax_errors() {
    fails(
        "[agent]\nname = \"a\nx",
        "agent.toml: invalid TOML at line 2",
    );
    fails("[agent]\nname = \"a\"\n[agent]\n", "invalid TOML at line 3");
}

/// Truncations and byte flips of every example must produce a manifest or an error, never a panic.
#[test]
fn never_panics_on_mangled_examples() {
    let examples = [TOP_EXAMPLE, MCP_EXAMPLE, SUBAGENT_EXAMPLE, GLASS];
    let e = env(&[("VAULT_PATH", "/v")]);
    let mut rng = crate::Rng::seeded(0x5eed);
    for text in examples {
        for cut in (0..text.len()).filter(|i| text.is_char_boundary(*i)) {
            let _ = parse_manifest(&text[..cut], "agent.toml", &e);
        }
        let alphabet = b"[]{}=\",.#$'\n \\abc0*-:";
        for _ in 0..500 {
            let mut bytes = text.as_bytes().to_vec();
            for _ in 0..3 {
                let at = rng.below(bytes.len());
                bytes[at] = *rng.pick(alphabet);
            }
            if let Ok(s) = String::from_utf8(bytes) {
                let _ = parse_manifest(&s, "agent.toml", &e);
                let _ = parse_tool_group("g", &s, Some(&s), "g", &e, &handles(&["notes"]));
            }
        }
    }
}

#[test]
fn hooks_parse_by_event_with_defaults() {
    use crate::policy::hooks::{HookAction, HookEvent, DEFAULT_HOOK_TIMEOUT_SECS};
    let m = parses(
        r#"
[agent]
name = "hooked"

[[hooks.PreToolUse]]
matcher = "bash|write_file"
command = "./hooks/check.sh"
timeout_secs = 5

[[hooks.PreToolUse]]
url = "https://hooks.example/pre"

[[hooks.Stop]]
command = "cargo test -q"
"#,
    );
    let pre = m.hooks.at(HookEvent::PreToolUse, &["bash"]);
    assert_eq!(pre.len(), 2);
    assert_eq!(
        pre[0].action,
        HookAction::Command("./hooks/check.sh".into())
    );
    assert_eq!(pre[0].timeout_secs, 5);
    assert_eq!(
        pre[1].action,
        HookAction::Url("https://hooks.example/pre".into())
    );
    assert_eq!(pre[1].timeout_secs, DEFAULT_HOOK_TIMEOUT_SECS);
    // the matcher applies: read_file gets only the hook without one
    assert_eq!(m.hooks.at(HookEvent::PreToolUse, &["read_file"]).len(), 1);
    assert_eq!(m.hooks.at(HookEvent::Stop, &[]).len(), 1);
    assert!(m.hooks.at(HookEvent::SessionStart, &[]).is_empty());
    assert!(parses("[agent]\nname = \"a\"\n").hooks.is_empty());
}

#[test]
fn bad_hooks_are_named() {
    let cases = [
        (
            "[agent]\nname = \"a\"\n[[hooks.PreToolUs]]\ncommand = \"x\"\n",
            "hooks.PreToolUs: unknown key; did you mean PreToolUse?",
        ),
        (
            "[agent]\nname = \"a\"\n[[hooks.Stop]]\n",
            "hooks.Stop[1]: a hook needs command or url",
        ),
        (
            "[agent]\nname = \"a\"\n[[hooks.Stop]]\ncommand = \"x\"\nurl = \"https://h\"\n",
            "exactly one of command and url",
        ),
        (
            "[agent]\nname = \"a\"\n[[hooks.Stop]]\nurl = \"ftp://h\"\n",
            "hooks.Stop[1].url: \"ftp://h\" is not an http:// or https:// URL",
        ),
        (
            "[agent]\nname = \"a\"\n[[hooks.Stop]]\ncommand = \"x\"\nmatcher = \"bash\"\n",
            "hooks.Stop[1].matcher: Stop hooks do not match tools",
        ),
        (
            "[agent]\nname = \"a\"\n[[hooks.PreToolUse]]\ncommand = \"x\"\ntimeout_secs = 0\n",
            "hooks.PreToolUse[1].timeout_secs: expected a whole number of seconds from 1 to 3600",
        ),
        (
            "[agent]\nname = \"a\"\n[[hooks.PreToolUse]]\ncommand = \"x\"\ntimout_secs = 3\n",
            "hooks.PreToolUse[1].timout_secs: unknown key; did you mean timeout_secs?",
        ),
        (
            "[agent]\nname = \"a\"\n[hooks]\nStop = \"x\"\n",
            "hooks.Stop: expected an array of hook tables",
        ),
    ];
    for (text, want) in cases {
        fails(text, want);
    }
}
