//! The plan's tests: conflicts settled by rank on built findings, and on the simulated
//! cluster one plan at every third hour, the plan carried out and advised again (a fixed
//! point), a day following the advice, and random fleets.

use super::*;
use crate::advisor::Severity;
use crate::model::CardRef;

fn finding(kind: Kind, subject: Subject, action: Option<Action>, cards: &[&str]) -> Finding {
    Finding {
        kind,
        severity: Severity::Warn,
        subject,
        title: format!("{kind:?}"),
        evidence: Vec::new(),
        gpu_hours_per_day: 1.0,
        cost_per_day: None,
        suggestion: match action {
            Some(action) => Suggestion::Action { action, why: "because".into() },
            None => Suggestion::Words { text: "words".into() },
        },
        cards: cards
            .iter()
            .filter_map(|c| c.rsplit_once('/'))
            .map(|(n, i)| CardRef::new(n.to_string(), i.parse().unwrap_or(0)))
            .collect(),
    }
}

fn preempt(id: &str) -> Option<Action> {
    Some(Action::Preempt { workload: id.into(), force: false })
}

fn workload(id: &str) -> Subject {
    Subject::Workload { id: id.into() }
}

/// Each workload and card is the subject of at most one action: the same action twice is
/// merged into the first by rank, another action for the same subject is dropped with its
/// reason, and the findings say so.
#[test]
fn one_action_per_subject_settled_by_rank() {
    let mut f = vec![
        // Waste: the idle training could be preempted ...
        finding(Kind::HeldIdle, workload("sim:40"), preempt("sim:40"), &["n/1"]),
        // ... and waiting inference asks for the same: merged into the inference's.
        finding(Kind::PreemptionCandidate, workload("sim:43"), preempt("sim:40"), &["n/1"]),
        // A second waiting job asks for the same victim: dropped.
        finding(Kind::PreemptionCandidate, workload("sim:44"), preempt("sim:40"), &["n/1"]),
        // A failing card beats a repartition of it.
        finding(
            Kind::LayoutPlan,
            Subject::Card { card: "n/2".into() },
            Some(Action::Repartition { target: "n/2".into(), layout: "whole".into() }),
            &["n/2"],
        ),
        finding(
            Kind::UnhealthyHeld,
            Subject::Card { card: "n/2".into() },
            Some(Action::Drain { target: "n/2".into() }),
            &["n/2"],
        ),
        // Words claim nothing.
        finding(Kind::ScaleIn, Subject::Pool { model: "A100-80GB".into() }, None, &[]),
    ];
    let plan = reconcile(&Fleet::default(), &mut f);
    let actions: Vec<(Kind, String)> = plan.iter().map(|p| (p.kind, super::describe(&p.action))).collect();
    assert_eq!(
        actions,
        vec![(Kind::UnhealthyHeld, "drain n/2".to_string()), (Kind::PreemptionCandidate, "preempt sim:40".to_string()),]
    );
    let lost: Vec<(Kind, &str)> = plan.iter().flat_map(|p| p.won_over.iter().map(|l| (l.kind, l.outcome))).collect();
    assert_eq!(
        lost,
        vec![(Kind::LayoutPlan, "dropped"), (Kind::PreemptionCandidate, "dropped"), (Kind::HeldIdle, "merged")]
    );
    assert_eq!(f[0].suggestion.text(), "the same as the preempt to serve advice for sim:43: preempt sim:40");
    assert!(
        f[2].suggestion.text().starts_with("not now: preempt sim:40 (preempt to serve advice for sim:43)"),
        "{}",
        f[2].suggestion.text()
    );
    assert!(
        f[3].suggestion.text().starts_with("not now: drain n/2 (unhealthy, held advice for n/2)"),
        "{}",
        f[3].suggestion.text()
    );
    // A target is one target however it is written, and a scheduler's drain is its node's.
    let fleet = Fleet {
        sources: vec![crate::model::SourceStatus::live("slurm", crate::model::SourceKind::Slurm, chrono::Utc::now())],
        nodes: vec![Node {
            name: "s".into(),
            cards: (0..4).map(|index| Card { index, uuid: Some(format!("GPU-{index}")), ..Card::default() }).collect(),
            sources: vec!["slurm".into()],
            ..Node::default()
        }],
        ..Fleet::default()
    };
    let mut g = vec![
        finding(
            Kind::UnhealthyHeld,
            Subject::Card { card: "s/2".into() },
            Some(Action::Drain { target: "s/2".into() }),
            &["s/2"],
        ),
        // Its card 1 freed for waiting work: not on a node the drain stops.
        finding(Kind::PreemptionCandidate, workload("slurm:9"), preempt("slurm:5"), &["s/1"]),
        // Card 3 by its UUID: the same claim as s/3.
        finding(
            Kind::LayoutPlan,
            Subject::Card { card: "s/3".into() },
            Some(Action::Repartition { target: "GPU-3".into(), layout: "whole".into() }),
            &["s/3"],
        ),
    ];
    let plan = reconcile(&fleet, &mut g);
    assert_eq!(plan.len(), 1, "{plan:#?}");
    assert_eq!(plan[0].claims, ["card:s/0", "card:s/1", "card:s/2", "card:s/3", "node:s"]);
    assert_eq!(plan[0].won_over.len(), 2, "{plan:#?}");
    // No claim is held twice.
    let mut claims: Vec<&String> = plan.iter().flat_map(|p| &p.claims).collect();
    let n = claims.len();
    claims.sort();
    claims.dedup();
    assert_eq!(claims.len(), n);
}

/// The plan on the simulated cluster over a day: at every third hour, no claim is held by two
/// actions, every action a finding still suggests is the plan's, and none is a no-op (a drain
/// of a draining card, a preemption of work that does not run).
mod on_the_simulator {
    use std::time::Duration;

    use chrono::TimeZone;

    use crate::actions::Action;
    use crate::advisor::{Context, advise_with_plan};
    use crate::model::WorkloadState;
    use crate::sources::SourceUpdate;
    use crate::sources::sim::{Sim, SimConfig};

    #[test]
    fn one_plan_at_every_third_hour_of_a_day() {
        let start = chrono::Utc.with_ymd_and_hms(2026, 3, 2, 0, 0, 0).single().unwrap_or_default();
        let cfg = crate::config::Config::default();
        let (mut plans, mut findings) = (0usize, 0usize);
        for seed in [42, 7] {
            let mut sim = Sim::new(SimConfig::new(seed, start));
            let mut store = crate::store::Store::new();
            store.register("sim", crate::model::SourceKind::Simulated, Duration::from_secs(1));
            for hour in (0..24).step_by(3) {
                if hour > 0 {
                    for _ in 0..3 * 6 {
                        sim.advance(Duration::from_secs(600));
                    }
                }
                let now = sim.now();
                let update = SourceUpdate {
                    source: "sim".into(),
                    kind: crate::model::SourceKind::Simulated,
                    at: now,
                    result: Ok(sim.snapshot()),
                };
                store.apply(update, now);
                let fleet = store.fleet();
                let (found, plan) = advise_with_plan(fleet, &Context::new(&cfg, now));
                plans += plan.len();
                findings += found.len();
                let mut claims: Vec<&String> = plan.iter().flat_map(|p| &p.claims).collect();
                let n = claims.len();
                claims.sort();
                claims.dedup();
                assert_eq!(claims.len(), n, "seed {seed} hour {hour}: a claim held twice: {plan:#?}");
                for f in &found {
                    if let Some(a) = f.suggestion.action() {
                        assert!(
                            plan.iter().any(|p| p.action == *a),
                            "seed {seed} hour {hour}: outside the plan: {f:#?}"
                        );
                    }
                }
                for p in &plan {
                    match &p.action {
                        Action::Preempt { workload, .. } => {
                            let w = fleet.workload(workload);
                            assert!(w.is_some_and(|w| w.state == WorkloadState::Running), "{p:#?}");
                        }
                        Action::Drain { target } => {
                            let drained = fleet
                                .cards()
                                .filter(|(n, c)| format!("{}/{}", n.name, c.index) == *target || n.name == *target)
                                .all(|(_, c)| c.draining);
                            assert!(!drained, "a drain of a draining card: {p:#?}");
                        }
                        _ => {}
                    }
                }
            }
        }
        eprintln!("checked {plans} planned actions among {findings} findings");
        assert!(plans > 0);
    }
}

/// The plan as a fixed point: every action of it carried out on the simulated cluster (through
/// the runner's own plans, as `a` then `y` would), and the advice asked again, gives nothing
/// the plan caused (fragmentation on a card it laid out), no second action for a subject it
/// served, and no suggestion that is now a no-op. Over the demo at every third hour of a day,
/// for two seeds.
mod fixed_point {
    use std::time::Duration;

    use chrono::TimeZone;

    use crate::actions::run::Runner;
    use crate::actions::{Action, Op};
    use crate::advisor::{Kind, advise_with_plan};
    use crate::sources::SourceUpdate;
    use crate::sources::sim::{Sim, SimConfig};
    use crate::store::Store;

    fn observe(sim: &mut Sim, store: &mut Store) {
        let now = sim.now();
        let update = SourceUpdate {
            source: "sim".into(),
            kind: crate::model::SourceKind::Simulated,
            at: now,
            result: Ok(sim.snapshot()),
        };
        store.apply(update, now);
    }

    /// Carry `action` out as the runner plans it on the simulator; an error when the runner has
    /// nothing to do or refuses (which the plan must never ask for).
    pub(super) fn carry_out(sim: &mut Sim, store: &Store, runner: &Runner, action: &Action) -> Result<(), String> {
        let plan = runner.propose(action, store.fleet())?;
        if let Some(why) = &plan.nothing_to_do {
            return Err(format!("a no-op: {why}"));
        }
        if !plan.allowed() {
            return Err(format!("refused: {:?}", plan.blockers));
        }
        for s in &plan.steps {
            match &s.op {
                Op::Sim { op } => drop(sim.apply(op)?),
                Op::Wait { seconds, .. } => sim.advance(Duration::from_secs(*seconds)),
                other => return Err(format!("not a simulator step: {other:?}")),
            }
        }
        Ok(())
    }

    #[test]
    fn carrying_out_the_plan_leaves_nothing_it_caused() {
        let cfg = crate::config::Config::default();
        let runner = Runner::new(&cfg, crate::actions::execute::Env::default());
        let start = chrono::Utc.with_ymd_and_hms(2026, 3, 2, 0, 0, 0).single().unwrap_or_default();
        let (mut carried, mut asked) = (0usize, 0usize);
        for seed in [42, 7] {
            for hour in (0..24).step_by(3) {
                let mut sim = Sim::new(SimConfig::new(seed, start + chrono::Duration::hours(hour)));
                let mut store = Store::new();
                store.register("sim", crate::model::SourceKind::Simulated, Duration::from_secs(1));
                observe(&mut sim, &mut store);
                let cx = |now| crate::advisor::Context::new(&cfg, now);
                let (_, plan) = advise_with_plan(store.fleet(), &cx(sim.now()));
                asked += 1;
                for p in &plan {
                    let at = format!("seed {seed} hour {hour}: {:?} for {}", p.action, p.subject);
                    carry_out(&mut sim, &store, &runner, &p.action).unwrap_or_else(|e| panic!("{at}: {e}"));
                    carried += 1;
                }
                // Long enough for a checkpoint and a requeue, and for the queue to move.
                sim.advance(Duration::from_secs(60));
                observe(&mut sim, &mut store);
                let (after, again) = advise_with_plan(store.fleet(), &cx(sim.now()));
                let laid_out: Vec<String> = plan
                    .iter()
                    .filter_map(|p| match &p.action {
                        Action::Repartition { target, .. } => Some(target.clone()),
                        _ => None,
                    })
                    .collect();
                for f in &after {
                    assert!(
                        !(f.kind == Kind::Fragmentation && f.cards.iter().any(|c| laid_out.contains(&c.to_string()))),
                        "seed {seed} hour {hour}: the plan's layout is fragmentation: {f:#?}"
                    );
                }
                for p in &again {
                    // A subject the plan served gets no second action of the same kind.
                    assert!(
                        !plan.iter().any(|q| q.kind == p.kind && q.subject == p.subject && q.action != p.action),
                        "seed {seed} hour {hour}: a second action for {}: {:?} after {:?}",
                        p.subject,
                        p.action,
                        plan.iter().find(|q| q.subject == p.subject).map(|q| &q.action)
                    );
                    // Nothing it suggests now is a no-op.
                    let proposed = runner.propose(&p.action, store.fleet());
                    let noop = proposed.as_ref().ok().and_then(|x| x.nothing_to_do.clone());
                    assert!(noop.is_none(), "seed {seed} hour {hour}: {:?} is a no-op: {noop:?}", p.action);
                }
            }
        }
        eprintln!("carried out {carried} planned actions over {asked} fleets, advised again after each");
        assert!(carried > 0);
    }

    /// A day on the simulated cluster with an operator who carries out the whole plan every
    /// ten simulated minutes (the console at 600× advises about that often): every plan is
    /// one action per subject, none is refused or a no-op when carried out, and none is
    /// outside the plan.
    #[test]
    fn a_day_following_the_advice_every_ten_minutes() {
        let cfg = crate::config::Config::default();
        let runner = Runner::new(&cfg, crate::actions::execute::Env::default());
        let start = chrono::Utc.with_ymd_and_hms(2026, 3, 2, 0, 0, 0).single().unwrap_or_default();
        let mut sim = Sim::new(SimConfig::new(42, start));
        let mut store = Store::new();
        store.register("sim", crate::model::SourceKind::Simulated, Duration::from_secs(1));
        let (mut carried, mut findings) = (0usize, 0usize);
        for step in 0..24 * 6 {
            observe(&mut sim, &mut store);
            let (found, plan) = advise_with_plan(store.fleet(), &crate::advisor::Context::new(&cfg, sim.now()));
            findings += found.len();
            let mut claims: Vec<&String> = plan.iter().flat_map(|p| &p.claims).collect();
            let n = claims.len();
            claims.sort();
            claims.dedup();
            assert_eq!(claims.len(), n, "step {step}: a claim held twice: {plan:#?}");
            for f in &found {
                if let Some(a) = f.suggestion.action() {
                    assert!(plan.iter().any(|p| p.action == *a), "step {step}: outside the plan: {f:#?}");
                }
            }
            for p in &plan {
                carry_out(&mut sim, &store, &runner, &p.action)
                    .unwrap_or_else(|e| panic!("step {step}: {:?} for {}: {e}", p.action, p.subject));
                carried += 1;
            }
            sim.advance(Duration::from_secs(600));
        }
        eprintln!("a day: {carried} planned actions carried out, {findings} findings over 144 passes");
        assert!(carried > 0);
    }
}

/// Random fleets: the simulator at a random seed, size and hour; the plan holds each claim
/// once, every suggested action is the plan's, and carrying the plan out then advising again
/// gives no second action of a kind for a subject it served.
mod random_fleets {
    use std::time::Duration;

    use chrono::TimeZone;
    use proptest::prelude::*;

    use crate::actions::run::Runner;
    use crate::advisor::advise_with_plan;
    use crate::sources::SourceUpdate;
    use crate::sources::sim::{Sim, SimConfig};
    use crate::store::Store;

    fn observe(sim: &mut Sim, store: &mut Store) {
        let now = sim.now();
        let result = Ok(sim.snapshot());
        store.apply(
            SourceUpdate { source: "sim".into(), kind: crate::model::SourceKind::Simulated, at: now, result },
            now,
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        #[test]
        fn one_action_per_subject_and_a_fixed_point(seed in 0u64..100_000, hour in 0i64..24, nodes in 1u32..6, gpus in 1u32..9) {
            let cfg = crate::config::Config::default();
            let runner = Runner::new(&cfg, crate::actions::execute::Env::default());
            let start = chrono::Utc.with_ymd_and_hms(2026, 3, 2, 0, 0, 0).single().unwrap_or_default();
            let size = if seed % 2 == 0 { None } else { Some((nodes, gpus)) };
            let mut sim = Sim::new(SimConfig { size, ..SimConfig::new(seed, start + chrono::Duration::hours(hour)) });
            let mut store = Store::new();
            store.register("sim", crate::model::SourceKind::Simulated, Duration::from_secs(1));
            observe(&mut sim, &mut store);
            let cx = |now| crate::advisor::Context::new(&cfg, now);
            let (found, plan) = advise_with_plan(store.fleet(), &cx(sim.now()));
            let mut claims: Vec<&String> = plan.iter().flat_map(|p| &p.claims).collect();
            let n = claims.len();
            claims.sort();
            claims.dedup();
            prop_assert_eq!(claims.len(), n, "a claim held twice: {:#?}", plan);
            for f in &found {
                if let Some(a) = f.suggestion.action() {
                    prop_assert!(plan.iter().any(|p| p.action == *a), "outside the plan: {:#?}", f);
                }
            }
            for p in &plan {
                let r = super::fixed_point::carry_out(&mut sim, &store, &runner, &p.action);
                prop_assert!(r.is_ok(), "{:?} for {}: {:?}", p.action, p.subject, r);
            }
            sim.advance(Duration::from_secs(60));
            observe(&mut sim, &mut store);
            let (_, again) = advise_with_plan(store.fleet(), &cx(sim.now()));
            for p in &again {
                prop_assert!(
                    !plan.iter().any(|q| q.kind == p.kind && q.subject == p.subject && q.action != p.action),
                    "a second action for {}: {:?}", p.subject, p.action
                );
            }
        }
    }
}
