//! # loom-sandbox
//!
//! Turns the bash grant row the kernel picked into a [`Profile`] (plain data: readable roots, writable roots,
//! protected subpaths, network on/off, env allowlist, limits) and applies it with the strongest backend the host has:
//!
//! - **Tier A**: bubblewrap builds the view (system directories read-only, private tmpfs over `/tmp`, `/run` and
//!   home, grant roots bound back by descriptor, fresh `/dev` and `/proc`, new user/pid/ipc/uts namespaces,
//!   `--unshare-net` unless the network is granted), then an inner stage (the small `loom-sandbox-exec` binary,
//!   installed next to `loom`) applies Landlock and seccomp and execs.
//! - **Tier B**: Landlock + seccomp alone (no user namespaces), prepared before the child is cloned (`CLONE_VM |
//!   CLONE_VFORK`) and applied between clone and exec with raw system calls, so no second executable runs; refuses
//!   what Landlock cannot express.
//! - **Tier C**: bubblewrap + seccomp (no Landlock), through the same inner stage.
//!
//! A protected path that does not exist cannot be bound read-only; the profile lists those ([`Profile::absent`]) and,
//! once a confined command has ended, [`spawn_sandboxed_io`] moves aside whatever it created there
//! ([`sweep_created`]) and reports it in [`Outcome::swept`]. Given a directory for them ([`Launch::sweep_records`]),
//! it first writes down what that sweep will look at ([`record_sweep`]), so when loom dies before the command ends
//! the next loom sweeps for it ([`sweep_earlier`]).
//!
//! The same Landlock and seccomp code confines the local model engine, which confines itself before it loads a model
//! ([`confine_engine`]: it can read the model file and nothing else, and has no socket, exec or signal).
//!
//! Decide, then do: `build_*` functions are pure and return data (the profile, the bwrap argv, the Landlock rules,
//! the seccomp rules); `apply_*` / `spawn_*` do the effects.
//!
//! ## What this crate must never do
//! Run a command unconfined because a backend is missing, or widen a profile to make a command work. Only the grant
//! `"*"` runs unconfined ([`spawn_unconfined`]), and a Landlock ruleset that the kernel does not enforce is a refusal.
//!
//! ## Example
//! ```
//! use loom_kernel::{Grant, PathCtx};
//! use loom_kernel::{decide, AlgebraKind, Request};
//! use loom_sandbox::{build_profile, Limits, Place, HostFs};
//!
//! let t: toml::Table = toml::from_str(r#"g = { commands = ["ls"], read_paths = ["/usr"] }"#).unwrap();
//! let grant = Grant::from_toml(&t["g"]).unwrap();
//! let ctx = PathCtx::new("/", None);
//! let request = Request::BashArgv { argv: vec!["ls".into()], cwd: "/usr".into() };
//! // the kernel picks the row; the sandbox only turns it into a profile
//! let Some((_, row)) = decide("bash", AlgebraKind::Bash, &ctx, &grant, &request).into_row() else { unreachable!() };
//! let place = Place { cwd: "/usr".into(), home: None, ..Place::default() };
//! let profile = build_profile(&row, &ctx, &place, Limits::default(), &HostFs).unwrap();
//! assert_eq!(profile.readable, vec![std::path::PathBuf::from("/usr")]);
//! assert!(!profile.network);
//! ```
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod bwrap;
mod cancel;
mod clone_exec;
mod confine;
mod coverage;
mod engine_confine;
mod env;
mod error;
mod facts;
mod group;
mod guard;
mod inner;
mod landlock;
mod locate;
mod probe;
mod profile;
mod roots;
mod sbpl;
mod seccomp;
mod select;
mod session_guard;
mod spawn;
mod split;
mod stage;
mod sweep;
mod sweep_record;
mod table;
#[cfg(test)]
mod test_procs;
mod trial;

pub use bwrap::{
    build_bwrap_args, BwrapError, BwrapFeatures, PathFds, StageFds, INNER_EXE_IN_VIEW,
};
pub use cancel::kill_tree_on_signals;
pub use coverage::{
    tier_b_refusal, tier_b_rights, tier_b_status, view_status, By, Right, RightStatus,
    SandboxStatus,
};
pub use engine_confine::{
    check_engine_confinement, confine_engine, EngineConfineError, EngineConfinement, EngineProbe,
};
pub use env::{build_env, unconfined_env, EnvPolicy, SecretFacts};
pub use error::{SpawnError, TrialError};
pub use facts::HostFs;
pub use group::{
    exit_code, kill_group, spawn_tied, wait_within, GroupSlot, KillOnDrop, ProcessGroup,
};
pub use inner::{inner_main, InnerSpec, INNER_ARG, SETUP_FAILED};
pub use landlock::{
    access_for, build_landlock_rules, prepare_landlock, AccessClass, Enforcement, LandlockError,
    LandlockRule, PreparedLandlock, View, TARGET_ABI,
};
pub use locate::{
    inner_exe_next_to_current_exe, loom_install_dir, roots_covering, InnerExeError, INNER_EXE_NAME,
};
pub use probe::{
    host_support, probe_bwrap_works, probe_host, tier_status, BackendError, BwrapProbeError,
    HostSupport, Tier, Userns,
};
pub use profile::{
    build_profile, private_dirs, AuthorityPaths, Entry, Facts, Limits, Place, Profile,
    ProfileError, SystemDir, GIT_AUTORUN, PROTECTED_NAMES, SYSTEM_DIRS,
};
pub use roots::open_roots;
pub use sbpl::build_sbpl;
pub use seccomp::{
    apply_seccomp, build_abi_guard, build_engine_rules, build_seccomp_programs,
    build_seccomp_rules, ArgCheck, ArgOp, ArgWidth, DenyRule, SeccompError, SeccompPolicy,
    METADATA_SYSCALLS, NEWEST_ALLOWED_SYSCALL,
};
pub use select::{parse_grant, GrantTextError};
pub use spawn::{
    spawn_sandboxed, spawn_sandboxed_io, spawn_unconfined, Launch, Outcome, Stream, Streams,
};
pub use sweep::{sweep_created, swept_note, Swept, Watched, MOVED_SUFFIX};
pub use sweep_record::{
    created_while_running, make_record_dir, record_sweep, sweep_earlier, SweepRecord,
};
pub use table::{enforcement_rows, enforcement_table, TABLE_BEGIN, TABLE_END};
pub use trial::{
    choose_by_trial, chosen_tier, requested_tier, trial_profile, tried, try_tier, DISABLE_VAR,
    TIER_VAR,
};
