//! What `run`, `prompt` and `acp serve` share about where the agent runs: `--run-id` (the run whose state this
//! process keeps apart) and `--tier` / `--require-tier` (the sandbox tier confined commands use).

/// Arguments that scope an agent's state to one run.
#[derive(Debug, Clone, clap::Args)]
pub struct RunScope {
    /// Keep this run's state (session log, remembered answers, MCP server state) apart from other runs of the same
    /// agent, under <storage>/runs/ID. Default: LOOM_RUN_ID, else the engine's job ids (GITHUB_RUN_ID with
    /// GITHUB_RUN_ATTEMPT, JOB_COMPLETION_INDEX) when set, else one state per agent.
    #[arg(long, value_name = "ID", value_parser = run_id)]
    run_id: Option<String>,
    /// Confine commands with this sandbox tier (a, b or c; same as LOOM_SANDBOX_TIER) instead of the first whose
    /// trial run passes on this host; when its trial fails, confined commands are refused (no fallback).
    #[arg(long, value_name = "TIER", value_parser = tier)]
    tier: Option<loom_sandbox::Tier>,
    /// Like --tier, and check it before anything else: when the tier's trial run fails, exit 69 (EX_UNAVAILABLE).
    #[arg(long, value_name = "TIER", value_parser = tier, conflicts_with = "tier")]
    require_tier: Option<loom_sandbox::Tier>,
}

impl RunScope {
    /// Makes the run id the process's: the runtime reads `LOOM_RUN_ID` wherever it computes storage. Called on the
    /// main thread before any runtime starts.
    pub fn apply(&self) {
        if let Some(id) = &self.run_id {
            std::env::set_var("LOOM_RUN_ID", id);
        }
        if let Some(t) = self.tier.or(self.require_tier) {
            std::env::set_var(loom_sandbox::TIER_VAR, t.name().to_ascii_lowercase());
        }
    }

    /// `--require-tier`: the tier's trial, before anything else; the exit code when it fails (after saying why).
    pub fn preflight(&self) -> Result<(), i32> {
        match self.required_tier_problem() {
            None => Ok(()),
            Some(why) => Err(crate::output::fail(crate::exit::UNAVAILABLE, &why)),
        }
    }

    /// Why the `--require-tier` tier is unusable here (its trial failed), or `None` (usable, or none required).
    pub fn required_tier_problem(&self) -> Option<String> {
        let t = self.require_tier?;
        loom_sandbox::chosen_tier(Some(t), None)
            .err()
            .map(|e| format!("--require-tier: {e}"))
    }
}

fn tier(s: &str) -> Result<loom_sandbox::Tier, String> {
    loom_sandbox::Tier::parse(s).ok_or_else(|| "expected a, b or c (see `loom doctor`)".to_string())
}

/// A run id is a safe identifier: it becomes one directory name.
fn run_id(s: &str) -> Result<String, String> {
    if loom_kernel::is_safe_id(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "a run id is 1 to {} characters from A-Z a-z 0-9 . _ -, starting with a letter or a digit (it becomes a \
             directory of the agent's storage)",
            loom_kernel::MAX_ID_LEN
        ))
    }
}
