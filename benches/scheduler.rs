//! Cost of reading a large Slurm cluster: 10,000 jobs (half running on 1,250 eight-GPU nodes,
//! half pending) in the 22.05 dialect, parsed from text and mapped, plus the node list.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use tessera::model::KindRules;
use tessera::sources::slurm::{jobs, nodes};

fn squeue(n: usize) -> String {
    let jobs: Vec<Value> = (0..n)
        .map(|i| {
            let running = i % 2 == 0;
            let node = format!("gpu{:04}", (i / 4) % 1250);
            json!({
                "job_id": 1000 + i, "name": format!("job-{i}"), "user_name": "ana",
                "partition": if i % 3 == 0 { "inference" } else { "training" }, "qos": "",
                "job_state": if running { "RUNNING" } else { "PENDING" },
                "state_reason": if running { "None" } else { "Resources" },
                "priority": 100 + i, "submit_time": 1_795_979_454, "start_time": 1_795_979_500,
                "nodes": if running { node.clone() } else { String::new() },
                "tres_per_node": "gres:gpu:h100:2",
                "gres_detail": if running { vec![format!("gpu:h100:2(IDX:{}-{})", (i / 2) % 4 * 2, (i / 2) % 4 * 2 + 1)] } else { vec![] },
                "node_count": 1,
            })
        })
        .collect();
    json!({"meta": {"plugin": {"type": "openapi/v0.0.38"}}, "errors": [], "jobs": jobs}).to_string()
}

fn sinfo(n: usize) -> String {
    let nodes: Vec<Value> = (0..n)
        .map(|i| {
            json!({"name": format!("gpu{i:04}"), "state": "mixed", "state_flags": [], "reason": "",
                "gres": "gpu:h100:8(S:0-1)", "gres_used": "gpu:h100:8(IDX:0-7)"})
        })
        .collect();
    json!({"meta": {"plugin": {"type": "openapi/v0.0.38"}}, "errors": [], "nodes": nodes}).to_string()
}

fn benches(c: &mut Criterion) {
    let (jobs_text, nodes_text) = (squeue(10_000), sinfo(1_250));
    let kinds = KindRules::default();
    c.bench_function("slurm_10000_jobs_parse_and_map", |b| {
        b.iter(|| {
            let doc: Value = serde_json::from_str(black_box(&jobs_text)).unwrap_or(Value::Null);
            black_box(jobs::map(&doc, &kinds).workloads.len())
        })
    });
    c.bench_function("slurm_1250_nodes_parse_and_map", |b| {
        b.iter(|| {
            let doc: Value = serde_json::from_str(black_box(&nodes_text)).unwrap_or(Value::Null);
            black_box(nodes::map(&doc).0.len())
        })
    });
    println!("squeue text {} bytes, sinfo text {} bytes", jobs_text.len(), nodes_text.len());
}

criterion_group!(scheduler, benches);
criterion_main!(scheduler);
