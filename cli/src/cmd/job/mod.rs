//! `loom job`: fleets on the engines people already run — a GitHub Actions matrix or a Kubernetes Indexed Job — with
//! no scheduler, queue or controller of loom's own. `plan` writes the engine's job from an items file, `run` is one
//! cell, `collect` merges the cells' results.

pub mod collect;
pub mod items;
pub mod plan;
pub mod run;

use crate::exit;
use crate::output::{emit, fail};

/// Arguments of `loom job`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Write the engine's job for an items file: a GitHub Actions matrix or a Kubernetes Indexed Job (stdout).
    Plan(PlanArgs),
    /// Run one cell: preflight, the ceiling gate, the turn, result.json (per item, under --out).
    #[command(
        after_help = "Exit codes: 0 ok; 1 failed (manifest, boot, turn; a directory of another run); 2 usage error \
                      (an index out of range); 3 the ceiling grew against --baseline (the turn did not run); 69 \
                      --require-tier found its tier unusable here; 75 a transient provider error outlasted the \
                      retries (retry the index later); 130 cancelled (SIGTERM, e.g. activeDeadlineSeconds), the \
                      session flushed. With --count, the first cell's code that was not 0."
    )]
    Run(run::Args),
    /// Merge the cells' results (text, JSON or SARIF); exit 1 when any cell failed, did not finish or is missing.
    Collect(collect::Args),
}

/// What `loom job plan` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Emit {
    /// A GitHub Actions matrix (JSON, for `fromJSON`): one cell per item, consecutive items per cell past --max-cells.
    GhaMatrix,
    /// A ConfigMap of the items and an Indexed Job (YAML), for `kubectl apply -f`.
    K8sIndexedJob,
}

/// Arguments of `loom job plan`.
#[derive(Debug, clap::Args)]
struct PlanArgs {
    /// The items file (JSON Lines: {"id": "...", "prompt": "..."} per line).
    #[arg(value_name = "ITEMS")]
    items: std::path::PathBuf,
    /// What to write.
    #[arg(long, value_enum)]
    emit: Emit,
    /// gha-matrix: the most cells (GitHub runs at most 256 jobs from one matrix).
    #[arg(long, value_name = "N", default_value_t = plan::GHA_MAX_CELLS as u64,
          value_parser = clap::value_parser!(u64).range(1..=plan::GHA_MAX_CELLS as u64))]
    max_cells: u64,
    /// k8s: the Job's name (a DNS label; the ConfigMap is NAME-items).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// k8s: the container image with loom and the agent (see the Dockerfile).
    #[arg(long, value_name = "IMAGE")]
    image: Option<String>,
    /// k8s: the manifest's path inside the image.
    #[arg(long, value_name = "PATH", default_value = "/opt/agent/agent.toml")]
    manifest: String,
    /// k8s: the baseline manifest inside the image: each cell runs the ceiling gate against it first (exit 3 fails
    /// the index, never retried).
    #[arg(long, value_name = "PATH")]
    baseline: Option<String>,
    /// k8s: a Secret object whose keys become files of LOOM_SECRETS_DIR (repeat for several).
    #[arg(long = "secret", value_name = "SECRET")]
    secrets: Vec<String>,
    /// k8s: pods running at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    parallelism: usize,
    /// k8s: retries of one index (backoffLimitPerIndex) after a transient failure (75), a cancellation or a lost pod.
    #[arg(long, value_name = "N", default_value_t = 2)]
    retries: usize,
    /// k8s: the whole Job's deadline in seconds (activeDeadlineSeconds; the turns then end cancelled, flushed).
    #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
    deadline: u64,
    /// k8s: a PersistentVolumeClaim for the results (default: an emptyDir, gone with the pod).
    #[arg(long, value_name = "CLAIM")]
    results_claim: Option<String>,
    /// k8s: each cell requires this sandbox tier (exit 69 fails the index on a node without it).
    #[arg(long, value_name = "TIER", value_parser = ["a", "b", "c"])]
    require_tier: Option<String>,
}

/// Runs `loom job`.
pub fn run(args: Args) -> i32 {
    match args.command {
        Command::Plan(a) => plan(a),
        Command::Run(a) => run::run(a),
        Command::Collect(a) => collect::run(a),
    }
}

fn plan(a: PlanArgs) -> i32 {
    let items = match items::read(&a.items) {
        Ok(i) => i,
        Err(e) => return fail(exit::FAILED, &e),
    };
    let text = match a.emit {
        Emit::GhaMatrix => {
            let mut s = serde_json::to_string(&plan::gha_matrix(
                &items,
                usize::try_from(a.max_cells).unwrap_or(plan::GHA_MAX_CELLS),
            ))
            .unwrap_or_default();
            s.push('\n');
            s
        }
        Emit::K8sIndexedJob => {
            let (Some(name), Some(image)) = (a.name, a.image) else {
                return fail(
                    exit::USAGE,
                    "--emit k8s-indexed-job needs --name NAME and --image IMAGE",
                );
            };
            if let Err(e) = plan::check_name(&name) {
                return fail(exit::USAGE, &e);
            }
            if a.parallelism == 0 {
                return fail(
                    exit::USAGE,
                    "--parallelism 0 would run nothing; pass 1 or more",
                );
            }
            let k = plan::K8s {
                name,
                image,
                manifest: a.manifest,
                baseline: a.baseline,
                secrets: a.secrets,
                parallelism: a.parallelism,
                retries: a.retries,
                deadline: a.deadline,
                results_claim: a.results_claim,
                require_tier: a.require_tier,
            };
            match plan::k8s_indexed_job(&items, &k) {
                Ok(docs) => crate::yaml::stream(&docs),
                Err(e) => return fail(exit::FAILED, &format!("{}: {e}", a.items.display())),
            }
        }
    };
    emit(&text);
    exit::OK
}
