//! The capacity advisor: pure rules over the merged fleet (with each workload's activity
//! history) that find waste and say what to do. Each `Finding` has a kind, a severity, a
//! subject, the evidence in numbers with the window they cover, what it costs per day and a
//! suggestion: an `Action` the runner can plan, or plain words for what tessera cannot do.
//! No IO; the engine's loop runs it after merged updates, `tessera advise` once.

mod dra;
mod drain;
pub mod fit;
mod health;
mod idle;
mod in_flight;
pub mod in_force;
mod layout;
pub mod planner;
mod pool;
mod preempt;
pub mod reconcile;
pub mod schedule;
mod sharing;
mod waste;

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::act::Action;
use crate::config::Advisor;
use crate::model::{CardRef, Fleet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A workload holds GPUs and does not use them.
    HeldIdle,
    /// A whole card whose work would fit a MIG instance.
    Oversized,
    /// A MIG instance much larger than what its workload uses.
    MigWaste,
    /// Work runs on a card that is failing.
    UnhealthyHeld,
    /// Waiting inference that preempting eligible training would start.
    PreemptionCandidate,
    /// A pool of one model whose work would fit on fewer cards.
    ScaleIn,
    /// Work has waited past the threshold with nothing free and nothing to preempt.
    ScaleOut,
    /// Free MIG slices no profile can use.
    Fragmentation,
    /// An idle card the layout planner would repartition to start waiting work.
    LayoutPlan,
    /// A busy card to drain and repartition for waiting work (`[advisor] drain_plans`).
    DrainPlan,
    /// Training and latency-sensitive inference on one time-sliced or MPS card.
    Interference,
    /// A time-sliced or MPS card near its replica limit with memory nearly full.
    Crowded,
    /// A MIG-capable card time-sliced between workloads that would each fit an instance.
    UseMig,
    /// A day/night MIG schedule that the measured demand by hour would be better served by.
    ScheduleSuggestion,
    /// A schedule's window in force keeps idle cards from waiting work a layout change starts.
    ScheduleCost,
    /// A multi-card request the fleet has the cards for, but no node free together.
    Packing,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HeldIdle => "held idle",
            Self::Oversized => "oversized",
            Self::MigWaste => "MIG waste",
            Self::UnhealthyHeld => "unhealthy, held",
            Self::PreemptionCandidate => "preempt to serve",
            Self::ScaleIn => "scale in",
            Self::ScaleOut => "scale out",
            Self::Fragmentation => "fragmentation",
            Self::LayoutPlan => "layout plan",
            Self::DrainPlan => "drain plan",
            Self::Interference => "interference",
            Self::Crowded => "crowded",
            Self::UseMig => "use MIG instead",
            Self::ScheduleSuggestion => "schedule",
            Self::ScheduleCost => "schedule cost",
            Self::Packing => "packing",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warn,
    High,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Warn => "warn",
            Self::High => "high",
        }
    }
}

/// What a finding is about.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Subject {
    Workload {
        id: String,
    },
    Card {
        card: String,
    },
    Instance {
        card: String,
        gi: u32,
        profile: String,
    },
    /// Every instance of one profile (a summary).
    Profile {
        profile: String,
    },
    /// The whole cards of one GPU model.
    Pool {
        model: String,
    },
    /// What the queue waits for (`whole H100-80GB`, `MIG 3g.40gb`).
    Resource {
        resource: String,
    },
}

impl Subject {
    pub fn text(&self) -> String {
        match self {
            Self::Workload { id } => id.clone(),
            Self::Card { card } => card.clone(),
            Self::Instance { card, profile, .. } => format!("{card} {profile}"),
            Self::Profile { profile } => format!("all {profile}"),
            Self::Pool { model } => format!("{model} pool"),
            Self::Resource { resource } => resource.clone(),
        }
    }
}

/// What to do about a finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Suggestion {
    /// An action the runner plans, guards and confirms like any other.
    Action { action: Action, why: String },
    /// What tessera cannot do itself.
    Words { text: String },
    /// The action is already under way (the fleet shows it: a workload checkpointing, a card
    /// draining): nothing else is offered for the subject until it lands.
    InProgress { action: Action, text: String },
}

impl Suggestion {
    pub fn text(&self) -> String {
        match self {
            Self::Action { action, why } => format!("{action} ({why})"),
            Self::Words { text } => text.clone(),
            Self::InProgress { text, .. } => format!("in progress: {text}"),
        }
    }

    /// The action to plan, where there is one to take now (none while it is under way).
    pub fn action(&self) -> Option<&Action> {
        match self {
            Self::Action { action, .. } => Some(action),
            Self::Words { .. } | Self::InProgress { .. } => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub kind: Kind,
    pub severity: Severity,
    pub subject: Subject,
    /// One line: what is wrong.
    pub title: String,
    /// The numbers behind it, each with the window it covers.
    pub evidence: Vec<String>,
    /// GPU-hours a day this wastes (or, for waiting work, would use) if nothing changes.
    pub gpu_hours_per_day: f64,
    /// The same in money, where `[advisor.prices]` names the GPU model.
    pub cost_per_day: Option<f64>,
    pub suggestion: Suggestion,
    /// The cards it is about, for marking fleet rows.
    #[serde(serialize_with = "cards")]
    pub cards: Vec<CardRef>,
}

fn cards<S: serde::Serializer>(c: &[CardRef], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(c.iter().map(ToString::to_string))
}

/// What the rules need beyond the fleet.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    pub advisor: &'a Advisor,
    /// Training may be preempted only after this (`[policy] min_runtime`).
    pub min_runtime: Duration,
    /// Waiting longer than this is worth acting on (`[policy] queue_wait_threshold`).
    pub queue_wait: Duration,
    /// A pool averaging under this is a scale-in candidate (`[policy] scale_in_utilization_pct`).
    pub scale_in_pct: f64,
    /// The data's clock.
    pub now: DateTime<Utc>,
    /// Demand by hour of the day, where it has been measured (the schedule suggestion).
    pub demand: Option<&'a crate::model::demand::DemandHistory>,
    /// The schedule suggestions already made from `demand` (a caller that advises every second
    /// makes them when a new sample comes, ~175 ms at 4096 cards); `None`: made here.
    pub suggested: Option<&'a [schedule::Suggested]>,
    /// The configured schedules: the cards their windows in force set are theirs.
    pub schedules: &'a [crate::model::schedule::Schedule],
}

impl<'a> Context<'a> {
    /// The thresholds of `cfg`, at the data's clock `now`.
    pub fn new(cfg: &'a crate::config::Config, now: DateTime<Utc>) -> Self {
        Self {
            advisor: &cfg.advisor,
            min_runtime: cfg.policy.min_runtime,
            queue_wait: cfg.policy.queue_wait_threshold,
            scale_in_pct: cfg.policy.scale_in_utilization_pct,
            now,
            demand: None,
            suggested: None,
            schedules: &cfg.schedules,
        }
    }

    /// `gpu_hours` a day of `model` in money, where a price is set.
    fn money(&self, model: Option<&str>, gpu_hours: f64) -> Option<f64> {
        Some(self.advisor.price(model?)? * gpu_hours)
    }
}

/// Every finding over `fleet`, the most severe first (then the most GPU-hours), each
/// suggestion reconciled with the others ([`reconcile`]).
pub fn advise(fleet: &Fleet, cx: &Context) -> Vec<Finding> {
    advise_with_plan(fleet, cx).0
}

/// [`advise`], with the one plan its suggestions make: each card, workload and waiting job
/// the subject of at most one action.
///
/// The rules run as an ordered pipeline; a new rule goes in the stage that matches it:
/// 1. **What runs, judged on its own** (held-idle, oversized, MIG waste, unhealthy, sharing):
///    a rule about one card or workload, needing nothing from another rule.
/// 2. **The layout plan** of idle cards (around the schedules' windows in force) and what it
///    would start (`served`).
/// 3. **What would start waiting work, cheapest first** (drain plans, preemptions, then
///    capacity to add): each skips the work an earlier stage serves and adds what it serves
///    to `served`, so `scale_out` asks for hardware only for what nothing before it gives. A
///    new way to start waiting work goes before `scale_out`.
/// 4. **The fleet as a whole** (scale-in, fragmentation, schedules).
/// 5. **One plan**: actions already under way are marked, then `reconcile` keeps at most one
///    action per subject.
pub fn advise_with_plan(fleet: &Fleet, cx: &Context) -> (Vec<Finding>, Vec<reconcile::Planned>) {
    let mut out = Vec::new();
    idle::held_idle(fleet, cx, &mut out);
    dra::claims_held_idle(fleet, cx, &mut out);
    idle::oversized(fleet, cx, &mut out);
    waste::mig_waste(fleet, cx, &mut out);
    health::unhealthy_held(fleet, cx, &mut out);
    sharing::interference(fleet, &mut out);
    sharing::crowded(fleet, cx, &mut out);
    sharing::use_mig(fleet, &mut out);
    // What a repartition of idle cards would start is not for preemption or capacity to add;
    // what a preemption would start is not capacity to add.
    // No layout plan goes against a schedule's window in force; what that costs is said.
    let force = in_force::in_force(fleet, cx.schedules, cx.now);
    let plan = planner::plan_around(fleet, cx.now, &force.pinned);
    layout::findings(fleet, cx, &plan, &mut out);
    let starved = if force.pinned.is_empty() {
        Vec::new()
    } else {
        in_force::findings(fleet, cx, &force, &planner::plan(fleet, cx.now), &plan, &mut out)
    };
    let drained = if cx.advisor.drain_plans { drain::findings(fleet, cx, &plan, &mut out) } else { Vec::new() };
    let mut served = plan.served;
    // What a schedule holds from waiting work is not capacity to add either.
    served.extend(starved);
    // Free capacity once for both: it walks every card.
    let free = crate::model::capacity::Free::compute(fleet);
    preempt::candidates(fleet, cx, &free, &served, &mut out);
    served.extend(out.iter().filter(|f| f.kind == Kind::PreemptionCandidate).filter_map(|f| match &f.subject {
        Subject::Workload { id } => Some(id.clone()),
        _ => None,
    }));
    // Nor is what a drain plan would start (where drain plans are asked for).
    served.extend(drained);
    pool::scale_out(fleet, cx, &free, &served, &mut out);
    pool::scale_in(fleet, cx, cx.scale_in_pct, &mut out);
    pool::fragmentation(fleet, cx, &mut out);
    dra::fragmentation(fleet, cx, &mut out);
    schedule::findings(fleet, cx, &mut out);
    in_flight::mark(fleet, &mut out);
    let plan = reconcile::reconcile(fleet, &mut out);
    order(&mut out, Order::Severity);
    (out, plan)
}

/// How findings are listed: the most severe first (the default: crowding and interference
/// cost no GPU-hours and were last), or the most GPU-hours first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Order {
    /// Severity, then GPU-hours a day.
    #[default]
    Severity,
    /// GPU-hours a day, then severity.
    Cost,
}

impl Order {
    /// The other order.
    pub fn toggled(self) -> Self {
        match self {
            Self::Severity => Self::Cost,
            Self::Cost => Self::Severity,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Severity => "severity first",
            Self::Cost => "cost first",
        }
    }
}

/// Sort `findings` by `by`; ties by title, so the order is the same every pass.
pub fn order(findings: &mut [Finding], by: Order) {
    findings.sort_by(|a, b| {
        let severity = b.severity.cmp(&a.severity);
        let cost = b.gpu_hours_per_day.total_cmp(&a.gpu_hours_per_day);
        match by {
            Order::Severity => severity.then(cost),
            Order::Cost => cost.then(severity),
        }
        .then(a.title.cmp(&b.title))
    });
}

/// Findings by severity: (high, warn, info).
pub fn counts(findings: &[Finding]) -> (usize, usize, usize) {
    findings.iter().fold((0, 0, 0), |(h, w, i), f| match f.severity {
        Severity::High => (h + 1, w, i),
        Severity::Warn => (h, w + 1, i),
        Severity::Info => (h, w, i + 1),
    })
}

/// The GPU model of a workload's first card, as the catalog names it.
fn model_of(fleet: &Fleet, cards: &[CardRef]) -> Option<String> {
    let c = fleet.card(cards.first()?)?;
    Some(c.gpu_model().map_or_else(|| c.model.clone(), |m| m.name.clone()))
}

/// Whether `w` holds `card` as a share of it rather than whole: the card is time-sliced or MPS
/// and `w` asked for shares, or others hold it too, or its scheduler hands the card's replicas
/// out for GPU requests (the device plugin without `renameByDefault`). A Slurm job holding a
/// shard-capable GPU as `--gres=gpu` holds it whole.
pub(crate) fn holds_share(fleet: &Fleet, w: &crate::model::Workload, r: &CardRef) -> bool {
    let Some(c) = fleet.card(r) else { return false };
    if !c.sharing_mode().is_some_and(crate::model::SharingMode::unisolated) {
        return false;
    }
    let replicas_for_gpus =
        fleet.nodes.iter().find(|n| n.name == r.node).is_some_and(|n| n.capacity.iter().any(|x| x.whole_requests));
    w.request.shares.is_some() || c.holders().any(|h| h != w.id) || replicas_for_gpus
}

/// The share of whole GPUs `id` holds: one per whole card, slices over the card's for MIG,
/// its units of a time-sliced or MPS card it holds a share of.
fn gpu_share(fleet: &Fleet, id: &str, cards: &[CardRef]) -> f64 {
    let w = fleet.workload(id);
    cards
        .iter()
        .filter_map(|r| Some((r, fleet.card(r)?)))
        .map(|(r, c)| {
            if let Some(w) = w.filter(|w| holds_share(fleet, w, r)) {
                // Its units over the card's: a Slurm shard:2 of 4 is half, a pod's two replicas
                // of four as much; spread over several cards, each its part.
                let mine = w.request.shares.map(|s| s.count).or(w.request.gpus).unwrap_or(1).max(1);
                let spread = w.cards.len().max(1) as f64;
                let n = c.sharing.replicas.map_or(c.workloads.len(), |r| r as usize).max(c.workloads.len()).max(1);
                return (f64::from(mine) / spread / n as f64).min(1.0);
            }
            if !c.mig.enabled {
                return 1.0;
            }
            let slices = c.gpu_model().map_or(8.0, |m| f64::from(m.memory_slices));
            c.mig
                .instances
                .iter()
                .filter(|i| i.workloads.iter().any(|w| w == id))
                .map(|i| f64::from(i.size) / slices)
                .sum()
        })
        .sum()
}

/// What the advice's plan does to capacity, as the console's projection follows it: each
/// repartition's card and layout, and how many other actions (preemptions, drains) it holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Followed {
    pub layouts: Vec<(CardRef, String)>,
    pub others: usize,
}

/// The plan `findings` suggest, as the projection follows it.
pub fn followed(findings: &[Finding]) -> Followed {
    let mut f = Followed::default();
    for a in findings.iter().filter_map(|x| x.suggestion.action()) {
        match a {
            Action::Repartition { target, layout } => match crate::act::Target::parse(target) {
                crate::act::Target::Card(card) => f.layouts.push((card, layout.clone())),
                // A UUID or a node: not a card the projection can lay out.
                _ => f.others += 1,
            },
            _ => f.others += 1,
        }
    }
    f
}

/// What a change would start, judged as layout and drain plans judge it: the oldest wait of
/// `ids` and its severity (warn past `[policy] queue_wait_threshold`, high past twice it);
/// `None` while none has waited past the threshold (work that has just arrived may yet be
/// placed by its scheduler).
fn waited_past(fleet: &Fleet, cx: &Context, ids: &[&String]) -> Option<(u64, Severity)> {
    let oldest = ids
        .iter()
        .filter_map(|id| fleet.workload(id)?.wait(cx.now))
        .map(|d| d.num_seconds().max(0) as u64)
        .max()
        .unwrap_or(0);
    let threshold = cx.queue_wait.as_secs();
    (oldest >= threshold).then(|| (oldest, if oldest >= threshold * 2 { Severity::High } else { Severity::Warn }))
}

fn minutes(s: u64) -> String {
    crate::units::duration::short(s as i64)
}

#[cfg(test)]
#[path = "advisor_tests.rs"]
mod tests;
