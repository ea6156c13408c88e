//! Command-line definitions: the contract in the design notes (§5).

use std::path::PathBuf;

use crate::act::Action;
use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "tessera", version, about = "A terminal operations console for GPU clusters", long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, Default, Args)]
pub struct Global {
    /// Run the simulated cluster (the default when no source is configured).
    #[arg(long, global = true)]
    pub demo: bool,
    /// Config file (default: $XDG_CONFIG_HOME/tessera/config.toml).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Refuse every action and hide the action keys.
    #[arg(long, global = true)]
    pub read_only: bool,
    /// Theme name (default, light, high-contrast, colorblind, mono) or a theme file.
    #[arg(long, global = true, value_name = "NAME|PATH")]
    pub theme: Option<String>,
    /// How often to poll sources, e.g. 1s, 500ms.
    #[arg(long, global = true, value_name = "DURATION")]
    pub refresh: Option<String>,
    /// Read local GPUs through NVML, optionally from this library.
    #[arg(long, global = true, value_name = "LIBPATH", num_args = 0..=1, require_equals = true)]
    pub nvml: Option<Option<String>>,
    /// A Prometheus server that scrapes dcgm-exporter.
    #[arg(long, global = true, value_name = "URL")]
    pub prometheus: Option<String>,
    /// A dcgm-exporter endpoint to scrape (repeatable).
    #[arg(long, global = true, value_name = "URL")]
    pub scrape: Vec<String>,
    /// Read the Slurm queue and nodes on this host.
    #[arg(long, global = true)]
    pub slurm: bool,
    /// Read Kubernetes, optionally from this kubeconfig context.
    #[arg(long, global = true, value_name = "CONTEXT", num_args = 0..=1, require_equals = true)]
    pub kubernetes: Option<Option<String>>,
    /// Seed of the simulated cluster.
    #[arg(long, global = true)]
    pub seed: Option<u64>,
    /// Simulated seconds per real second.
    #[arg(long, global = true)]
    pub speed: Option<f64>,
    /// Scale the simulated cluster: NODESxGPUS, e.g. 512x8.
    #[arg(long, global = true, value_name = "NODESxGPUS")]
    pub demo_size: Option<String>,
    /// Draw with ASCII only (no box or block glyphs).
    #[arg(long, global = true)]
    pub ascii: bool,
    /// The console records what it shows to this file while you watch (see `tessera record`).
    #[arg(long, global = true, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// A past moment: from a recording (`snapshot --at TIME FILE`) or rebuilt from Prometheus
    /// history (`--prometheus URL --at TIME`), e.g. 2026-11-30T03:12:00Z, 03:12, -2h.
    #[arg(long, global = true, value_name = "TIME", allow_hyphen_values = true)]
    pub at: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Collect once from every source, print, exit.
    Snapshot {
        /// Print JSON (the documented contract) instead of a table.
        #[arg(long)]
        json: bool,
        /// A recording (or its parts) to read the moment `--at` from, instead of the sources.
        #[arg(value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Record the merged fleet and every audited action, headless, for replay (docs/recording.md).
    Record {
        /// Where to write (default: tessera-YYYYMMDDTHHMMSSZ.tsrec here); never overwritten.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// How often a frame is taken, e.g. 1s (the default), 10s.
        #[arg(long, value_name = "DURATION")]
        every: Option<String>,
        /// Stop after this long (wall clock); default: until SIGTERM or Ctrl-C.
        #[arg(long = "for", value_name = "DURATION")]
        run_for: Option<String>,
        /// Start a new part past this size, e.g. 512MiB, 2GiB.
        #[arg(long, value_name = "SIZE")]
        rotate_size: Option<String>,
        /// Start a new part when this one spans this long, e.g. 24h.
        #[arg(long, value_name = "DURATION")]
        rotate_every: Option<String>,
        /// Keep at most this many parts, removing the oldest.
        #[arg(long, value_name = "N")]
        keep: Option<u32>,
    },
    /// The console on a recording (every view, read-only), or on Prometheus history with
    /// `--prometheus URL --from TIME --to TIME`.
    Replay {
        /// The recording, or its rotated parts in any order.
        #[arg(value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Start here (default: the beginning; with --prometheus, required).
        #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
        from: Option<String>,
        /// With --prometheus: the end (default: now).
        #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
        to: Option<String>,
        /// With --prometheus: the time between rebuilt moments (default: 60s).
        #[arg(long, value_name = "DURATION")]
        step: Option<String>,
    },
    /// What-if capacity planning: replay a demand on a fleet under each sharing policy
    /// (exclusive, mig, share, schedule, adaptive, dynamic) and say how many GPUs each needs
    /// (docs/simulate.md). With no demand given, the simulated cluster's day of arrivals.
    Simulate(Box<SimulateArgs>),
    /// The capacity advisor: waste, what it costs, what to do.
    Advise {
        /// Print JSON (docs/json.md) instead of a list.
        #[arg(long)]
        json: bool,
        /// Exit 4 when a finding of this severity or higher exists.
        #[arg(long, value_enum)]
        fail_on: Option<FailOn>,
    },
    /// Every valid (maximal) MIG layout for a GPU model.
    Layouts {
        /// A GPU model as NVML, DCGM, Kubernetes or Slurm name it, e.g. "NVIDIA H100 80GB HBM3".
        model: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// MIG schedules ([[schedule]] in the config): the next 24 h of changes per card, or an export.
    Schedule {
        /// Print JSON instead of the timeline.
        #[arg(long)]
        json: bool,
        #[command(subcommand)]
        what: Option<ScheduleCommand>,
    },
    /// Validate a config file (default: the one tessera would load).
    CheckConfig {
        /// The config file (default: --config, else the one tessera would load).
        path: Option<PathBuf>,
        /// Print the commented example config instead.
        #[arg(long)]
        example: bool,
    },
    /// The read-only device check's steps (scripts/device-check.sh runs them all): what NVML
    /// answers and how fast, tessera against nvidia-smi, a scenario for the fake library.
    DeviceCheck {
        #[command(subcommand)]
        what: DeviceCommand,
    },
    /// The actions: drain, undrain, repartition, preempt (each planned, guarded, confirmed).
    #[command(flatten)]
    Act(ActCommand),
}

/// What `tessera schedule` does besides printing the timeline.
#[derive(Debug, Clone, Subcommand)]
pub enum ScheduleCommand {
    /// Write the schedules as a mig-parted config, with the GPU Operator steps of each change.
    Export {
        /// The format written: a mig-parted config (the GPU Operator's), with each change's steps.
        #[arg(long, value_enum, default_value = "mig-parted")]
        format: ExportFormat,
    },
    /// Run the schedules marked `unattended = true` headless: drain `lead` ahead, change idle
    /// cards at their window, skip and report busy ones; never preempts (for systemd).
    Run {
        /// Stop after this long (wall clock), e.g. 30s; default: until SIGTERM or Ctrl-C.
        #[arg(long = "for", value_name = "DURATION")]
        run_for: Option<String>,
        /// Act even on a target whose earlier action has no outcome in the audit log (it was
        /// left half-done); without it such actions are refused and said.
        #[arg(long)]
        despite_open_intent: bool,
    },
    /// Suggest a day/night schedule from the demand measured by hour (kept by the console and
    /// `schedule run`; the simulated cluster replays its previous day).
    Suggest {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Apply a schedule's change that is due now to its idle cards (one confirmation for the
    /// group); cards with work are listed and left for later.
    Apply {
        /// The schedule's name (`[[schedule]] name = ...`).
        name: String,
        #[command(flatten)]
        how: ActOptions,
    },
}

/// The steps of `tessera device-check`; none changes a GPU.
#[derive(Debug, Clone, Subcommand)]
pub enum DeviceCommand {
    /// Open NVML (`--nvml[=LIB]`), collect once and then N times more; print the timings and
    /// what each NVML call answered (ok, not supported, no permission, other), as JSON.
    Probe {
        /// Collections after the first, 200 ms apart (at most 3000: ten minutes).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=3000))]
        refreshes: u32,
    },
    /// Compare `snapshot --json` with `nvidia-smi -q -x`, card by card; exit 1 when a field
    /// differs beyond its tolerance (docs/sources.md).
    Compare {
        /// A `tessera snapshot --json` file.
        snapshot: PathBuf,
        /// `nvidia-smi -q -x` files: reads before and after the snapshot; a reading that moves
        /// agrees when it is within tolerance of any of them.
        #[arg(required = true, num_args = 1..)]
        smi_xml: Vec<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print a scenario for the fake NVML library from `snapshot --json` (and a probe's output),
    /// with UUIDs replaced by stand-ins.
    Scenario {
        /// A `tessera snapshot --json` file.
        snapshot: PathBuf,
        /// A `tessera device-check probe` file: calls that failed there fail in the fake too.
        #[arg(long, value_name = "FILE")]
        probe: Option<PathBuf>,
    },
}

/// Export formats of `tessera schedule export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    MigParted,
}

/// How an action command runs.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct ActOptions {
    /// Print the plan and stop.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
    /// With --yes: act even though an earlier action on the target has no outcome in the
    /// audit log (it was left half-done); without it that is refused (exit 3).
    #[arg(long)]
    pub despite_open_intent: bool,
}

/// The severity `advise --fail-on` exits 4 at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    High,
    Warn,
}

impl FailOn {
    pub fn severity(self) -> crate::advisor::Severity {
        match self {
            Self::High => crate::advisor::Severity::High,
            Self::Warn => crate::advisor::Severity::Warn,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every argument of every subcommand says what it is in `--help` (`<TARGET>` and
    /// `--json` were bare).
    #[test]
    fn every_argument_is_described() {
        fn walk(c: &clap::Command, path: &str, bare: &mut Vec<String>) {
            for a in c.get_arguments() {
                if a.get_help().is_none() && !matches!(a.get_id().as_str(), "help" | "version") {
                    bare.push(format!("{path} {}", a.get_id()));
                }
            }
            for s in c.get_subcommands() {
                walk(s, &format!("{path} {}", s.get_name()), bare);
            }
        }
        let mut bare = Vec::new();
        walk(&super::Cli::command(), "tessera", &mut bare);
        assert!(bare.is_empty(), "arguments without help: {bare:?}");
    }

    /// The command as parsed (subcommands' hidden copies of global flags) is one clap accepts.
    #[test]
    fn the_parsed_command_is_consistent() {
        super::command().debug_assert();
    }
}

/// `tessera simulate`'s flags.
#[derive(Debug, Clone, Default, Args)]
pub struct SimulateArgs {
    /// With --demo (the default demand): how many days or hours of arrivals, e.g. 7d (default 24h).
    #[arg(long = "for", value_name = "DURATION")]
    pub span: Option<String>,
    /// A tessera recording (or its parts): the workloads it saw, and its fleet.
    #[arg(long, value_name = "FILE")]
    pub recording: Vec<PathBuf>,
    /// An Alibaba GPU trace v2023 pod list (openb_pod_list_*.csv).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// The trace's node list (openb_node_list_gpu_node.csv): the fleet unless --fleet.
    #[arg(long, value_name = "FILE")]
    pub nodes: Option<PathBuf>,
    /// A demand CSV in tessera's own format (docs/simulate.md; scripts/sacct-to-demand makes one).
    #[arg(long, value_name = "FILE")]
    pub demand: Option<PathBuf>,
    /// The fleet: GPUs per model, e.g. 64xA100-80GB,16xL4 (eight to a node).
    #[arg(long, value_name = "COUNTxMODEL,...")]
    pub fleet: Option<String>,
    /// The same nodes and GPU counts on another model, e.g. H100-80GB.
    #[arg(long, value_name = "MODEL")]
    pub as_model: Option<String>,
    /// Lay every card of a model out so under mig and adaptive, e.g. A100-80GB=3g.40gb,3g.40gb (repeatable).
    #[arg(long, value_name = "MODEL=LAYOUT")]
    pub layout: Vec<String>,
    /// The policies to compare, comma-separated (default: all six).
    #[arg(long, value_name = "POLICY,...", value_delimiter = ',')]
    pub policy: Vec<String>,
    /// Where jobs go among the places they fit: first-fit, best-fit (default; dynamic's is
    /// first-fit, as the Kubernetes scheduler's, unless this is given), frag-aware; packing
    /// also fgd, paper-bestfit, paper-dotprod (the paper's).
    #[arg(long, value_name = "PLACEMENT")]
    pub placement: Option<String>,
    /// Replicas per card under share, where the fleet does not say (replay default 4; a
    /// packing caps holders only when this is given).
    #[arg(long, value_name = "N")]
    pub replicas: Option<u32>,
    /// Packing instead of replay (the paper's experiment): every pod, shuffled per run,
    /// inflated by draws until the GPUs asked reach this share of the fleet, e.g. 130%.
    #[arg(long, value_name = "PERCENT")]
    pub pack: Option<String>,
    /// Packing: how many runs (seeds --seed, --seed+1, ...; default 10), reported as the
    /// median and the min–max.
    #[arg(long, value_name = "N")]
    pub runs: Option<u32>,
    /// Packing: the arrived levels to report, in percent (default every 5 %), e.g. 90,95,100.
    #[arg(long, value_name = "PERCENT,...", value_delimiter = ',')]
    pub levels: Vec<String>,
    /// Packing: the pods' order: shuffled per run (the paper's, default) or trace.
    #[arg(long, value_name = "ORDER")]
    pub order: Option<String>,
    /// Also search the fewest GPUs with which each policy keeps the p90 wait at or under this, e.g. 10m.
    #[arg(long, value_name = "DURATION")]
    pub target_p90_wait: Option<String>,
    /// Stop the replay this long after the first arrival; work still waiting never started.
    #[arg(long, value_name = "DURATION")]
    pub horizon: Option<String>,
    /// Bring arrivals this many times closer together (a long trace on a busier clock).
    #[arg(long, value_name = "FACTOR")]
    pub compress: Option<f64>,
    /// Print JSON (docs/json.md) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Draw allocation and queue over time (or packing's curves) to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Count and skip malformed input lines instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
}

/// The global flags that name where the fleet comes from: a command that collects it once
/// (`simulate`'s live fleet, `schedule export`'s nodes) reads these and no others.
const SOURCE_FLAGS: &[&str] =
    &["demo", "config", "nvml", "prometheus", "scrape", "slurm", "kubernetes", "seed", "demo_size"];

/// The command line, with each subcommand's help listing only the global flags it reads:
/// `layouts` reads none, `check-config` its file, `device-check` the NVML library, `simulate`
/// and `schedule export` the sources (`layouts --help` listed every flag, `--theme` and
/// `--record` among them); no subcommand lists the console's `--record`, and only `snapshot`
/// and `replay` list `--at`. Their copies of the other global flags are hidden: given, they
/// are still parsed (a bad value is still refused) and read by nobody.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let globals: Vec<clap::Arg> = cmd.get_arguments().filter(|a| a.is_global_set()).cloned().collect();
    let hidden = |keep: &dyn Fn(&str) -> bool| -> Vec<clap::Arg> {
        globals.iter().filter(|a| !keep(a.get_id().as_str())).map(|a| a.clone().global(false).hide(true)).collect()
    };
    let names: Vec<String> = cmd.get_subcommands().map(|c| c.get_name().to_string()).collect();
    let mut cmd = cmd;
    for name in names {
        let args = match name.as_str() {
            "layouts" => hidden(&|_| false),
            "check-config" => hidden(&|id| id == "config"),
            "device-check" => hidden(&|id| id == "nvml"),
            "simulate" => hidden(&|id| SOURCE_FLAGS.contains(&id)),
            // The console's flag; `--at` is the console's, `snapshot`'s and `replay`'s.
            "snapshot" | "replay" => hidden(&|id| id != "record"),
            _ => hidden(&|id| id != "record" && id != "at"),
        };
        cmd = cmd.mut_subcommand(name, |sc| sc.args(args));
    }
    let args = hidden(&|id| SOURCE_FLAGS.contains(&id));
    cmd.mut_subcommand("schedule", |sc| sc.mut_subcommand("export", |e| e.args(args)))
}

/// The action subcommands: each becomes an `Action` and how to confirm it.
#[derive(Debug, Subcommand)]
pub enum ActCommand {
    /// Stop new work on a card (NODE/INDEX or GPU UUID) or a node.
    Drain {
        /// A card (NODE/INDEX, e.g. gpu-a100-01/0, or its GPU UUID) or a node (NODE).
        target: String,
        #[command(flatten)]
        how: ActOptions,
        /// On a DRA card: also evict the pods holding it (DeviceTaintRules with effect
        /// NoExecute instead of NoSchedule); asks a second time.
        #[arg(long)]
        evict: bool,
    },
    /// Let a drained card or node take new work again.
    Undrain {
        /// A card (NODE/INDEX, e.g. gpu-a100-01/0, or its GPU UUID) or a node (NODE).
        target: String,
        #[command(flatten)]
        how: ActOptions,
        /// Undrain a card that is unhealthy (XID 48/79/94/95, uncorrectable ECC, lost); asks a
        /// second time.
        #[arg(long)]
        force: bool,
    },
    /// Replace a card's MIG layout, e.g. 3g.40gb@0,2g.20gb@4,1g.10gb@6, or `whole`.
    Repartition {
        /// A card: NODE/INDEX (e.g. gpu-h100-01/7) or its GPU UUID.
        target: String,
        /// The layout: profiles with placements (3g.40gb@0,2g.20gb@4), without (placed by
        /// search), or `whole` (MIG off).
        layout: String,
        #[command(flatten)]
        how: ActOptions,
    },
    /// Checkpoint a training workload and put it back in the queue (slurm:ID, k8s:NS/POD, sim:ID).
    Preempt {
        /// The workload: slurm:JOBID, k8s:NAMESPACE/POD, or sim:ID on the simulated cluster.
        workload: String,
        #[command(flatten)]
        how: ActOptions,
        /// Preempt training that has not run the minimum runtime (asks a second time).
        #[arg(long)]
        force: bool,
    },
}

impl ActCommand {
    /// The action asked for, and how to confirm it.
    pub fn into_action(self) -> (Action, ActOptions) {
        match self {
            Self::Drain { target, how, evict } => (Action::Drain { target, evict }, how),
            Self::Undrain { target, how, force } => (Action::Undrain { target, force }, how),
            Self::Repartition { target, layout, how } => (Action::Repartition { target, layout }, how),
            Self::Preempt { workload, how, force } => (Action::Preempt { workload, force }, how),
        }
    }
}
