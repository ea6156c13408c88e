//! The fuzz campaign's inputs, in CI: every door of `tessera::inputs` fed arbitrary bytes,
//! mutations of the real samples in `tests/fixtures` (cut, spliced, with hostile tokens put
//! in) and grammar-made documents (exposition lines, Slurm and Kubernetes objects, config
//! keys, layout strings, demand CSV rows). Nothing may panic, and what comes out keeps the
//! invariants (`inputs::check`, `inputs::check_demand`). `TESSERA_INPUT_CASES` scales the
//! cases per property (default 256; the figures in docs/reliability.md). `scripts/fuzz.sh`
//! runs the same doors under libFuzzer.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tessera::inputs;

fn cases() -> u32 {
    std::env::var("TESSERA_INPUT_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

fn fixtures(dir: &str, ext: &[&str]) -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(dir);
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if ext.iter().any(|x| p.to_string_lossy().ends_with(x)) {
                out.extend(std::fs::read(&p).ok().filter(|b| b.len() < 1 << 20));
            }
        }
    }
    assert!(!out.is_empty(), "no fixtures in {dir}");
    out
}

/// The fixtures of one kind, read once per test binary.
fn cached(slot: usize, load: impl FnOnce() -> Vec<Vec<u8>>) -> &'static [Vec<u8>] {
    static SLOTS: [std::sync::OnceLock<Vec<Vec<u8>>>; 4] = [
        std::sync::OnceLock::new(),
        std::sync::OnceLock::new(),
        std::sync::OnceLock::new(),
        std::sync::OnceLock::new(),
    ];
    SLOTS[slot].get_or_init(load)
}

/// Tokens that have broken parsers before: quotes, brackets, numbers past every range, NaN,
/// escapes, a terminal escape, huge repetitions are made by the splicing.
const HOSTILE: &[&str] = &[
    "\"",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\n",
    "\\",
    "\u{1b}]0;x\u{7}",
    "NaN",
    "+Inf",
    "-Inf",
    "-1",
    "1e309",
    "18446744073709551616",
    "-9223372036854775809",
    "null",
    "[]",
    "{}",
    "0x10",
    "\u{0}",
    "é",
    "全",
    "\"\\u0000\"",
    "4294967296",
    "2147483648",
    "99999999999d",
    "@",
    "=",
    "#",
    "# TYPE x counter\n",
    "}{",
    "\r\n",
];

#[derive(Debug, Clone)]
enum Op {
    Cut(usize, usize),
    Splice(usize, usize, usize),
    Put(usize, usize),
    Truncate(usize),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        (any::<usize>(), 0usize..64).prop_map(|(a, n)| Op::Cut(a, n)),
        (any::<usize>(), 0usize..256, any::<usize>()).prop_map(|(a, n, b)| Op::Splice(a, n, b)),
        (any::<usize>(), 0usize..HOSTILE.len()).prop_map(|(a, t)| Op::Put(a, t)),
        any::<usize>().prop_map(Op::Truncate),
    ];
    proptest::collection::vec(op, 1..12)
}

fn mutate(base: &[u8], ops: &[Op]) -> Vec<u8> {
    let mut v = base.to_vec();
    for op in ops {
        let at = |x: usize, v: &Vec<u8>| if v.is_empty() { 0 } else { x % (v.len() + 1) };
        match *op {
            Op::Cut(a, n) => {
                let a = at(a, &v);
                let end = (a + n).min(v.len());
                v.drain(a..end);
            }
            Op::Splice(a, n, b) => {
                let a = at(a, &v);
                let piece: Vec<u8> = v[a..(a + n).min(v.len())].to_vec();
                let b = at(b, &v);
                v.splice(b..b, piece);
            }
            Op::Put(a, t) => {
                let a = at(a, &v);
                v.splice(a..a, HOSTILE[t].bytes());
            }
            Op::Truncate(a) => {
                let a = at(a, &v);
                v.truncate(a);
            }
        }
    }
    v
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() }
}

fn checked(seen: &inputs::Seen) -> Result<(), TestCaseError> {
    inputs::check(seen).map_err(|e| TestCaseError::fail(e.to_string()))
}

/// dcgm-exporter and all-smi lines from a grammar: their fields with the labels the mapping
/// reads (both exporters' labels on both, as a hostile endpoint might send), values from every
/// corner (negative, huge, NaN, not numbers).
fn exposition_doc() -> impl Strategy<Value = String> {
    let metric = prop::sample::select(vec![
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_SM_CLOCK",
        "all_smi_gpu_utilization",
        "all_smi_gpu_memory_used_bytes",
        "all_smi_gpu_memory_total_bytes",
        "all_smi_gpu_temperature_celsius",
        "all_smi_gpu_mig_mode",
        "all_smi_gpu_info",
        "all_smi_mig_instance_memory_used_bytes",
        "all_smi_mig_instance_memory_total_bytes",
        "all_smi_mig_instance_utilization_gpu",
        "all_smi_cpu_utilization",
    ]);
    let value = prop::sample::select(vec![
        "0", "1", "-1", "100", "101", "0.5", "1.5", "80000", "81920", "1e12", "NaN", "+Inf", "-Inf", "x", "",
    ]);
    let label = prop_oneof![
        (0u8..12).prop_map(|g| format!("gpu=\"{g}\"")),
        (0u8..4).prop_map(|u| format!("UUID=\"GPU-{u}\"")),
        prop::sample::select(vec!["1g.10gb", "3g.40gb", "7g.80gb", "9g.99gb", "", "1g"])
            .prop_map(|p| format!("GPU_I_PROFILE=\"{p}\"")),
        (0u8..20).prop_map(|i| format!("GPU_I_ID=\"{i}\"")),
        prop::sample::select(vec!["n1", "n2", "", "\u{1b}[2J"]).prop_map(|h| format!("Hostname=\"{h}\"")),
        prop::sample::select(vec!["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "Tesla T4", ""])
            .prop_map(|m| format!("modelName=\"{m}\"")),
        prop::sample::select(vec!["p1", "p2", ""]).prop_map(|p| format!("pod=\"{p}\",namespace=\"ns\"")),
        (0u8..12).prop_map(|g| format!("gpu_index=\"{g}\"")),
        (0u8..4).prop_map(|u| format!("gpu_uuid=\"GPU-{u}\"")),
        prop::sample::select(vec!["n1", "n2", ""]).prop_map(|h| format!("instance=\"{h}\", host=\"{h}\"")),
        (0u8..20).prop_map(|i| format!("gpu_instance_id=\"{i}\"")),
        prop::sample::select(vec!["1g.10gb", "3g.40gb", "NVIDIA A100-SXM4-80GB MIG 1g.10gb", ""])
            .prop_map(|p| format!("mig_profile=\"{p}\"")),
        prop::sample::select(vec!["0", "1", "x"]).prop_map(|m| format!("mig_mode_current=\"{m}\"")),
    ];
    let line = (metric, proptest::collection::vec(label, 0..6), value)
        .prop_map(|(m, ls, v)| format!("{m}{{{}}} {v}", ls.join(",")));
    proptest::collection::vec(line, 0..40).prop_map(|l| l.join("\n"))
}

/// A Slurm job or node object with fields from both dialects, some of the wrong type.
fn slurm_doc() -> impl Strategy<Value = String> {
    let scalar = prop::sample::select(vec![
        "1",
        "-1",
        "0",
        "4294967294",
        "1e30",
        "\"x\"",
        "null",
        "[]",
        "{\"set\":true,\"infinite\":false,\"number\":3}",
        "{\"set\":false,\"infinite\":true,\"number\":0}",
        "[\"RUNNING\"]",
        "\"PENDING\"",
        "\"gpu:a100_3g.20gb:2(IDX:0-1)\"",
        "\"gres/gpu:h100=99999999999\"",
        "\"n[1-3,x]\"",
        "\"n[0-99999999]\"",
    ]);
    let key = prop::sample::select(vec![
        "job_id",
        "name",
        "job_state",
        "state",
        "partition",
        "qos",
        "priority",
        "submit_time",
        "start_time",
        "tres_per_node",
        "tres_per_job",
        "tres_req_str",
        "gres_detail",
        "nodes",
        "node_count",
        "hostname",
        "gres",
        "gres_used",
        "tres",
        "tres_used",
        "cpus",
    ]);
    let object = proptest::collection::vec((key, scalar), 0..12).prop_map(|kv| {
        let fields: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!("{{{}}}", fields.join(","))
    });
    (proptest::collection::vec(object.clone(), 0..6), proptest::collection::vec(object, 0..6))
        .prop_map(|(j, n)| format!("{{\"jobs\":[{}],\"nodes\":[{}]}}", j.join(","), n.join(",")))
}

/// Kubernetes objects with the fields the mapping reads, quantities from every corner.
fn kubernetes_doc() -> impl Strategy<Value = String> {
    let qty = prop::sample::select(vec![
        "\"1\"",
        "\"0\"",
        "\"-1\"",
        "\"1k\"",
        "\"99999999999999999999\"",
        "\"x\"",
        "2",
        "null",
    ]);
    let res = prop::sample::select(vec!["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared", "cpu"]);
    let node = (res.clone(), qty.clone(), qty.clone()).prop_map(|(r, c, a)| {
        format!(
            "{{\"metadata\":{{\"name\":\"n1\",\"labels\":{{\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-80GB\",\"nvidia.com/gpu.count\":{c}}}}},\"status\":{{\"capacity\":{{\"{r}\":{c}}},\"allocatable\":{{\"{r}\":{a}}}}}}}"
        )
    });
    let phase = prop::sample::select(vec!["Pending", "Running", "Succeeded", "", "Unknown"]);
    let pod = (res, qty, phase).prop_map(|(r, q, ph)| {
        format!(
            "{{\"metadata\":{{\"name\":\"p\",\"namespace\":\"ns\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\"}},\"spec\":{{\"nodeName\":\"n1\",\"containers\":[{{\"name\":\"c\",\"resources\":{{\"limits\":{{\"{r}\":{q}}}}}}}]}},\"status\":{{\"phase\":\"{ph}\"}}}}"
        )
    });
    (proptest::collection::vec(node, 0..4), proptest::collection::vec(pod, 0..6))
        .prop_map(|(n, p)| format!("{{\"nodes\":[{}],\"pods\":[{}]}}", n.join(","), p.join(",")))
}

/// Config text from the real keys with values of every type.
fn config_doc() -> impl Strategy<Value = String> {
    let section = prop::sample::select(vec![
        "",
        "[sources]",
        "[sources.http]",
        "[policy]",
        "[demo]",
        "[slurm]",
        "[advisor]",
        "[[schedule]]",
        "[[sources.auth]]",
        "[colors]",
    ]);
    let key = prop::sample::select(vec![
        "refresh",
        "read_only",
        "prometheus",
        "scrape",
        "timeout",
        "min_runtime",
        "seed",
        "speed",
        "size",
        "url",
        "bearer_token_env",
        "allow_plain_http",
        "memory_budget",
        "danger",
        "layout",
        "cards",
        "windows",
        "name",
    ]);
    let value = prop::sample::select(vec![
        "\"1s\"",
        "\"0s\"",
        "\"99999999999d\"",
        "true",
        "1",
        "-1",
        "1e309",
        "\"http://\"",
        "\"http://[::1\"",
        "[\"http://h:1\"]",
        "\"#+fffff\"",
        "\"512x8\"",
        "\"64MiB\"",
        "{}",
        "[]",
        "\"\"",
        "nan",
    ]);
    proptest::collection::vec((section, key, value), 0..12)
        .prop_map(|l| l.iter().map(|(s, k, v)| format!("{s}\n{k} = {v}")).collect::<Vec<_>>().join("\n"))
}

fn layout_text() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        prop::sample::select(vec![
            "1g.10gb",
            "2g.20gb",
            "3g.40gb",
            "4g.40gb",
            "7g.80gb",
            "1g.10gb+me",
            "1g.20gb",
            "whole",
            "",
            "@",
            "1g.10gb@"
        ])
        .prop_map(str::to_string),
        (prop::sample::select(vec!["1g.10gb", "3g.40gb", "1g.18gb"]), any::<u32>())
            .prop_map(|(p, s)| format!("{p}@{s}")),
    ];
    proptest::collection::vec(part, 0..10).prop_map(|p| p.join(","))
}

/// Demand CSV lines from a grammar: the columns in any order, values from every corner (times
/// of both kinds, durations with and without units, shares, profiles, classes, not numbers).
fn demand_doc() -> impl Strategy<Value = String> {
    let columns = prop::sample::subsequence(
        vec![
            "submit",
            "duration",
            "gpus",
            "fraction",
            "gpu_memory",
            "mig_profile",
            "class",
            "priority",
            "checkpoint",
            "use",
            "model",
            "name",
        ],
        0..12,
    );
    let value = prop::sample::select(vec![
        "0",
        "1",
        "-1",
        "60",
        "1.5",
        "90m",
        "1h30m",
        "2d",
        "0.25",
        "1",
        "2",
        "8",
        "4097",
        "15GiB",
        "0B",
        "1g.10gb",
        "3g.40gb",
        "9g.1tb",
        "inference",
        "training",
        "LS",
        "x",
        "",
        "\"",
        "\"a,b\"",
        "2026-03-01T09:30:00Z",
        "2026-03-01 09:30:00",
        "1e309",
        "NaN",
        "99999999999d",
        "A100-80GB|L4",
        "#",
    ]);
    let row = proptest::collection::vec(value, 0..13).prop_map(|v| v.join(","));
    (columns, proptest::collection::vec(row, 0..20))
        .prop_map(|(c, rows)| format!("{}\n{}", c.join(","), rows.join("\n")))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-inputs-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    dir.join(name)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn exposition_bytes(data in proptest::collection::vec(any::<u8>(), 0..4096)) {
        checked(&inputs::exposition(&data))?;
    }

    #[test]
    fn exposition_mutated(i in any::<prop::sample::Index>(), ops in ops()) {
        let all = cached(0, || {
            let mut all = fixtures("dcgm", &[".prom"]);
            all.extend(fixtures("allsmi", &[".prom"]));
            all.extend(fixtures("exposition", &[".prom", ".txt"]).into_iter().filter(|f| !f.is_empty()));
            all
        });
        checked(&inputs::exposition(&mutate(&all[i.index(all.len())], &ops)))?;
    }

    #[test]
    fn exposition_grammar(doc in exposition_doc()) {
        checked(&inputs::exposition(doc.as_bytes()))?;
    }

    #[test]
    fn prometheus_api_bytes(data in proptest::collection::vec(any::<u8>(), 0..4096)) {
        checked(&inputs::prometheus_api(&data))?;
    }

    #[test]
    fn prometheus_api_grammar(doc in exposition_doc()) {
        // The same series as an API answer: one vector sample per line.
        let result: Vec<String> = doc.lines().filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (name, labels) = series.split_once('{')?;
            let labels = labels.trim_end_matches('}');
            let fields: Vec<String> = labels.split(',').filter_map(|kv| kv.split_once('=')).map(|(k, v)| format!("\"{k}\":{v}")).collect();
            let mut metric = vec![format!("\"__name__\":\"{name}\"")];
            metric.extend(fields);
            Some(format!("{{\"metric\":{{{}}},\"value\":[1700000000,\"{value}\"]}}", metric.join(",")))
        }).collect();
        let body = format!("{{\"status\":\"success\",\"data\":{{\"resultType\":\"vector\",\"result\":[{}]}}}}", result.join(","));
        checked(&inputs::prometheus_api(body.as_bytes()))?;
    }

    #[test]
    fn slurm_mutated(i in any::<prop::sample::Index>(), ops in ops()) {
        let all = cached(1, || fixtures("slurm", &[".json"]));
        checked(&inputs::slurm(&mutate(&all[i.index(all.len())], &ops)))?;
    }

    #[test]
    fn slurm_grammar(doc in slurm_doc()) {
        checked(&inputs::slurm(doc.as_bytes()))?;
    }

    #[test]
    fn kubernetes_grammar(doc in kubernetes_doc()) {
        checked(&inputs::kubernetes(doc.as_bytes()))?;
    }

    #[test]
    fn kubernetes_mutated(i in any::<prop::sample::Index>(), ops in ops()) {
        // Each fixture object as a node, a pod and a Workload at once: the mapping takes what reads.
        let all = cached(2, || fixtures("kubernetes", &[".json"]));
        let obj = String::from_utf8_lossy(&mutate(&all[i.index(all.len())], &ops)).into_owned();
        let doc = format!("{{\"nodes\":[{obj}],\"pods\":[{obj}],\"workloads\":[{obj}],\"classes\":[{obj}]}}");
        checked(&inputs::kubernetes(doc.as_bytes()))?;
    }

    #[test]
    fn prometheus_range_grammar(points in proptest::collection::vec((any::<f64>(), prop::sample::select(vec!["1", "-5", "NaN", "1e309", "x", "50"])), 0..30)) {
        // A matrix answer with timestamps from every corner (negative, huge, NaN).
        let values: Vec<String> = points.iter().map(|(t, v)| format!("[{t},\"{v}\"]")).map(|s| s.replace("NaN,", "0,").replace("inf,", "1e308,")).collect();
        let body = format!("{{\"status\":\"success\",\"data\":{{\"resultType\":\"matrix\",\"result\":[{{\"metric\":{{\"gpu\":\"0\",\"instance\":\"n:9400\",\"Hostname\":\"n\"}},\"values\":[{}]}}]}}}}", values.join(","));
        checked(&inputs::prometheus_api(body.as_bytes()))?;
    }

    #[test]
    fn moments(text in "[-0-9T:Z hmsd.+]{0,30}") {
        inputs::config(text.as_bytes());
    }

    #[test]
    fn config_and_theme(doc in config_doc(), data in proptest::collection::vec(any::<u8>(), 0..512)) {
        inputs::config(doc.as_bytes());
        inputs::config(&data);
    }

    #[test]
    fn demand_bytes(data in proptest::collection::vec(any::<u8>(), 0..4096)) {
        inputs::openb_pods(&data).map_err(|e| TestCaseError::fail(e.to_string()))?;
        inputs::openb_nodes(&data).map_err(|e| TestCaseError::fail(e.to_string()))?;
        inputs::demand_csv(&data).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }

    #[test]
    fn demand_traces_mutated(i in any::<prop::sample::Index>(), ops in ops()) {
        let all = cached(3, || fixtures("traces", &[".csv"]));
        let data = mutate(&all[i.index(all.len())], &ops);
        inputs::openb_pods(&data).map_err(|e| TestCaseError::fail(e.to_string()))?;
        inputs::openb_nodes(&data).map_err(|e| TestCaseError::fail(e.to_string()))?;
        inputs::demand_csv(&data).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }

    #[test]
    fn demand_csv_grammar(doc in demand_doc()) {
        inputs::demand_csv(doc.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }

    #[test]
    fn layouts(text in layout_text(), data in proptest::collection::vec(any::<u8>(), 0..64)) {
        inputs::layout(text.as_bytes());
        inputs::layout(&data);
    }
}

/// Recordings: a real one made here (keyframes, deltas, an action), then cut and mutated
/// anywhere; the reader finds what it can and never panics. Fewer cases: each is a file.
#[test]
fn recordings_mutated() {
    let good = scratch("good.tsrec");
    let _ = std::fs::remove_file(&good);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["record", "--demo", "--speed", "600", "--every", "1s", "--for", "3s", "--out"])
        .arg(&good)
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .env("XDG_STATE_HOME", scratch("state"))
        .output();
    assert!(out.as_ref().is_ok_and(|o| o.status.success()), "{out:?}");
    let base = std::fs::read(&good).unwrap_or_default();
    assert!(base.len() > 100);
    let target = scratch("mutated.tsrec");
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: (cases() / 4).max(16),
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let result = runner.run(&ops(), |ops| {
        inputs::recording(&mutate(&base, &ops), &target);
        Ok(())
    });
    assert!(result.is_ok(), "{result:?}");
    let _ = std::fs::remove_dir_all(good.parent().unwrap_or(&good));
}
