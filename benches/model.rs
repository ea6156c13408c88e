//! Costs of the model and simulator: layout enumeration, a simulated minute, a queue summary,
//! merging a 4096-card update, and the advisor over it.

use std::hint::black_box;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use criterion::{Criterion, criterion_group, criterion_main};
use tessera::model::QueueSummary;
use tessera::model::mig::{enumerate, lookup};
use tessera::sources::sim::{Sim, SimConfig};

fn benches(c: &mut Criterion) {
    let Some(h100) = lookup("NVIDIA H100 80GB HBM3") else { return };
    c.bench_function("enumerate_h100_layouts", |b| b.iter(|| enumerate(black_box(h100))));
    let t = Utc.with_ymd_and_hms(2026, 3, 2, 14, 0, 0).single().unwrap_or_default();
    let mut sim = Sim::new(SimConfig { size: Some((512, 8)), ..SimConfig::new(1, t) });
    c.bench_function("sim_4096_cards_advance_1s_and_snapshot", |b| {
        b.iter(|| {
            sim.advance(Duration::from_secs(1));
            black_box(sim.snapshot())
        })
    });
    let (mut store, update) = sim_store(&mut sim, t);
    c.bench_function("store_apply_4096_cards", |b| b.iter(|| store.apply(update.clone(), t)));
    // The benches below read the merged fleet, whether or not the one above ran.
    store.apply(update.clone(), t);
    c.bench_function("queue_summary_4096_cards", |b| b.iter(|| QueueSummary::compute(black_box(store.fleet()), t)));
    let cfg = tessera::config::Config::default();
    let cx = tessera::advisor::Context::new(&cfg, t);
    c.bench_function("advise_4096_cards", |b| b.iter(|| tessera::advisor::advise(black_box(store.fleet()), &cx)));
    let found = tessera::advisor::advise(store.fleet(), &cx);
    let mut kinds = std::collections::BTreeMap::new();
    for f in &found {
        *kinds.entry(f.kind.as_str()).or_insert(0) += 1;
    }
    eprintln!("advise: {} findings {kinds:?}", found.len());
    c.bench_function("plan_4096_cards", |b| b.iter(|| tessera::advisor::planner::plan(black_box(store.fleet()), t)));
    // The console's banner each advice: the example schedule's next hour over the H100 cards.
    let cfg_default = tessera::config::Config::default();
    if let Some((schedules, _)) = tessera::schedule::demo::effective(&cfg_default, true) {
        c.bench_function("schedule_banner_4096_cards", |b| {
            b.iter(|| {
                let tl =
                    tessera::schedule::timelines(&schedules, black_box(store.fleet()), t, Duration::from_secs(1800), 1);
                tessera::schedule::group::banner(&tl, t)
            })
        });
    }
    // The schedule suggestion over a measured day (the default cluster's, replayed) on 4096 cards.
    let demand = Sim::past_day_demand(&SimConfig::new(1, t));
    c.bench_function("schedule_suggest_4096_cards", |b| {
        b.iter(|| tessera::advisor::schedule::suggest(black_box(store.fleet()), &demand, &|_, _| false))
    });
    // The planner's worst case in the issue: 500 waiting on 4096 cards, a quarter of them
    // emptied and made whole, so that MIG work needs a repartition.
    let mut fleet = store.fleet().clone();
    eprintln!("fleet: {} cards, {} workloads", fleet.cards().count(), fleet.workloads.len());
    let profiles = ["1g.10gb", "2g.20gb", "3g.40gb", "1g.18gb", "2g.35gb", "3g.71gb", "4g.40gb", "1g.20gb"];
    for (i, card) in fleet.nodes.iter_mut().flat_map(|n| n.cards.iter_mut()).enumerate() {
        if i % 4 == 0 {
            card.workloads.clear();
            card.processes.clear();
            card.utilization_pct = Some(0.0);
            card.memory_used_mib = Some(0);
            // Whole and empty: MIG work needs a repartition here.
            card.mig = tessera::model::MigState::default();
        }
    }
    fleet.workloads.retain(|w| w.state != tessera::model::WorkloadState::Pending);
    for i in 0..500 {
        let mut w = tessera::model::Workload::new(
            format!("bench:{i}"),
            format!("bench-{i}"),
            tessera::model::WorkloadKind::Inference,
            tessera::model::WorkloadState::Pending,
        );
        w.request.gpus = Some(1);
        w.request.mig_profile = (i % 5 != 0).then(|| profiles[i % profiles.len()].to_string());
        w.priority = Some([10, 50, 100][i % 3]);
        w.submitted_at = Some(t - chrono::Duration::minutes((i % 120) as i64));
        fleet.workloads.push(w);
    }
    fleet.index_workloads();
    c.bench_function("plan_500_pending_4096_cards", |b| {
        b.iter(|| tessera::advisor::planner::plan(black_box(&fleet), t))
    });
    let served = tessera::advisor::planner::plan(&fleet, t);
    eprintln!(
        "plan: {} workloads, {} changes, {} served ({} without a change)",
        fleet.workloads.len(),
        served.changes.len(),
        served.served.len(),
        served.served_now.len()
    );
    big(c, t);
}

/// 32,768 cards (`--demo-size 4096x8`): the simulator's start, one of its five-second steps
/// with the snapshot sent after it, one merge of that snapshot, one advice.
fn big(c: &mut Criterion, t: chrono::DateTime<Utc>) {
    let began = std::time::Instant::now();
    let mut sim = Sim::new(SimConfig { size: Some((4096, 8)), ..SimConfig::new(1, t) });
    eprintln!("sim start, 32768 cards (populate + an hour of warm-up steps): {:?}", began.elapsed());
    c.bench_function("sim_32768_cards_step_and_snapshot", |b| {
        b.iter(|| {
            sim.advance(Duration::from_secs(5));
            black_box(sim.snapshot())
        })
    });
    let (mut store, update) = sim_store(&mut sim, t);
    c.bench_function("store_apply_32768_cards", |b| {
        b.iter_batched(|| update.clone(), |u| store.apply(u, t), criterion::BatchSize::LargeInput)
    });
    store.apply(update.clone(), t);
    let cfg = tessera::config::Config::default();
    let cx = tessera::advisor::Context::new(&cfg, t);
    c.bench_function("advise_32768_cards", |b| b.iter(|| tessera::advisor::advise(black_box(store.fleet()), &cx)));
}

/// A store with the simulator registered as its one source, and the simulator's update.
fn sim_store(sim: &mut Sim, t: chrono::DateTime<Utc>) -> (tessera::store::Store, tessera::sources::SourceUpdate) {
    let mut store = tessera::store::Store::new();
    store.register("sim", tessera::model::SourceKind::Simulated, Duration::from_secs(1));
    let update = tessera::sources::SourceUpdate {
        source: "sim".into(),
        kind: tessera::model::SourceKind::Simulated,
        at: t,
        result: Ok(sim.snapshot()),
    };
    (store, update)
}

criterion_group!(model, benches);
criterion_main!(model);
