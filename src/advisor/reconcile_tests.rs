//! The plan's tests: conflicts settled by rank on built findings, and on the simulated
//! cluster one plan at every third hour, the plan carried out and advised again (a fixed
//! point), a day following the advice, and random fleets.

use super::*;
use crate::advisor::Severity;
use crate::model::{Card, CardRef, Node};

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
            Some(Action::Drain { target: "n/2".into(), evict: false }),
            &["n/2"],
        ),
        // Words claim nothing.
        finding(Kind::ScaleIn, Subject::Pool { model: "A100-80GB".into() }, None, &[]),
    ];
    let plan = reconcile(&Fleet::default(), &mut f);
    let actions: Vec<(Kind, String)> = plan.iter().map(|p| (p.kind, p.action.to_string())).collect();
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
            Some(Action::Drain { target: "s/2".into(), evict: false }),
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

/// The plan on the simulated cluster: at every third hour of a day, carried out and advised
/// again (a fixed point), a day following it every ten minutes, and random fleets.
mod on_the_simulator {
    use std::time::Duration;

    use chrono::{DateTime, TimeZone, Utc};
    use proptest::prelude::*;

    use crate::act::{Action, Op};
    use crate::actions::run::Runner;
    use crate::advisor::reconcile::Planned;
    use crate::advisor::{Context, Finding, Kind, advise_with_plan};
    use crate::sources::SourceUpdate;
    use crate::sources::sim::{Sim, SimConfig};
    use crate::store::Store;

    fn midnight() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 2, 0, 0, 0).single().unwrap_or_default()
    }

    /// The simulated cluster from `start`, and a store that has seen it.
    fn simulated(seed: u64, start: DateTime<Utc>, size: Option<(u32, u32)>) -> (Sim, Store) {
        let mut sim = Sim::new(SimConfig { size, ..SimConfig::new(seed, start) });
        let mut store = Store::new();
        store.register("sim", crate::model::SourceKind::Simulated, Duration::from_secs(1));
        observe(&mut sim, &mut store);
        (sim, store)
    }

    fn observe(sim: &mut Sim, store: &mut Store) {
        let now = sim.now();
        let result = Ok(sim.snapshot());
        store.apply(
            SourceUpdate { source: "sim".into(), kind: crate::model::SourceKind::Simulated, at: now, result },
            now,
        );
    }

    fn advise(store: &Store, now: DateTime<Utc>) -> (Vec<Finding>, Vec<Planned>) {
        let cfg = crate::config::Config::default();
        advise_with_plan(store.fleet(), &Context::new(&cfg, now))
    }

    fn runner() -> Runner {
        Runner::new(&crate::config::Config::default(), crate::actions::Env::default())
    }

    /// One plan: no claim held by two actions, every action a finding suggests is the plan's,
    /// and none is a no-op the runner would skip (a drain of a drained card, a layout the card
    /// has) or one its guards refuse.
    fn one_plan(store: &Store, runner: &Runner, found: &[Finding], plan: &[Planned]) -> Result<(), String> {
        let mut claims: Vec<&String> = plan.iter().flat_map(|p| &p.claims).collect();
        let n = claims.len();
        claims.sort();
        claims.dedup();
        if claims.len() != n {
            return Err(format!("a claim held twice: {plan:#?}"));
        }
        if let Some(f) =
            found.iter().find(|f| f.suggestion.action().is_some_and(|a| !plan.iter().any(|p| p.action == *a)))
        {
            return Err(format!("outside the plan: {f:#?}"));
        }
        for p in plan {
            let proposed = runner.propose(&p.action, store.fleet()).map_err(|e| e.to_string())?;
            if let Some(why) = proposed.nothing_to_do {
                return Err(format!("{:?} is a no-op: {why}", p.action));
            }
            if !proposed.allowed() {
                return Err(format!("{:?} is refused: {:?}", p.action, proposed.blockers));
            }
        }
        Ok(())
    }

    /// Carry `action` out as the runner plans it on the simulator, on the fleet as it is now
    /// (an earlier action's waits move the simulated clock); an error when the runner has
    /// nothing to do or refuses (which the plan must never ask for). A preemption of work that
    /// finished meanwhile, or during its checkpoint, is overtaken by time, not an error:
    /// `Ok(false)`.
    fn carry_out(sim: &mut Sim, store: &mut Store, runner: &Runner, action: &Action) -> Result<bool, String> {
        observe(sim, store);
        if let Action::Preempt { workload, .. } = action
            && store.fleet().workload(workload).is_none_or(|w| !w.state.is_active())
        {
            return Ok(false);
        }
        let plan = runner.propose(action, store.fleet()).map_err(|e| e.to_string())?;
        if let Some(why) = &plan.nothing_to_do {
            return Err(format!("a no-op: {why}"));
        }
        if !plan.allowed() {
            return Err(format!("refused: {:?}", plan.blockers));
        }
        for s in &plan.steps {
            match &s.op {
                // A job that ended during its own checkpoint wait is overtaken by time.
                Op::Sim { op } => match sim.apply(op) {
                    Err(e) if e.to_string().ends_with("no longer exists") => return Ok(false),
                    r => drop(r.map_err(|e| e.to_string())?),
                },
                Op::Wait { seconds, .. } => sim.advance(Duration::from_secs(*seconds)),
                other => return Err(format!("not a simulator step: {other:?}")),
            }
        }
        Ok(true)
    }

    /// After `plan` was carried out: nothing it caused (fragmentation on a card it laid out),
    /// and no second action of a kind for a subject it served.
    fn nothing_caused(plan: &[Planned], after: &[Finding], again: &[Planned]) -> Result<(), String> {
        let laid_out: Vec<&String> = plan
            .iter()
            .filter_map(|p| match &p.action {
                Action::Repartition { target, .. } => Some(target),
                _ => None,
            })
            .collect();
        let caused =
            |f: &&Finding| f.kind == Kind::Fragmentation && f.cards.iter().any(|c| laid_out.contains(&&c.to_string()));
        if let Some(f) = after.iter().find(caused) {
            return Err(format!("the plan's layout is fragmentation: {f:#?}"));
        }
        for p in again {
            if let Some(q) = plan.iter().find(|q| q.kind == p.kind && q.subject == p.subject && q.action != p.action) {
                return Err(format!("a second action for {}: {:?} after {:?}", p.subject, p.action, q.action));
            }
        }
        Ok(())
    }

    #[test]
    fn one_plan_at_every_third_hour_of_a_day() {
        let runner = runner();
        let (mut plans, mut findings) = (0usize, 0usize);
        for seed in [42, 7] {
            let (mut sim, mut store) = simulated(seed, midnight(), None);
            for hour in (0..24).step_by(3) {
                if hour > 0 {
                    for _ in 0..3 * 6 {
                        sim.advance(Duration::from_secs(600));
                    }
                    observe(&mut sim, &mut store);
                }
                let (found, plan) = advise(&store, sim.now());
                plans += plan.len();
                findings += found.len();
                one_plan(&store, &runner, &found, &plan).unwrap_or_else(|e| panic!("seed {seed} hour {hour}: {e}"));
            }
        }
        eprintln!("checked {plans} planned actions among {findings} findings");
        assert!(plans > 0);
    }

    /// The plan as a fixed point: every action of it carried out (through the runner's own
    /// plans, as `a` then `y` would) and the advice asked again, over the demo at every third
    /// hour of a day, for two seeds.
    #[test]
    fn carrying_out_the_plan_leaves_nothing_it_caused() {
        let runner = runner();
        let (mut carried, mut asked) = (0usize, 0usize);
        for seed in [42, 7] {
            for hour in (0..24).step_by(3) {
                let (mut sim, mut store) = simulated(seed, midnight() + chrono::Duration::hours(hour), None);
                let (_, plan) = advise(&store, sim.now());
                asked += 1;
                for p in &plan {
                    let done = carry_out(&mut sim, &mut store, &runner, &p.action)
                        .unwrap_or_else(|e| panic!("seed {seed} hour {hour}: {:?} for {}: {e}", p.action, p.subject));
                    carried += usize::from(done);
                }
                // Long enough for a checkpoint and a requeue, and for the queue to move.
                sim.advance(Duration::from_secs(60));
                observe(&mut sim, &mut store);
                let (after, again) = advise(&store, sim.now());
                nothing_caused(&plan, &after, &again).unwrap_or_else(|e| panic!("seed {seed} hour {hour}: {e}"));
                one_plan(&store, &runner, &after, &again).unwrap_or_else(|e| panic!("seed {seed} hour {hour}: {e}"));
            }
        }
        eprintln!("carried out {carried} planned actions over {asked} fleets, advised again after each");
        assert!(carried > 0);
    }

    /// A day with an operator who carries out the whole plan every ten simulated minutes (the
    /// console at 600× advises about that often).
    #[test]
    fn a_day_following_the_advice_every_ten_minutes() {
        let runner = runner();
        let (mut sim, mut store) = simulated(42, midnight(), None);
        let (mut carried, mut findings) = (0usize, 0usize);
        for step in 0..24 * 6 {
            observe(&mut sim, &mut store);
            let (found, plan) = advise(&store, sim.now());
            findings += found.len();
            one_plan(&store, &runner, &found, &plan).unwrap_or_else(|e| panic!("step {step}: {e}"));
            for p in &plan {
                let done = carry_out(&mut sim, &mut store, &runner, &p.action)
                    .unwrap_or_else(|e| panic!("step {step}: {:?} for {}: {e}", p.action, p.subject));
                carried += usize::from(done);
            }
            sim.advance(Duration::from_secs(600));
        }
        eprintln!("a day: {carried} planned actions carried out, {findings} findings over 144 passes");
        assert!(carried > 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        /// Random fleets: the simulator at a random seed, size and hour.
        #[test]
        fn random_fleets_get_one_plan_and_a_fixed_point(seed in 0u64..100_000, hour in 0i64..24, nodes in 1u32..6, gpus in 1u32..9) {
            let runner = runner();
            let size = if seed % 2 == 0 { None } else { Some((nodes, gpus)) };
            let (mut sim, mut store) = simulated(seed, midnight() + chrono::Duration::hours(hour), size);
            let (found, plan) = advise(&store, sim.now());
            let checked = one_plan(&store, &runner, &found, &plan);
            prop_assert!(checked.is_ok(), "{:?}", checked);
            for p in &plan {
                let r = carry_out(&mut sim, &mut store, &runner, &p.action);
                prop_assert!(r.is_ok(), "{:?} for {}: {:?}", p.action, p.subject, r);
            }
            sim.advance(Duration::from_secs(60));
            observe(&mut sim, &mut store);
            let (after, again) = advise(&store, sim.now());
            let caused = nothing_caused(&plan, &after, &again);
            prop_assert!(caused.is_ok(), "{:?}", caused);
        }
    }
}
