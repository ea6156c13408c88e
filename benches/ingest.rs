//! Ingest throughput: dcgm-exporter text for 512 nodes × 8 GPUs (some MIG) through tessera's
//! parser and mapping, against prometheus-parse alone on the same text.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tessera::sources::dcgm::{NodeName, generate, map};
use tessera::sources::exposition::parse;

fn benches(c: &mut Criterion) {
    let text = generate(512, 8, 4);
    let samples = parse(&text, |_| {}).samples;
    eprintln!("ingest bench: {:.1} MB, {samples} samples", text.len() as f64 / 1e6);
    let mut g = c.benchmark_group("ingest_512x8");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("tessera_parse", |b| b.iter(|| black_box(parse(&text, |s| drop(black_box(s))))));
    g.bench_function("tessera_parse_and_map", |b| b.iter(|| black_box(map(&text, &NodeName::Label))));
    g.bench_function("prometheus_parse_crate", |b| {
        b.iter(|| {
            let lines = text.lines().map(|l| Ok(l.to_string()));
            black_box(prometheus_parse::Scrape::parse(lines).map(|s| s.samples.len()).unwrap_or(0))
        })
    });
    g.finish();
}

criterion_group!(ingest, benches);
criterion_main!(ingest);
