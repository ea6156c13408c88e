//! Guards: the policy every action passes before it may run. Inference is never preempted;
//! training only after the minimum runtime unless forced; repartition needs a valid layout
//! and an idle card; a stale source refuses actions on what it reports; read-only refuses all.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::model::{Card, SourceHealth, Workload, WorkloadKind};

#[derive(Debug, Clone)]
pub struct Context {
    pub read_only: bool,
    pub force: bool,
    pub min_runtime: Duration,
    pub now: DateTime<Utc>,
}

/// Why a plan may not run. Typed, so callers decide by kind (the console offers a drain for
/// a busy card), and written as the sentence the operator reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    ReadOnly,
    SourceStale {
        source: String,
    },
    SourceConnecting {
        source: String,
    },
    SourceUnavailable {
        source: String,
        reason: String,
    },
    NoSource {
        source: String,
    },
    Inference {
        id: String,
    },
    NotPreemptible {
        id: String,
    },
    NotRunning {
        id: String,
        state: &'static str,
    },
    TooYoung {
        id: String,
        ran: Duration,
        min: Duration,
    },
    StartUnknown {
        id: String,
    },
    NotRequeueable {
        id: String,
    },
    /// Undrain of a card that must not take work (lost, fatal XID, uncorrectable ECC).
    Unhealthy {
        target: String,
        fault: String,
    },
    NotInCatalog {
        model: String,
    },
    InvalidLayout {
        layout: String,
        model: String,
        error: String,
    },
    /// Workloads hold the card.
    CardBusy {
        holders: usize,
    },
    /// Processes run on the card.
    ProcessesRunning {
        count: usize,
    },
    /// Activity or memory in use that no source attributes to a holder.
    InUseUnknown,
    MigUnreadable,
    /// Workloads hold GPUs on a node a scheduler repartitions as a whole.
    NodeBusy {
        node: String,
        holders: usize,
    },
    /// Kubernetes names a mig-parted config, not a layout.
    NotAConfigName {
        layout: String,
    },
    /// A DynamicMIG card: the DRA driver lays it out per claim.
    DraDynamic {
        card: String,
    },
    /// The API server does not serve DeviceTaintRules, which a drain through DRA creates.
    TaintRulesNotServed,
    /// Not every device of a DRA card is known by name, and a drain must taint each.
    DraDevicesUnknown {
        card: String,
        named: usize,
        published: u32,
    },
    /// A DRA card is kept off by DeviceTaintRules tessera did not make (an undrain deletes
    /// only its own).
    NotTesserasRules {
        card: String,
        rules: Vec<String>,
    },
    /// A backend's own reason (MIG mode needs a reset, the backend cannot act on that).
    Backend(String),
    /// An earlier action on the same target has no outcome, and nobody is there to be asked.
    OpenIntent {
        open: String,
    },
}

impl Refusal {
    /// Refusals that end once the card or node is drained and its work has left.
    pub fn cleared_by_drain(&self) -> bool {
        matches!(
            self,
            Self::CardBusy { .. } | Self::ProcessesRunning { .. } | Self::NodeBusy { .. } | Self::InUseUnknown
        )
    }

    /// Refusals an operator may force past (with a second confirmation).
    pub fn forcible(&self) -> bool {
        matches!(self, Self::TooYoung { .. } | Self::StartUnknown { .. } | Self::Unhealthy { .. })
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ReadOnly => f.write_str("tessera runs read-only: every action is refused"),
            Self::SourceStale { source } => {
                write!(f, "source {source} is stale: its data may be wrong, so tessera will not act on it")
            }
            Self::SourceConnecting { source } => write!(f, "source {source} has not answered yet"),
            Self::SourceUnavailable { source, reason } => write!(f, "source {source} is unavailable: {reason}"),
            Self::NoSource { source } => write!(f, "no source {source}"),
            Self::Inference { id } => write!(f, "{id} is inference: inference is never preempted"),
            Self::NotPreemptible { id } => write!(f, "{id} is neither training nor inference: not preemptible"),
            Self::NotRunning { id, state } => write!(f, "{id} is {state}: only running work can be preempted"),
            Self::TooYoung { id, ran, min } => forcible(
                f,
                format_args!(
                    "{id} has run {} of the {} minimum (checkpoints are costly)",
                    minutes(*ran),
                    minutes(*min)
                ),
                'P',
            ),
            Self::StartUnknown { id } => {
                forcible(f, format_args!("{id}: start time unknown, so the minimum runtime cannot be checked"), 'P')
            }
            Self::Unhealthy { target, fault } => {
                forcible(f, format_args!("{target} is unhealthy ({fault}): have it checked before it takes work"), 'f')
            }
            Self::NotRequeueable { id } => {
                write!(f, "{id} was submitted with --no-requeue: Slurm would refuse the requeue")
            }
            Self::NotInCatalog { model } => write!(f, "GPU model {model:?} is not in the MIG catalog"),
            Self::InvalidLayout { layout, model, error } => {
                write!(f, "layout {layout:?} is not valid for {model}: {error}")
            }
            Self::CardBusy { holders } => write!(
                f,
                "the card is not idle: {} it (drain it first, wait for them to finish, then repartition)",
                holding(*holders)
            ),
            Self::ProcessesRunning { count } => write!(f, "the card is not idle: {count} processes run on it"),
            Self::InUseUnknown => {
                f.write_str("the card is not idle: it shows activity or memory in use that no source attributes")
            }
            Self::MigUnreadable => {
                f.write_str("the card's MIG instances cannot be read, so they cannot be replaced safely")
            }
            Self::NodeBusy { node, holders } => {
                write!(f, "{} GPUs on {node}: drain (cordon) and wait first", holding(*holders))
            }
            Self::NotAConfigName { layout } => write!(
                f,
                "Kubernetes takes a named config from the mig-parted ConfigMap (e.g. all-balanced), not a layout: {layout}"
            ),
            Self::DraDynamic { card } => dra_dynamic(f, card),
            Self::TaintRulesNotServed => f.write_str(TAINT_RULES_NOT_SERVED),
            Self::DraDevicesUnknown { card, named, published } => dra_devices_unknown(f, card, *named, *published),
            Self::NotTesserasRules { card, rules } => not_tesseras_rules(f, card, rules),
            Self::Backend(why) => f.write_str(why),
            Self::OpenIntent { open } => write!(
                f,
                "an earlier action on this target was left half-done: {open}; check the target, then act on it \
                 where you are asked to confirm (the console, or the command line without --yes), or give \
                 --despite-open-intent"
            ),
        }
    }
}

/// A forcible refusal's sentence: `why`, then how forcing overrides it (`--force` on the
/// command line, `key` in the console).
fn forcible(f: &mut std::fmt::Formatter<'_>, why: std::fmt::Arguments<'_>, key: char) -> std::fmt::Result {
    write!(f, "{why}; forcing overrides this (--force on the command line, {key} in the console)")
}

/// `1 workload holds`, `3 workloads hold`: who holds a card or a node's GPUs.
fn holding(holders: usize) -> String {
    let who = crate::units::count(holders as u64, "workload", "workloads");
    let verb = if holders == 1 { "holds" } else { "hold" };
    format!("{who} {verb}")
}

/// Why a DynamicMIG card has no layout to set.
fn dra_dynamic(f: &mut std::fmt::Formatter<'_>, card: &str) -> std::fmt::Result {
    write!(
        f,
        "{card} is under DynamicMIG: the DRA driver lays this card out per claim (it creates each \
         claim's MIG instance when its pod starts), so there is no layout to set"
    )
}

/// What a drain through DRA needs that the API server does not serve.
const TAINT_RULES_NOT_SERVED: &str = "the API server does not serve DeviceTaintRules (resource.k8s.io/v1beta2), \
     which a drain through DRA creates: they need Kubernetes 1.36 or later with the DRADeviceTaintRules feature gate \
     on and --runtime-config=resource.k8s.io/v1beta2=true";

/// Why a drain cannot taint every device of a DRA card: tessera knows `named` of the
/// `published` devices' names.
fn dra_devices_unknown(f: &mut std::fmt::Formatter<'_>, card: &str, named: usize, published: u32) -> std::fmt::Result {
    write!(
        f,
        "{card} publishes {published} devices and tessera knows the names of {named}: a drain must taint every one"
    )
}

/// Whose DeviceTaintRules keep a DRA card off, when they are not tessera's: the first of
/// `rules`, how many in all, and who deletes them.
fn not_tesseras_rules(f: &mut std::fmt::Formatter<'_>, card: &str, rules: &[String]) -> std::fmt::Result {
    let first = rules.first().map(String::as_str).unwrap_or_default();
    let more = if rules.len() > 1 { format!(", ... {} in all", rules.len()) } else { String::new() };
    write!(
        f,
        "{card} is kept off by DeviceTaintRules tessera did not make ({first}{more}): tessera deletes \
         only its own (label {}={}); whoever made them deletes them (kubectl delete devicetaintrule)",
        crate::model::dra::MANAGED_BY.0,
        crate::model::dra::MANAGED_BY.1
    )
}

impl serde::Serialize for Refusal {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl From<String> for Refusal {
    fn from(why: String) -> Self {
        Self::Backend(why)
    }
}

impl From<&str> for Refusal {
    fn from(why: &str) -> Self {
        Self::Backend(why.to_string())
    }
}

/// A refusal equals the sentence it is written as.
impl PartialEq<str> for Refusal {
    fn eq(&self, other: &str) -> bool {
        format!("{self}") == other
    }
}

impl PartialEq<&str> for Refusal {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl PartialEq<String> for Refusal {
    fn eq(&self, other: &String) -> bool {
        *self == **other
    }
}

/// The refusals as one line.
pub fn joined(refusals: &[Refusal]) -> String {
    refusals.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// Refusals that apply to every action.
pub fn common(ctx: &Context, source: &str, health: Option<&SourceHealth>) -> Vec<Refusal> {
    let mut out = Vec::new();
    if ctx.read_only {
        out.push(Refusal::ReadOnly);
    }
    let source = source.to_string();
    match health {
        Some(SourceHealth::Live { .. }) => {}
        Some(SourceHealth::Stale { .. }) => out.push(Refusal::SourceStale { source }),
        Some(SourceHealth::Connecting) => out.push(Refusal::SourceConnecting { source }),
        Some(SourceHealth::Unavailable { reason }) => {
            out.push(Refusal::SourceUnavailable { source, reason: reason.clone() });
        }
        None => out.push(Refusal::NoSource { source }),
    }
    out
}

/// Refusals for preempting `w`. A forced preemption of young training passes, but the caller
/// must ask a second time (`needs_second_confirmation`).
pub fn preempt(w: &Workload, ctx: &Context) -> Vec<Refusal> {
    let mut out = Vec::new();
    let id = || w.id.clone();
    match w.kind {
        WorkloadKind::Inference => out.push(Refusal::Inference { id: id() }),
        WorkloadKind::Other => out.push(Refusal::NotPreemptible { id: id() }),
        WorkloadKind::Training => {}
    }
    if !w.state.is_active() {
        out.push(Refusal::NotRunning { id: id(), state: w.state.as_str() });
    }
    if w.kind == WorkloadKind::Training && w.state.is_active() && !ctx.force {
        match young(w, ctx) {
            Some(ran) => out.push(Refusal::TooYoung { id: id(), ran, min: ctx.min_runtime }),
            None if w.started_at.is_none() => out.push(Refusal::StartUnknown { id: id() }),
            None => {}
        }
    }
    out
}

/// True when a forced preemption skips the minimum runtime (ask a second time).
pub fn needs_second_confirmation(w: &Workload, ctx: &Context) -> bool {
    ctx.force && w.kind == WorkloadKind::Training && (w.started_at.is_none() || young(w, ctx).is_some())
}

fn young(w: &Workload, ctx: &Context) -> Option<Duration> {
    let ran = w.runtime(ctx.now)?.to_std().unwrap_or_default();
    (ran < ctx.min_runtime).then_some(ran)
}

fn minutes(d: Duration) -> String {
    format!("{}m", d.as_secs() / 60)
}

/// Refusals for undraining a card (or every card of a node) that must not take work. Forced,
/// it passes, and the caller asks a second time (the returned question).
pub fn undrain(target: &str, faults: &[String], ctx: &Context) -> (Vec<Refusal>, Option<String>) {
    if faults.is_empty() {
        return (Vec::new(), None);
    }
    let fault = faults.join(", ");
    if ctx.force {
        (Vec::new(), Some(format!("{target} is unhealthy ({fault}): undrain it anyway?")))
    } else {
        (vec![Refusal::Unhealthy { target: target.to_string(), fault }], None)
    }
}

impl Refusal {
    /// The card has holders (a repartition that waits for them to end is not refused for it).
    pub fn is_card_busy(&self) -> bool {
        matches!(self, Self::CardBusy { .. })
    }
}

/// Refusals for repartitioning `card` to `layout`.
pub fn repartition(node: &str, card: &Card, layout: &str) -> Vec<Refusal> {
    let mut out = Vec::new();
    let Some(model) = card.gpu_model() else {
        return vec![Refusal::NotInCatalog { model: card.model.clone() }];
    };
    if let Err(e) = crate::model::mig::parse_layout(model, layout) {
        out.push(Refusal::InvalidLayout {
            layout: layout.to_string(),
            model: model.name.clone(),
            error: e.to_string(),
        });
    }
    // Every backend's: the DRA driver lays a DynamicMIG card out per claim.
    if card.dra.as_ref().is_some_and(|d| d.dynamic) {
        out.push(Refusal::DraDynamic { card: format!("{node}/{}", card.index) });
    }
    let holders = card.holders().count();
    if holders > 0 {
        out.push(Refusal::CardBusy { holders });
    }
    if !card.processes.is_empty() {
        out.push(Refusal::ProcessesRunning { count: card.processes.len() });
    }
    if holders == 0 && card.processes.is_empty() && card.in_use_by_unknown() {
        out.push(Refusal::InUseUnknown);
    }
    if card.mig.error.is_some() {
        out.push(Refusal::MigUnreadable);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::WorkloadState;

    fn ctx(read_only: bool, force: bool) -> Context {
        let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        Context { read_only, force, min_runtime: Duration::from_secs(1800), now }
    }

    fn job(kind: WorkloadKind, ran_min: Option<i64>, c: &Context) -> Workload {
        let mut w = Workload::new("slurm:1", "j", kind, WorkloadState::Running);
        w.started_at = ran_min.map(|m| c.now - chrono::Duration::minutes(m));
        w
    }

    /// kind × runtime × force × read-only × stale: allowed?
    #[test]
    fn preemption_table() {
        use WorkloadKind::*;
        let live = SourceHealth::Live { at: DateTime::from_timestamp(0, 0).unwrap_or_default() };
        let stale = SourceHealth::Stale { since: DateTime::from_timestamp(0, 0).unwrap_or_default(), error: None };
        #[rustfmt::skip]
        let cases = [
            // kind,     ran, force, ro,    stale, allowed, second confirmation
            (Inference, Some(600), false, false, false, false, false),
            (Inference, Some(600), true,  false, false, false, false),
            (Training,  Some(45),  false, false, false, true,  false),
            (Training,  Some(10),  false, false, false, false, false),
            (Training,  Some(10),  true,  false, false, true,  true),
            (Training,  None,      false, false, false, false, false),
            (Training,  None,      true,  false, false, true,  true),
            (Training,  Some(45),  false, true,  false, false, false),
            (Training,  Some(45),  true,  true,  false, false, false),
            (Training,  Some(45),  false, false, true,  false, false),
            (Other,     Some(45),  false, false, false, false, false),
        ];
        for (kind, ran, force, ro, is_stale, allowed, second) in cases {
            let c = ctx(ro, force);
            let w = job(kind, ran, &c);
            let health = if is_stale { &stale } else { &live };
            let mut refusals = common(&c, "slurm", Some(health));
            refusals.extend(preempt(&w, &c));
            assert_eq!(
                refusals.is_empty(),
                allowed,
                "{kind:?} ran {ran:?} force {force} ro {ro} stale {is_stale}: {refusals:?}"
            );
            if allowed {
                assert_eq!(needs_second_confirmation(&w, &c), second, "{kind:?} {ran:?} {force}");
            }
        }
    }

    #[test]
    fn pending_work_is_not_preempted() {
        let c = ctx(false, true);
        let mut w = job(WorkloadKind::Training, Some(100), &c);
        w.state = WorkloadState::Pending;
        assert!(preempt(&w, &c).iter().any(|r| r.to_string().contains("only running work")));
    }

    #[test]
    fn repartition_guards() {
        let mut card = Card { model: "NVIDIA A100-SXM4-80GB".into(), ..Card::default() };
        assert!(repartition("n", &card, "3g.40gb@0,3g.40gb@4").is_empty());
        assert!(repartition("n", &card, "whole").is_empty());
        assert!(repartition("n", &card, "3g.40gb@1")[0].to_string().contains("not valid"));
        card.workloads.push("slurm:4".into());
        assert!(repartition("n", &card, "whole")[0].to_string().contains("drain it first"));
        let unknown = Card { model: "Tesla T4".into(), ..Card::default() };
        assert!(repartition("n", &unknown, "whole")[0].to_string().contains("not in the MIG catalog"));
    }
}
