//! The invariants every fleet on screen holds, over random action sequences on the simulated
//! cluster, merged by the store as the console merges it: memory used never exceeds its total
//! (card, MIG instance, workload); a card counts as free only when it is usable; the queue,
//! the fleet's free counts and the filters agree on what is free.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use proptest::prelude::*;

use tessera::model::capacity::{Free, free_units};
use tessera::model::mig::catalog::model_key;
use tessera::model::{Fleet, SourceKind, WorkloadKind, WorkloadState, invariants};
use tessera::sources::SourceUpdate;
use tessera::sources::sim::{Sim, SimConfig, SimOp};
use tessera::store::Store;
use tessera::ui::filter::Filter;

fn start() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 14, 0, 0).single().unwrap_or_default()
}

/// The simulator's snapshot merged by the store. The snapshot itself must already keep the
/// invariants: the store would turn a broken value into unknown, which hides the bug.
fn merged(sim: &mut Sim, store: &mut Store) -> Fleet {
    let partial = sim.snapshot();
    let mut raw = Fleet { nodes: partial.nodes.clone(), workloads: partial.workloads.clone(), ..Fleet::default() };
    raw.fill_allocations();
    let broken = invariants::violations(&raw);
    assert!(broken.is_empty(), "the simulator reports: {}", broken.join("; "));
    let update = SourceUpdate { source: "sim".into(), kind: SourceKind::Simulated, at: sim.now(), result: Ok(partial) };
    store.apply(update, start());
    store.fleet().clone()
}

fn new_store() -> Store {
    let mut store = Store::new();
    store.register("sim", SourceKind::Simulated, Duration::from_secs(1));
    store
}

/// Everything the one definition of free capacity promises.
fn check(fleet: &Fleet) -> Result<(), String> {
    let broken = invariants::violations(fleet);
    if !broken.is_empty() {
        return Err(broken.join("\n"));
    }
    let free_filter = Filter::parse("free>0");
    let idle_filter = Filter::parse("idle");
    let mut whole: BTreeMap<String, u64> = BTreeMap::new();
    let mut replicas: u64 = 0;
    for (n, c) in fleet.cards() {
        // The oracle, written out here rather than through the code under test: a whole card
        // is free when its node takes work, it is not drained, not lost, has no fatal XID or
        // uncorrectable ECC error, and nobody holds it.
        let healthy = !c.health.lost
            && !c.health.last_xid.is_some_and(|x| [48, 79, 94, 95].contains(&x))
            && c.health.ecc_volatile_uncorrected.unwrap_or(0) == 0;
        let usable = n.schedulable && !c.draining && healthy;
        // A shared card is free while a replica is: replicas beyond the holders (one each).
        let shared = c.sharing.replicas.map(|r| u64::from(r).saturating_sub(c.workloads.len() as u64));
        let oracle = match shared {
            Some(left) => usable && left > 0,
            None => usable && c.workloads.is_empty() && c.processes.is_empty(),
        };
        if let Some(left) = shared.filter(|_| usable) {
            replicas += left;
        }
        let free = free_units(n, c) > 0;
        if !c.mig.enabled && free != oracle {
            return Err(format!("{}/{}: free_units says {free}, the rule says {oracle}", n.name, c.index));
        }
        if free_filter.matches(fleet, n, c) != free {
            return Err(format!("{}/{}: the free>0 filter disagrees with free_units", n.name, c.index));
        }
        if idle_filter.matches(fleet, n, c) && !(n.schedulable && !c.draining && healthy) {
            return Err(format!("{}/{}: an unusable card matches idle", n.name, c.index));
        }
        // The simulator hands shared cards out by replica only.
        if !c.mig.enabled && oracle && shared.is_none() {
            *whole.entry(model_key(&c.model)).or_default() += 1;
        }
    }
    let queue = Free::compute(fleet);
    if queue.whole != whole {
        return Err(format!("the queue counts {:?} free whole cards, the cards say {whole:?}", queue.whole));
    }
    let counted: u64 = queue.shared.values().sum();
    if counted != replicas {
        return Err(format!("the queue counts {counted} free replicas, the cards say {replicas}"));
    }
    Ok(())
}

#[test]
fn a_preempted_job_restarts_within_its_memory() {
    let mut sim = Sim::new(SimConfig::new(42, start()));
    let mut store = new_store();
    let fleet = merged(&mut sim, &mut store);
    let job = fleet
        .workloads
        .iter()
        // Two cards: the waiting 4-GPU inference server (higher priority) would take four.
        .filter(|w| w.kind == WorkloadKind::Training && w.state == WorkloadState::Running && w.cards.len() == 2)
        // Not the one on the card with ECC errors: nothing restarts on a failing card.
        .find(|w| w.cards.iter().all(|r| fleet.card(r).is_some_and(|c| c.health.fault().is_none())))
        .map(|w| w.id.clone())
        .unwrap_or_else(|| panic!("no multi-GPU training job in the default cluster"));
    for op in [SimOp::Checkpoint { workload: job.clone() }, SimOp::Requeue { workload: job.clone() }] {
        sim.apply(&op).unwrap_or_else(|e| panic!("{e}"));
    }
    // It restarts when its cards are free again: on the same cards, at once.
    let mut restarted = false;
    for _ in 0..120 {
        sim.advance(Duration::from_secs(30));
        let fleet = merged(&mut sim, &mut store);
        check(&fleet).unwrap_or_else(|e| panic!("{e}"));
        let w = fleet.workload(&job);
        if w.is_some_and(|w| w.state == WorkloadState::Running) {
            let w = w.unwrap_or_else(|| unreachable!());
            assert!(
                w.memory_used_mib <= w.request.gpu_memory_mib,
                "{:?} of {:?}",
                w.memory_used_mib,
                w.request.gpu_memory_mib
            );
            assert!(w.memory_used_mib.is_some(), "the restarted job's memory is known");
            restarted = true;
            break;
        }
    }
    assert!(restarted, "{job} never restarted");
}

#[test]
fn the_dead_card_is_not_free() {
    let mut sim = Sim::new(SimConfig::new(42, start()));
    let fleet = merged(&mut sim, &mut new_store());
    let (n, c) = fleet.cards().find(|(_, c)| c.health.last_xid == Some(79)).unwrap_or_else(|| panic!("no XID 79 card"));
    assert_eq!(free_units(n, c), 0);
    assert!(c.health.lost, "XID 79: the card fell off the bus");
    assert_eq!((c.temperature_c, c.power_w, c.utilization_pct), (None, None, None), "nothing reports a lost card");
    assert!(!Filter::parse("idle").matches(&fleet, n, c));
    check(&fleet).unwrap_or_else(|e| panic!("{e}"));
    // Undrained (forced), it is still not free: it is dead, not drained.
    let (node, index) = (n.name.clone(), c.index);
    let mut store = new_store();
    sim.apply(&SimOp::Undrain { node: node.clone(), index }).unwrap_or_else(|e| panic!("{e}"));
    let fleet = merged(&mut sim, &mut store);
    let (n, c) = fleet.cards().find(|(n, c)| n.name == node && c.index == index).unwrap_or_else(|| panic!("gone"));
    assert!(!c.draining);
    assert_eq!(free_units(n, c), 0);
    check(&fleet).unwrap_or_else(|e| panic!("{e}"));
}

#[derive(Debug, Clone)]
enum Step {
    Drain(usize),
    Undrain(usize),
    Repartition(usize, usize),
    Preempt(usize),
    Wait(u64),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let one = prop_oneof![
        (0..64usize).prop_map(Step::Drain),
        (0..64usize).prop_map(Step::Undrain),
        (0..64usize, 0..32usize).prop_map(|(c, l)| Step::Repartition(c, l)),
        (0..64usize).prop_map(Step::Preempt),
        (5..3600u64).prop_map(Step::Wait),
    ];
    proptest::collection::vec(one, 1..24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever the operator does, in whatever order, the merged fleet keeps its invariants.
    #[test]
    fn invariants_hold_after_any_actions(seq in steps()) {
        let mut sim = Sim::new(SimConfig::new(7, start()));
        let mut store = new_store();
        let mut fleet = merged(&mut sim, &mut store);
        for step in seq {
            let cards: Vec<(String, u32, String)> =
                fleet.cards().map(|(n, c)| (n.name.clone(), c.index, c.model.clone())).collect();
            let card = |i: usize| cards[i % cards.len()].clone();
            let op = match step {
                Step::Drain(i) => { let (node, index, _) = card(i); Some(SimOp::Drain { node, index }) }
                Step::Undrain(i) => { let (node, index, _) = card(i); Some(SimOp::Undrain { node, index }) }
                Step::Repartition(i, l) => {
                    let (node, index, model) = card(i);
                    tessera::model::mig::lookup(&model).map(|m| {
                        let all = tessera::model::mig::enumerate(m);
                        let layout = all.get(l % (all.len() + 1)).map_or_else(|| "whole".to_string(), |p| {
                            p.iter().map(|x| format!("{}@{}", x.profile, x.start)).collect::<Vec<_>>().join(",")
                        });
                        SimOp::Repartition { node, index, layout }
                    })
                }
                Step::Preempt(i) => {
                    let running: Vec<String> =
                        fleet.workloads.iter().filter(|w| w.state.is_active()).map(|w| w.id.clone()).collect();
                    running.get(i % running.len().max(1)).map(|id| SimOp::Requeue { workload: id.clone() })
                }
                Step::Wait(s) => {
                    sim.advance(Duration::from_secs(s));
                    None
                }
            };
            if let Some(op) = op {
                // Refusals (a busy card) are answers, not failures.
                let _ = sim.apply(&op);
            }
            fleet = merged(&mut sim, &mut store);
            prop_assert!(check(&fleet).is_ok(), "{:?}", check(&fleet));
        }
    }
}
