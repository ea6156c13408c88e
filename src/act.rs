//! The actions' pure floor: what an operator can ask (`Action`, `Target`), who carries it out
//! (`Backend`, `Capabilities`), and the plan it becomes (`Plan`, `Step`, `Op`) with the guards
//! (`guard`) and each backend's step writer, made from the fleet alone. Below the advisor and
//! the schedules, which propose actions; `actions` runs the plans (the runner, the lock, the
//! audit, each backend's execution).

pub mod claims;
pub mod guard;
pub mod kubernetes;
pub mod nvml;
pub mod plan;
pub mod sim;
pub mod slurm;

use serde::Serialize;

use crate::config::Config;
use crate::model::mig::{LayoutSpec, parse_layout};
use crate::model::{Card, CardRef, ComputeMode, Fleet, Node, SourceKind, Workload};
use crate::sources::sim::SimOp;
use guard::Context;

/// What the operator asked for.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    Drain {
        target: String,
        /// Also evict what runs there: on a DRA card, DeviceTaintRules with effect
        /// `NoExecute` instead of `NoSchedule` (asks a second time).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        evict: bool,
    },
    Undrain {
        target: String,
        /// Undrain an unhealthy card or node anyway (asks a second time).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        force: bool,
    },
    Repartition {
        target: String,
        layout: String,
    },
    Preempt {
        workload: String,
        force: bool,
    },
}

impl Action {
    /// Forced past a guard that force may override (asks a second time).
    pub fn forced(&self) -> bool {
        matches!(self, Self::Preempt { force: true, .. } | Self::Undrain { force: true, .. })
    }

    pub fn verb(&self) -> &'static str {
        match self {
            Self::Drain { .. } => "drain",
            Self::Undrain { .. } => "undrain",
            Self::Repartition { .. } => "repartition",
            Self::Preempt { .. } => "preempt",
        }
    }

    /// What it acts on, as the operator wrote it: the card or node, or the workload's id for a
    /// preemption.
    pub fn target(&self) -> &str {
        match self {
            Self::Drain { target, .. } | Self::Undrain { target, .. } | Self::Repartition { target, .. } => target,
            Self::Preempt { workload, .. } => workload,
        }
    }

    /// What an action does, as "left at once while ..." says it. A gerund ("draining n/2") where
    /// `Display for Action` has the verb ("drain n/2"), so it keeps its own match.
    pub fn doing(&self) -> String {
        match self {
            Action::Drain { target, evict: false } => format!("draining {target}"),
            Action::Drain { target, evict: true } => format!("draining {target} and evicting its pods"),
            Action::Undrain { target, .. } => format!("undraining {target}"),
            Action::Repartition { target, layout } => format!("repartitioning {target} to {layout}"),
            Action::Preempt { workload, .. } => format!("preempting {workload}"),
        }
    }
}

/// The action in words: `drain n/2`, `repartition n/2 to LAYOUT`, `preempt sim:40`.
impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb(), self.target())?;
        match self {
            Self::Repartition { layout, .. } => write!(f, " to {layout}")?,
            Self::Drain { evict: true, .. } => f.write_str(" --evict")?,
            _ => {}
        }
        Ok(())
    }
}

/// Who carries an action out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    Simulated,
    Nvml,
    Slurm,
    Kubernetes,
}

impl Backend {
    /// Every backend, in the order planning prefers them on a node several sources report.
    pub const ALL: [Self; 4] = [Self::Simulated, Self::Nvml, Self::Slurm, Self::Kubernetes];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Simulated => "simulated",
            Self::Nvml => "nvml",
            Self::Slurm => "slurm",
            Self::Kubernetes => "kubernetes",
        }
    }

    /// The kind of source whose nodes it acts on.
    pub fn source_kind(self) -> SourceKind {
        match self {
            Self::Simulated => SourceKind::Simulated,
            Self::Nvml => SourceKind::Nvml,
            Self::Slurm => SourceKind::Slurm,
            Self::Kubernetes => SourceKind::Kubernetes,
        }
    }
}

/// What a backend can do. Each action is `Some` of the function that writes its steps into a
/// plan, or `None`, the default: it cannot. Planning offers an action only to a backend that
/// can do it; each backend's file implements what it supports, and `plan::capabilities` names
/// the implementation of each `Backend` (so this file imports none of them). Running the
/// steps is `actions::Runs`, beside the runner.
pub trait Capabilities: Sync {
    /// It acts on cards (NVML, the simulator), not on whole nodes (the schedulers).
    fn on_cards(&self) -> bool {
        false
    }

    /// It acts on this card itself (by default: when it acts on cards). Kubernetes acts on
    /// whole nodes, except on a DRA card, which it drains by DeviceTaintRules.
    fn on_card(&self, _card: &Card) -> bool {
        self.on_cards()
    }

    /// The prefix of the workload ids it preempts (`slurm` for `slurm:19`).
    fn workload_prefix(&self) -> Option<&'static str> {
        None
    }

    fn drain(&self) -> Option<Drain> {
        None
    }

    fn repartition(&self) -> Option<Repartition> {
        None
    }

    fn preempt(&self) -> Option<Preempt> {
        None
    }
}

/// Writes the steps that drain (`true`) or undrain the card, or the node where the card is `None`.
pub type Drain = fn(&mut Plan, &Node, Option<&Card>, bool, &Options) -> Result<(), NeedsCard>;

/// Writes the steps that repartition the card (or the node, where it is `None`) to a layout.
pub type Repartition = fn(&mut Plan, &Fleet, &Node, Option<&Card>, &str) -> Result<(), NeedsCard>;

/// Writes the steps that preempt a workload, given its id without the prefix.
pub type Preempt = fn(&mut Plan, &Workload, &str, &Options);

/// A backend that acts on one card was given a whole node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeedsCard;
/// One operation a backend performs; the plan shows each with its exact call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Op {
    Sim {
        op: SimOp,
    },
    /// Wait this long (simulated seconds for the simulator; real seconds otherwise).
    Wait {
        seconds: u64,
        why: String,
    },
    /// Run a program with arguments (never through a shell).
    Run {
        program: String,
        args: Vec<String>,
    },
    NvmlSetComputeMode {
        index: u32,
        mode: ComputeMode,
    },
    NvmlDestroyComputeInstance {
        index: u32,
        gi: u32,
        ci: u32,
    },
    NvmlDestroyGpuInstance {
        index: u32,
        gi: u32,
    },
    NvmlCreateGpuInstance {
        index: u32,
        profile: String,
        start: u8,
    },
    /// Read the card's instances back and compare with `layout` (profile@start list).
    NvmlVerifyLayout {
        index: u32,
        layout: Vec<(String, u8)>,
    },
    /// Merge-patch a node (cordon, labels).
    KubePatchNode {
        node: String,
        patch: serde_json::Value,
    },
    /// Create an Eviction for a pod (honours PodDisruptionBudgets).
    KubeEvict {
        namespace: String,
        pod: String,
    },
    /// Create a DeviceTaintRule (resource.k8s.io/v1beta2): `object` is the whole rule.
    KubeCreateTaintRule {
        name: String,
        object: serde_json::Value,
    },
    /// Delete a DeviceTaintRule tessera made (the executor checks its label first).
    KubeDeleteTaintRule {
        name: String,
    },
    /// Follow a node label until it has one of the wanted values.
    KubeWaitLabel {
        node: String,
        key: String,
        success: String,
        failure: String,
        timeout_s: u64,
    },
}

impl Op {
    /// The operation that takes this one back, for the operations a failed plan rolls back
    /// (a drain through DRA creates its rules all or none).
    pub fn undo(&self) -> Option<Step> {
        match self {
            Self::KubeCreateTaintRule { name, .. } => Some(step(
                format!("Delete DeviceTaintRule {name} (roll back)"),
                format!("DELETE {}/{name}", kubernetes::TAINT_RULES_PATH),
                Self::KubeDeleteTaintRule { name: name.clone() },
            )),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// What this step does, in words.
    pub what: String,
    /// The exact command or API call.
    pub call: String,
    #[serde(skip)]
    pub op: Op,
}

/// Everything the confirmation shows and the executor runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub action: Action,
    pub backend: Backend,
    /// The source whose data the plan was made from.
    pub source: String,
    /// What the action acts on, as the operator must type it to confirm a destructive one.
    pub target: String,
    /// One line: what will happen.
    pub summary: String,
    pub steps: Vec<Step>,
    pub warnings: Vec<String>,
    /// Reasons the action cannot run; a plan with blockers is never executed.
    pub blockers: Vec<guard::Refusal>,
    /// Asks the operator to type the target's name.
    pub destructive: bool,
    /// A second confirmation is needed (a forced preemption or undrain).
    pub second_confirmation: Option<String>,
    /// The target is already as asked (drain of a drained card, whole to whole): no steps.
    pub nothing_to_do: Option<String>,
    /// The card the action is on, where it is on one.
    #[serde(skip)]
    pub card: Option<CardRef>,
    /// A repartition that holds a busy card and waits for its work to end (offered when the
    /// card was taken while the operator confirmed; the simulated cluster only).
    #[serde(skip)]
    pub wait_idle: bool,
}

impl Plan {
    pub fn allowed(&self) -> bool {
        self.blockers.is_empty()
    }

    /// The one thing it acts on, as the lock and the audit log key it: the node, for every
    /// backend (the schedulers act on whole nodes, and an NVML change of one of its cards must
    /// not run beside a scheduler's drain of the node: `gpu-01`, `gpu-01/3`, its card's UUID
    /// and a preemption of a job there are one node's).
    pub fn subject(&self) -> String {
        match (self.backend, &self.card) {
            (_, Some(c)) => c.node.clone(),
            (_, None) => match Target::parse(&self.target) {
                Target::Card(r) => r.node,
                Target::Node(n) => n,
                Target::Uuid(u) => u,
            },
        }
    }

    /// The DeviceTaintRules the plan creates and deletes, by name.
    pub fn taint_rules(&self) -> (Vec<&str>, Vec<&str>) {
        let (mut created, mut deleted) = (Vec::new(), Vec::new());
        for s in &self.steps {
            match &s.op {
                Op::KubeCreateTaintRule { name, .. } => created.push(name.as_str()),
                Op::KubeDeleteTaintRule { name } => deleted.push(name.as_str()),
                _ => {}
            }
        }
        (created, deleted)
    }

    /// What the operator confirms, in words: `drain n/2`, with the number of DeviceTaintRules
    /// where it creates or deletes some (`drain h100-dyn-01/3: create 26 DeviceTaintRules`).
    pub fn question(&self) -> String {
        let (created, deleted) = self.taint_rules();
        let rules = |verb: &str, n: usize| match n {
            1 => format!(": {verb} 1 DeviceTaintRule"),
            n => format!(": {verb} {n} DeviceTaintRules"),
        };
        let more = match (created.len(), deleted.len()) {
            (0, 0) => String::new(),
            (c, 0) => rules("create", c),
            (0, d) => rules("delete", d),
            (c, d) => format!(": create {c} and delete {d} DeviceTaintRules"),
        };
        format!("{} {}{more}", self.action.verb(), self.target)
    }

    /// The plan as text: for the command line, the audit log and the console.
    pub fn render(&self) -> String {
        let mut out = format!("{} via {} ({})\n", self.summary, self.backend.as_str(), self.source);
        for (i, s) in self.steps.iter().enumerate() {
            out.push_str(&format!("  {}. {}\n       {}\n", i + 1, s.what, s.call));
        }
        for w in &self.warnings {
            out.push_str(&format!("  warning: {w}\n"));
        }
        for b in &self.blockers {
            out.push_str(&format!("  refused: {b}\n"));
        }
        out
    }
}

/// Settings planning needs beyond the fleet.
#[derive(Debug, Clone)]
pub struct Options {
    pub ctx: Context,
    pub slurm: crate::config::Slurm,
    /// Who acts, for Slurm's reason and the audit (`$USER`).
    pub user: String,
    /// The compute mode a card had before tessera drained it, where the audit log knows it.
    pub previous_mode: Option<ComputeMode>,
    /// Plan a repartition of a busy card as drain, wait for it to be idle, change (where the
    /// backend can wait: the simulated cluster).
    pub wait_idle: bool,
}

impl Options {
    pub fn new(cfg: &Config, force: bool, now: chrono::DateTime<chrono::Utc>) -> Self {
        let ctx = Context { read_only: cfg.read_only, force, min_runtime: cfg.policy.min_runtime, now };
        Self { ctx, slurm: cfg.slurm.clone(), user: user(), previous_mode: None, wait_idle: false }
    }
}

fn step(what: impl Into<String>, call: impl Into<String>, op: Op) -> Step {
    Step { what: what.into(), call: call.into(), op }
}

/// The user acting: `$USER`, `$LOGNAME`, else the name of this process's uid in /etc/passwd.
pub fn user() -> String {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    env("USER").or_else(|| env("LOGNAME")).or_else(passwd_name).unwrap_or_else(|| "unknown".into())
}

fn passwd_name() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uid = status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().next()?.to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[2] == uid).then(|| f[0].to_string())
    })
}

/// A layout as the backends take it: placements largest first, as NVIDIA's tools create them
/// (big placements are the scarce ones); empty for a whole card.
fn placements(spec: &LayoutSpec) -> Vec<(String, u8)> {
    match spec {
        LayoutSpec::Whole => Vec::new(),
        LayoutSpec::Mig(l) => {
            let mut v: Vec<(String, u8, u8)> = l.iter().map(|x| (x.profile.clone(), x.start, x.size)).collect();
            v.sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)));
            v.into_iter().map(|(p, s, _)| (p, s)).collect()
        }
    }
}

/// What every repartition of one card shares: the guard's refusals, the summary, and the
/// layout parsed for the card's model with where every instance lands (`None` where the model
/// or the layout is not known, as the summary then says).
fn layout_on_card(p: &mut Plan, node: &Node, c: &Card, layout: &str) -> Option<(LayoutSpec, String)> {
    // A plan that waits for the card's work to end is not refused for it.
    let waits = p.wait_idle;
    p.blockers.extend(guard::repartition(&node.name, c, layout).into_iter().filter(|r| !(waits && r.is_card_busy())));
    let now = c.layout_text();
    let Some(model) = c.gpu_model() else {
        p.summary = format!("Repartition {}/{} ({}): not possible", node.name, c.index, c.model);
        return None;
    };
    let head = format!("Repartition {}/{} ({}): {now} ->", node.name, c.index, model.name);
    let Ok(spec) = parse_layout(model, layout) else {
        p.summary = format!("{head} {layout}: not a valid layout (tessera layouts {} lists them)", model.name);
        return None;
    };
    // Where every instance lands, also when the layout named no placements.
    let chosen = match &spec {
        LayoutSpec::Whole => "whole".to_string(),
        LayoutSpec::Mig(l) => {
            let mut v: Vec<(u8, &str)> = l.iter().map(|x| (x.start, x.profile.as_str())).collect();
            v.sort();
            v.into_iter().map(|(s, p)| format!("{p}@{s}")).collect::<Vec<_>>().join(",")
        }
    };
    p.summary = if layout.contains('@') || chosen == "whole" {
        format!("{head} {chosen}")
    } else {
        format!("{head} {chosen} (placements chosen by tessera for {layout})")
    };
    Some((spec, chosen))
}

/// A target string: `NODE/INDEX`, a GPU UUID, or a bare node name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Card(CardRef),
    Uuid(String),
    Node(String),
}

impl Target {
    pub fn parse(text: &str) -> Self {
        let t = text.trim();
        if t.starts_with("GPU-") || t.starts_with("MIG-") {
            return Self::Uuid(t.to_string());
        }
        match t.rsplit_once('/') {
            Some((node, idx)) if !node.is_empty() => match idx.parse::<u32>() {
                Ok(i) => Self::Card(CardRef::new(node, i)),
                Err(_) => Self::Node(t.to_string()),
            },
            _ => Self::Node(t.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(Target::parse("gpu-a1/3"), Target::Card(CardRef::new("gpu-a1", 3)));
        assert_eq!(Target::parse("GPU-1234-abcd"), Target::Uuid("GPU-1234-abcd".into()));
        assert_eq!(Target::parse("gpu-a1"), Target::Node("gpu-a1".into()));
        assert_eq!(Target::parse("rack/x"), Target::Node("rack/x".into()));
    }

    #[test]
    fn an_action_names_its_target_and_says_itself() {
        let cases = [
            (Action::Drain { target: "n/2".into(), evict: false }, "n/2", "drain n/2"),
            (Action::Undrain { target: "n".into(), force: false }, "n", "undrain n"),
            (Action::Undrain { target: "GPU-1234".into(), force: true }, "GPU-1234", "undrain GPU-1234"),
            (
                Action::Repartition { target: "n/2".into(), layout: "3g.40gb,3g.40gb".into() },
                "n/2",
                "repartition n/2 to 3g.40gb,3g.40gb",
            ),
            (Action::Preempt { workload: "sim:40".into(), force: false }, "sim:40", "preempt sim:40"),
            (Action::Preempt { workload: "k8s:ml/train".into(), force: true }, "k8s:ml/train", "preempt k8s:ml/train"),
        ];
        for (action, target, words) in cases {
            assert_eq!(action.target(), target, "{action:?}");
            assert_eq!(action.to_string(), words, "{action:?}");
        }
    }
}
