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

/// Refusals that apply to every action.
pub fn common(ctx: &Context, source: &str, health: Option<&SourceHealth>) -> Vec<String> {
    let mut out = Vec::new();
    if ctx.read_only {
        out.push("tessera runs read-only: every action is refused".into());
    }
    match health {
        Some(SourceHealth::Live { .. }) => {}
        Some(SourceHealth::Stale { .. }) => {
            out.push(format!("source {source} is stale: its data may be wrong, so tessera will not act on it"));
        }
        Some(SourceHealth::Connecting) => out.push(format!("source {source} has not answered yet")),
        Some(SourceHealth::Unavailable { reason }) => out.push(format!("source {source} is unavailable: {reason}")),
        None => out.push(format!("no source {source}")),
    }
    out
}

/// Refusals for preempting `w`. A forced preemption of young training passes, but the caller
/// must ask a second time (`needs_second_confirmation`).
pub fn preempt(w: &Workload, ctx: &Context) -> Vec<String> {
    let mut out = Vec::new();
    match w.kind {
        WorkloadKind::Inference => out.push(format!("{} is inference: inference is never preempted", w.id)),
        WorkloadKind::Other => out.push(format!("{} is neither training nor inference: not preemptible", w.id)),
        WorkloadKind::Training => {}
    }
    if !w.state.is_active() {
        out.push(format!("{} is {}: only running work can be preempted", w.id, w.state.as_str()));
    }
    if w.kind == WorkloadKind::Training && w.state.is_active() && !ctx.force {
        match young(w, ctx) {
            Some(ran) => out.push(format!(
                "{} has run {} of the {} minimum (checkpoints are costly); --force overrides",
                w.id,
                minutes(ran),
                minutes(ctx.min_runtime)
            )),
            None if w.started_at.is_none() => {
                out.push(format!(
                    "{}: start time unknown, so the minimum runtime cannot be checked; --force overrides",
                    w.id
                ));
            }
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

/// Refusals for repartitioning `card` to `layout`.
pub fn repartition(card: &Card, layout: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Some(model) = card.gpu_model() else {
        return vec![format!("GPU model {:?} is not in the MIG catalog", card.model)];
    };
    if let Err(e) = crate::model::mig::parse_layout(model, layout) {
        out.push(format!("layout {layout:?} is not valid for {}: {e}", model.name));
    }
    let holders = card.holders().count();
    if holders > 0 {
        out.push(format!(
            "the card is not idle: {holders} workloads hold it (drain it first, wait for them to finish, then repartition)"
        ));
    }
    if !card.processes.is_empty() {
        out.push(format!("the card is not idle: {} processes run on it", card.processes.len()));
    }
    if card.mig.error.is_some() {
        out.push("the card's MIG instances cannot be read, so they cannot be replaced safely".into());
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
        assert!(preempt(&w, &c).iter().any(|r| r.contains("only running work")));
    }

    #[test]
    fn repartition_guards() {
        let mut card = Card { model: "NVIDIA A100-SXM4-80GB".into(), ..Card::default() };
        assert!(repartition(&card, "3g.40gb@0,3g.40gb@4").is_empty());
        assert!(repartition(&card, "whole").is_empty());
        assert!(repartition(&card, "3g.40gb@1")[0].contains("not valid"));
        card.workloads.push("slurm:4".into());
        assert!(repartition(&card, "whole")[0].contains("drain it first"));
        let unknown = Card { model: "Tesla T4".into(), ..Card::default() };
        assert!(repartition(&unknown, "whole")[0].contains("not in the MIG catalog"));
    }
}
