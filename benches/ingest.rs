//! Ingest throughput: dcgm-exporter text for 512 nodes × 8 GPUs (some MIG) through tessera's
//! parser and mapping, against prometheus-parse alone on the same text; and the same cards as
//! Prometheus would answer them (the default query's families, behind one `instance`), from
//! the federation endpoint and as an instant query; and one all-smi answer (8 GPUs), as
//! `scripts/allsmi-serve.py` serves it to the console 64 times a second in perf-check's
//! `allsmi64`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tessera::config::ScrapeNode;
use tessera::sources::dcgm::generate;
use tessera::sources::exposition::parse;
use tessera::sources::prometheus::{to_partial_from_api, to_partial_from_federation};
use tessera::sources::scrape::map;
use tessera::sources::series::NodeName;

/// The families `prometheus::DEFAULT_QUERY` selects.
fn selected(name: &str) -> bool {
    const NAMES: [&str; 14] = [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_FB_TOTAL",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_POWER_MGMT_LIMIT",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "dcgm_",
    ];
    NAMES.iter().any(|n| if n.ends_with('_') { name.starts_with(n) } else { name == *n })
}

/// `text`'s selected series as Prometheus serves them after scraping each node's exporter:
/// with `instance` (the node's) and `job`, as federation text (with timestamps) and as an
/// instant-vector answer.
fn as_prometheus(text: &str) -> (String, String) {
    use std::fmt::Write as _;
    let (mut fed, mut series) = (String::new(), Vec::new());
    parse(text, |s| {
        if !selected(s.name) {
            return;
        }
        let mut labels: Vec<(String, String)> = s.labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let host = s.label("Hostname").unwrap_or("unknown");
        labels.push(("instance".into(), format!("{host}:9400")));
        labels.push(("job".into(), "big".into()));
        let written: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
        let _ = writeln!(fed, "{}{{{}}} {} 1700000000000", s.name, written.join(","), s.value);
        let mut metric = serde_json::Map::new();
        metric.insert("__name__".into(), s.name.into());
        for (k, v) in labels {
            metric.insert(k, v.into());
        }
        series.push(serde_json::json!({"metric": metric, "value": [1_700_000_000.0, s.value.to_string()]}));
    });
    let answer = serde_json::json!({"status": "success", "data": {"resultType": "vector", "result": series}});
    (fed, answer.to_string())
}

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
    g.bench_function("scrape_to_partial", |b| {
        b.iter(|| black_box(tessera::sources::scrape::to_partial(&text, &NodeName::Label)))
    });
    g.finish();
    let (fed, answer) = as_prometheus(&text);
    eprintln!(
        "as Prometheus answers: federation {:.1} MB, instant query {:.1} MB",
        fed.len() as f64 / 1e6,
        answer.len() as f64 / 1e6
    );
    let mut g = c.benchmark_group("prometheus_4096");
    g.sample_size(10);
    g.bench_function("federation_to_partial", |b| {
        b.iter(|| black_box(to_partial_from_federation(&fed, &[], ScrapeNode::Target).map(|p| p.nodes.len())))
    });
    g.bench_function("instant_query_to_partial", |b| {
        b.iter(|| black_box(to_partial_from_api(&answer, ScrapeNode::Target).map(|p| p.nodes.len())))
    });
    g.finish();
    let one = allsmi_answer();
    let mut g = c.benchmark_group("allsmi_one_answer");
    g.throughput(Throughput::Bytes(one.len() as u64));
    g.bench_function("tessera_parse", |b| b.iter(|| black_box(parse(&one, |s| drop(black_box(s))))));
    g.bench_function("scrape_to_partial", |b| {
        b.iter(|| black_box(tessera::sources::scrape::to_partial(&one, &NodeName::Label)))
    });
    g.finish();
}

/// all-smi 0.25's mock answer without its MIG rows, MIG mode off: what
/// `scripts/allsmi-serve.py` serves (its values, not moved).
fn allsmi_answer() -> String {
    let fixture = include_str!("../tests/fixtures/allsmi/mock-0.25.0-mig.prom");
    let mut out = String::new();
    for line in fixture.lines().filter(|l| !l.contains("all_smi_mig_instance_")) {
        match line.strip_prefix("all_smi_gpu_mig_mode").and_then(|rest| rest.rsplit_once(' ')) {
            Some((head, _)) => out.push_str(&format!("all_smi_gpu_mig_mode{head} 0")),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

criterion_group!(ingest, benches);
criterion_main!(ingest);
