//! # loom-kernel: the one choke point
//!
//! Everything in loom that grants or refuses authority is a pure function in this crate: the manifest grammar, the
//! grant lattice and each tool's algebra, the boot property check, effective ceilings, the judging of contributed
//! tool groups, sub-agent containment, and the decision for each tool call. The runtime gathers facts (canonical
//! paths, the command line, the working directory) and enforces the kernel's answer; `loom audit` renders the very
//! objects this crate returns, so what audit prints is what runs.
//!
//! ## Layout
//! Four folders: `lattice/` (grant values and rows, paths, each tool's algebra, the law check), `manifest/` (the
//! grammar of `agent.toml`), `policy/` (the per-call decision, permission rules, plan mode, the doom-loop guard,
//! hooks, secrets, authority files) and `contrib/` (ceilings, contributed groups and skills, sub-agents, providers,
//! tool contracts, MCP pre-binding, the CI gate). Everything public is re-exported here.
//!
//! ## What this crate must never do
//! No I/O, no environment reads, no clock, no threads, no `unsafe`. Callers pass text and facts (the manifest text,
//! an env map for `${VAR}`, the base and home directories) and get values back. Nothing here widens a grant on its
//! own: wildcards are always explicit.
//!
//! ## Example
//! ```
//! use loom_kernel::{AlgebraKind, Grant, PathCtx};
//!
//! let ceiling: toml::Table = toml::from_str(r#"bash = [
//!     { commands = "*", paths = ["./"] },
//!     { commands = ["gcalcli"], network = "*" },
//! ]"#).unwrap();
//! let ceiling = Grant::from_toml(&ceiling["bash"]).unwrap();
//! let request: toml::Table = toml::from_str(r#"bash = { commands = ["gcalcli"], network = "*" }"#).unwrap();
//! let request = Grant::from_toml(&request["bash"]).unwrap();
//!
//! let bash = AlgebraKind::for_builtin("bash").build(&PathCtx::new("/work", None));
//! assert!(bash.contains(&ceiling, &request));
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
#![warn(missing_docs)]

mod contrib;
mod lattice;
mod manifest;
mod policy;

pub use contrib::bootable::{
    boot_refusals, nearest_name, BootRefusal, BootSlot, HARNESS_PROVIDERS,
};
pub use contrib::ceiling::{
    ceiling_excess, default_ceiling, requested_grant, tool_grants, Ceiling, GrantSource, KeyExcess,
    ToolGrant,
};
pub use contrib::contracts::{builtin_contract, check_contract, Contract, BUILTIN_TOOLS};
pub use contrib::gate::{
    ceiling_growth, describe_rule, env_references, manifest_changes, Change, EnvRef, Growth,
};
pub use contrib::install::{
    frozen_drift, install_handle_problem, install_writable, is_shipped_key, lock_state,
    path_source_drift, Lock, LockEntry, LockError, LockState, WritableInstall, INSTALL_DIR,
    LOCK_FILE, LOCK_VERSION, SHIPPED_KEY_MARK,
};
pub use contrib::judge::{judge_group, DeclJudgement, DeclVerdict, GroupJudgement, Remedy};
pub use contrib::key_target::{key_target, target_change, KeyTarget};
pub use contrib::keys::{
    contribution_for, group_skill, key_fits, key_for, shipped_digest, Consent, KeyFor,
};
pub use contrib::mcp::{
    bind_schema, ArgBinding, ArgumentError, BindError, BoundTool, McpResolution,
};
pub use contrib::profile::{
    granted_profiles, judge_profile, parse_profile, profile_manifest, worktree_ctx, ModelChoice,
    Profile, ProfileVerdict, DEFAULT_MAX_TURN_REQUESTS, DELEGATING_TOOLS, EFFORT_PROVIDERS,
    MAX_PROFILE_TURNS, PROFILES_DIR,
};
pub use contrib::rules::{parse_rule, ProjectRule, RULES_DIR};
pub use contrib::server_tools::{server_tool_limits, ServerToolLimitError};
pub use contrib::shipped::{
    root_handle_problem, shipped_key, shipped_path_problem, ShippedSource, ShippedState,
};
pub use contrib::skill::{
    binding_problem, bound_grants, check_skill_name, compile_skill, group_clashes, parse_skill_md,
    rescan_keeps, RescanDrop, SkillDoc, SkillFacts, DEFAULT_SKILL_TOOLS, MAX_COMPATIBILITY,
    MAX_DESCRIPTION, MAX_NAME, READ_SKILL,
};
pub use contrib::subagent::{
    check_subagents, subagent_choices, Excess, ManifestLoader, SubagentChoice, SubagentVerdict,
    MAX_DEPTH,
};
pub use lattice::algebra::{
    equivalent, paths_value_contains, union_merge, value_contains, Algebra, AlgebraKind,
    BashAlgebra, DefaultAlgebra, FilesAlgebra, McpAlgebra, ServerToolAlgebra, COMMAND_TOOLS,
    ENV_TIER1, ENV_TIER2, FILE_TOOLS, FILE_WRITERS,
};
pub use lattice::grant::{Grant, GrantError, Kind, Row};
pub use lattice::laws::{
    check_laws, Law, LawCheck, LawReport, LawTally, LawViolation, Trial, DEFAULT_SEED,
    DEFAULT_TRIALS,
};
pub use lattice::path::{landing_warning, path_within, NormCache, PathCtx};
pub use lattice::rng::Rng;
pub use lattice::row_map::{RowIntoIter, RowIter, RowMap};
pub use lattice::value::{position, toml_key, toml_string, Float, Value, ValueError};
pub use manifest::{
    is_safe_id, manifest_from_table, parse_manifest, parse_sidecar_group, parse_tool_group,
    AcceptedGap, AgentSpec, HarnessSpec, LayerSpec, Manifest, ManifestError, ProviderRef,
    ProviderSpec, SandboxSection, SessionSpec, Shipped, Source, SubagentRef, SubagentSource,
    SupervisorSpec, SystemPrompt, ToolEntry, ToolGroup, DEFAULT_MAX_ROUNDS, DEFAULT_REVIEW_BUDGET,
    DEFAULT_TOOLS, MAX_ID_LEN, MAX_MANIFEST_BYTES, MAX_NESTING, META_FACTORIES,
};
pub use policy::authority::{
    authority_candidates, authority_denial, authority_exposure, command_words, dirs_to_make,
    guidance_candidates, planted_refuses_boot, protected_name_in, Authority, AuthorityFile,
    AuthorityKind, Exposure, GUIDANCE_FILES, PROJECT_STATE_DIR, PROTECTED_NAMES,
};
pub use policy::decide::{
    brokered_commands, caller_var_crosses, code_runners, command_dir_fits, decide, decide_brokered,
    is_general_row, plain_argv, rowed_commands, terminal_plan, Access, Authorization, BrokerDenial,
    Brokered, Decision, Denial, DenialKind, Exec, Request, TerminalFacts, TerminalPlan,
    BROKER_BASE_ENV, CODE_RUNNERS,
};
pub use policy::doom::{DoomGuard, DOOM_LOOP_THRESHOLD};
pub use policy::hooks::{
    combine_hooks, interpret_hook, matcher_matches, HookAction, HookEvent, HookExit, HookRun,
    HookSpec, HookVerdict, Hooks, DEFAULT_HOOK_TIMEOUT_SECS,
};
pub use policy::inherit::{inherit_policy, inherited_counts};
pub use policy::inspection::{git_inspection_row, git_worktree_row};
pub use policy::narrow::{narrow, Narrowed, Narrowing};
pub use policy::plan::{plan_mode_verdict, Effect};
pub use policy::rules::{
    combine, resolve_rule_prefixes, rule_prefixes, wildcard_match, Approval, CallFacts,
    Permissions, Rule, RuleKind, RulesVerdict, Subject, Verdict,
};
pub use policy::sandbox_row::{
    sandbox_grant_problems, sandbox_network, sandbox_row_refusal, RowRefusal, SANDBOX_KINDS,
};
pub use policy::secrets::{
    env_var_passes, grant_secrets, row_secrets, secret_env_names, EnvPolicy,
};
