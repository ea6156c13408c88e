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
    let mut store = tessera::store::Store::new();
    store.register("sim", tessera::model::SourceKind::Simulated, Duration::from_secs(1));
    let update = tessera::sources::SourceUpdate {
        source: "sim".into(),
        kind: tessera::model::SourceKind::Simulated,
        at: t,
        result: Ok(sim.snapshot()),
    };
    c.bench_function("store_apply_4096_cards", |b| b.iter(|| store.apply(update.clone(), t)));
    c.bench_function("queue_summary_4096_cards", |b| b.iter(|| QueueSummary::compute(black_box(store.fleet()), t)));
    let cfg = tessera::config::Config::default();
    let cx = tessera::advisor::Context::new(&cfg, t);
    c.bench_function("advise_4096_cards", |b| b.iter(|| tessera::advisor::advise(black_box(store.fleet()), &cx)));
}

criterion_group!(model, benches);
criterion_main!(model);
