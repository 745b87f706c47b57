//! `--run-id`: the run whose state this process keeps apart, shared by `run`, `prompt` and `acp serve`.

/// Arguments that scope an agent's state to one run.
#[derive(Debug, Clone, clap::Args)]
pub struct RunScope {
    /// Keep this run's state (session log, remembered answers, MCP server state) apart from other runs of the same
    /// agent, under <storage>/runs/ID. Default: LOOM_RUN_ID, else the engine's job ids (GITHUB_RUN_ID with
    /// GITHUB_RUN_ATTEMPT, JOB_COMPLETION_INDEX) when set, else one state per agent.
    #[arg(long, value_name = "ID", value_parser = run_id)]
    run_id: Option<String>,
}

impl RunScope {
    /// Makes the run id the process's: the runtime reads `LOOM_RUN_ID` wherever it computes storage. Called on the
    /// main thread before any runtime starts.
    pub fn apply(&self) {
        if let Some(id) = &self.run_id {
            std::env::set_var("LOOM_RUN_ID", id);
        }
    }
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
