//! The scrape source end to end: `tessera snapshot --scrape URL` against dcgm-exporter text
//! (real samples) served on 127.0.0.1, with a target down, auth, and bad input.

use std::collections::HashMap;
use std::process::Command;

use serde_json::Value;

mod common;
use common::http::{Reply, Server};
use common::{snapshot, source};

fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dcgm").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn a_mig_exporter_becomes_cards_and_instances() {
    let server = Server::start(
        HashMap::from([("/metrics".into(), Reply::ok(fixture("metrics-a100-mig-1g.5gb-exporter-2.4.0rc2.prom")))]),
        None,
    );
    let (code, v, err) = snapshot(&["--scrape", &server.url("/metrics")], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["simulated"], false);
    let s = source(&v, &format!("scrape:{}", server.addr));
    assert_eq!(s["state"], "live", "{v}");
    // The node is the target's host, not the exporter's Hostname label.
    assert_eq!(v["nodes"][0]["name"], "127.0.0.1");
    let card = &v["nodes"][0]["cards"][0];
    assert_eq!(card["uuid"], "GPU-34319582-d595-d1c7-d1d2-179bcfa61660");
    assert_eq!(card["mig"]["enabled"], true);
    let inst = &card["mig"]["instances"][0];
    assert_eq!(inst["gi_id"], 13);
    assert_eq!(inst["profile"], "1g.5gb");
    // GR_ENGINE_ACTIVE is a 0-1 ratio: 0.995687 is 99.6 %.
    assert!(inst["utilization_pct"].as_f64().is_some_and(|u| (u - 99.5687).abs() < 0.01), "{inst}");
    assert_eq!(card["temperature_c"], 61.0);
}

fn amd_fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/amd").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn amd_exporters_become_amd_cards_with_their_partition_mode() {
    // Two AMD Device Metrics Exporters (constructed from its source) on one loopback host: the
    // nodes are named by their hostname labels.
    let server = Server::start(
        HashMap::from([
            ("/a/metrics".into(), Reply::ok(amd_fixture("mi300x-spx-constructed.prom"))),
            ("/b/metrics".into(), Reply::ok(amd_fixture("mi300x-cpx-constructed.prom"))),
        ]),
        None,
    );
    let (code, v, err) = snapshot(&["--scrape", &server.url("/a/metrics"), "--scrape", &server.url("/b/metrics")], &[]);
    assert_eq!(code, 0, "{err}");
    for path in ["/a/metrics", "/b/metrics"] {
        let s = source(&v, &format!("scrape:{}{path}", server.addr));
        assert_eq!((&s["state"], &s["note"]), (&Value::from("live"), &Value::Null), "{s}");
    }
    let node = |name: &str| -> Value {
        v["nodes"].as_array().and_then(|n| n.iter().find(|n| n["name"] == name)).cloned().unwrap_or(Value::Null)
    };
    let a = node("mi300x-a");
    let c = &a["cards"][0];
    assert_eq!(
        (&c["vendor"], &c["model"], &c["serial"]),
        (&Value::from("amd"), &Value::from("MI300X"), &Value::from("692251001124"))
    );
    assert_eq!(c["utilization_pct"], 87.0);
    assert_eq!((&c["memory_used_mib"], &c["memory_total_mib"]), (&Value::from(151_234), &Value::from(196_592)));
    assert_eq!((&c["power_w"], &c["temperature_c"]), (&Value::from(612.0), &Value::from(71.0)));
    assert_eq!(c["sharing_mode"], "partitioned", "{c}");
    assert_eq!(
        (&c["sharing"]["compute_partition"], &c["sharing"]["memory_partition"]),
        (&Value::from("SPX"), &Value::from("NPS1"))
    );
    assert_eq!(c["mig"]["enabled"], false, "a partition mode is never MIG");
    assert_eq!(c["workloads"], serde_json::json!(["k8s:research/llama-train-0"]));
    let b = node("mi300x-b");
    let cards = b["cards"].as_array().cloned().unwrap_or_default();
    assert_eq!(cards.len(), 8, "{b}");
    assert!(cards.iter().all(|c| c["vendor"] == "amd" && c["sharing"]["compute_partition"] == "CPX"), "{b}");
    assert_eq!(cards[3]["workloads"], serde_json::json!(["slurm:81234"]));
    assert_eq!(cards[4]["workloads"], serde_json::json!([]));
    let w = v["workloads"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["id"] == "slurm:81234"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(w["cards"].as_array().map(Vec::len), Some(4), "{w}");
}

#[test]
fn one_target_down_marks_only_that_target() {
    let good = Server::start(
        HashMap::from([("/metrics".into(), Reply::ok(fixture("metrics-t4-nonmig.datadog-fixture.prom")))]),
        None,
    );
    let bad = Server::start(
        HashMap::from([(
            "/metrics".into(),
            Reply::status(500, "text/html", "<html><body>Internal Server Error</body></html>\n"),
        )]),
        None,
    );
    let (code, v, err) = snapshot(&["--scrape", &good.url("/metrics"), "--scrape", &bad.url("/metrics")], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(source(&v, &format!("scrape:{}", good.addr))["state"], "live", "{v}");
    let b = source(&v, &format!("scrape:{}", bad.addr));
    assert_eq!(b["state"], "unavailable");
    assert!(b["error"].as_str().is_some_and(|e| e.contains("HTTP 500")), "{b}");
    assert!(v["nodes"].as_array().is_some_and(|n| !n.is_empty()));
}

#[test]
fn bearer_token_from_the_environment_and_never_shown() {
    let server = Server::start(
        HashMap::from([("/metrics".into(), Reply::ok(fixture("metrics-t4-nonmig.datadog-fixture.prom")))]),
        Some("s3cret-token"),
    );
    let dir = std::env::temp_dir().join(format!("tessera-scrape-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let cfg = dir.join("config.toml");
    let text = format!(
        "[sources]\nscrape = [\"{}\"]\n[[sources.auth]]\nurl = \"{}\"\nbearer_token_env = \"TESSERA_TEST_TOKEN\"\nallow_plain_http = true\n",
        server.url("/metrics"),
        server.url("")
    );
    std::fs::write(&cfg, text).unwrap_or_else(|e| panic!("{e}"));
    let cfg = cfg.to_string_lossy().into_owned();
    let (_, v, _) = snapshot(&["--config", &cfg], &[("TESSERA_TEST_TOKEN", "s3cret-token")]);
    assert_eq!(v["sources"][0]["state"], "live", "{v}");
    let (_, v, err) = snapshot(&["--config", &cfg], &[("TESSERA_TEST_TOKEN", "wrong")]);
    assert!(v["sources"][0]["error"].as_str().is_some_and(|e| e.contains("HTTP 401")), "{v}");
    let all = format!("{v}{err}");
    assert!(!all.contains("s3cret") && !all.contains("wrong"), "credentials leaked: {all}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_counted_not_fatal() {
    let mut text = fixture("metrics-a100-mig-1g.5gb-exporter-2.4.0rc2.prom");
    text.push_str("...\n");
    text.push_str("DCGM_FI_DEV_VGPU_PER_PROCESS_UTILIZATION{gpu=\"0\",UUID=\"GPU-34319582-d595-d1c7-d1d2-179bcfa61660\"} ERROR - FAILED TO CONVERT TO STRING\n");
    let server =
        Server::start(HashMap::from([("/metrics".into(), Reply::ok(text)), ("/empty".into(), Reply::ok(""))]), None);
    let (code, v, err) = snapshot(&["--scrape", &server.url("/metrics"), "--scrape", &server.url("/empty")], &[]);
    assert_eq!(code, 0, "{err}");
    let note = source(&v, &format!("scrape:{}", server.addr))["note"].as_str().unwrap_or_default().to_string();
    assert!(note.contains("1 bad lines") && note.contains("1 non-numeric values"), "{v}");
    let empty = source(&v, &format!("scrape:{}/empty", server.addr));
    assert_eq!(empty["state"], "unavailable");
    assert!(empty["error"].as_str().is_some_and(|e| e.contains("no GPU metrics")), "{empty}");
    assert_eq!(v["nodes"][0]["cards"][0]["mig"]["instances"][0]["gi_id"], 13, "the rest of the scrape is used");
}

/// By hand: `cargo test --release --test scrape -- --ignored --nocapture`. 512 exporters of 8
/// GPUs each on 127.0.0.1 (one server, one path per node), scraped by one `tessera snapshot`.
#[test]
#[ignore]
fn measure_512_exporters() {
    let text = tessera::sources::dcgm::generate(512, 8, 4);
    // Split the generated text per node by its Hostname label.
    let mut per_node: HashMap<String, String> = HashMap::new();
    for line in text.lines() {
        let host = line.split("Hostname=\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("none");
        let body = per_node.entry(format!("/{host}")).or_default();
        body.push_str(line);
        body.push('\n');
    }
    let routes: HashMap<String, Reply> = per_node.into_iter().map(|(p, b)| (p, Reply::ok(b))).collect();
    let server = Server::start(routes, None);
    let dir = std::env::temp_dir().join(format!("tessera-512-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let urls: Vec<String> = (0..512).map(|n| format!("\"{}\"", server.url(&format!("/gpu-node-{n:03}")))).collect();
    let cfg = dir.join("config.toml");
    std::fs::write(&cfg, format!("[sources]\nscrape_node = \"label\"\nscrape = [{}]\n", urls.join(",")))
        .unwrap_or_else(|e| panic!("{e}"));
    let cfg = cfg.to_string_lossy().into_owned();
    for run in 0..3 {
        let t = std::time::Instant::now();
        let (code, v, err) = snapshot(&["--config", &cfg], &[]);
        let took = t.elapsed();
        assert_eq!(code, 0, "{err}");
        let cards: usize =
            v["nodes"].as_array().into_iter().flatten().map(|n| n["cards"].as_array().map_or(0, Vec::len)).sum();
        assert_eq!(cards, 4096);
        println!("run {run}: 512 exporters, {cards} cards, one snapshot (process start to exit) in {took:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn advise_on_a_real_mig_exporter_makes_up_nothing_it_cannot_know() {
    let server = Server::start(
        HashMap::from([("/metrics".into(), Reply::ok(fixture("metrics-a100-mig-1g.5gb-exporter-2.4.0rc2.prom")))]),
        None,
    );
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["advise", "--json", "--scrape", &server.url("/metrics")])
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["schema_version"], 2, "advise --json is at 2: it carries the plan");
    assert_eq!(v["simulated"], false);
    assert!(v["findings"].is_array(), "{text}");
    // No workloads at all: nothing is judged for activity, and the count says so.
    assert_eq!(v["activity_covered"]["of"], 0, "{text}");
    // An exporter names no workloads: nothing is "held", so no held-idle or waste finding is
    // made up, and nothing waits (no scheduler), so no queue advice either.
    let kinds: Vec<&str> = v["findings"].as_array().into_iter().flatten().filter_map(|f| f["kind"].as_str()).collect();
    for k in ["held_idle", "oversized", "mig_waste", "layout_plan", "preemption_candidate", "scale_out"] {
        assert!(!kinds.contains(&k), "{k} without workloads: {text}");
    }
    // Every finding carries its numbers.
    for f in v["findings"].as_array().into_iter().flatten() {
        assert!(f["evidence"].as_array().is_some_and(|e| !e.is_empty()), "{f}");
        assert!(f["gpu_hours_per_day"].as_f64().is_some(), "{f}");
    }
}

/// Names from a source reach a person's terminal escaped: an exporter whose Hostname label
/// carries terminal escapes (set the window title, clear the screen, a C1 CSI) cannot drive
/// the terminal through `snapshot`'s table; the JSON keeps the value, escaped as JSON does.
#[test]
fn terminal_escapes_in_source_names_are_printed_escaped() {
    let evil = fixture("metrics-a100-mig-1g.5gb-exporter-2.4.0rc2.prom")
        .replace("Hostname=\"ub20-a100-k8s\"", "Hostname=\"ub20\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\"");
    assert!(evil.contains('\u{1b}'), "the fixture's Hostname moved");
    let server = Server::start(HashMap::from([("/metrics".into(), Reply::ok(evil))]), None);
    let dir = std::env::temp_dir().join(format!("tessera-escape-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let cfg = dir.join("config.toml");
    std::fs::write(&cfg, "[sources]\nscrape_node = \"label\"\n").unwrap_or_else(|e| panic!("{e}"));
    let cfg = cfg.to_string_lossy().into_owned();
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["snapshot", "--config", &cfg, "--scrape", &server.url("/metrics")])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("ub20\\u001b]0;pwned\\u0007"), "{table}");
    assert!(!table.chars().any(|c| c.is_control() && c != '\n'), "{table:?}");
    let (_, v, _) = snapshot(&["--config", &cfg, "--scrape", &server.url("/metrics")], &[]);
    let name = v["nodes"][0]["name"].as_str().unwrap_or_default().to_string();
    assert!(name.contains('\u{1b}') && name.contains('\u{9b}'), "JSON keeps the value: {v}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two all-smi endpoints on one address (SSH tunnels: `localhost:9001`, `localhost:9002`) are
/// two hosts: all-smi's `instance` label names each, as dcgm-exporter's `Hostname` does. The
/// address alone folded them into one node whose cards shared their indexes.
#[test]
fn endpoints_on_one_host_stay_hosts() {
    let all_smi = |host: &str, uuid: &str| {
        format!(
            "all_smi_gpu_utilization{{gpu=\"NVIDIA H100 80GB HBM3\", instance=\"{host}\", gpu_uuid=\"{uuid}\", gpu_index=\"0\"}} 87\n\
             all_smi_gpu_memory_used_bytes{{gpu=\"NVIDIA H100 80GB HBM3\", instance=\"{host}\", gpu_uuid=\"{uuid}\", gpu_index=\"0\"}} 42949672960\n\
             all_smi_gpu_memory_total_bytes{{gpu=\"NVIDIA H100 80GB HBM3\", instance=\"{host}\", gpu_uuid=\"{uuid}\", gpu_index=\"0\"}} 85520809984\n"
        )
    };
    let a = Server::start(HashMap::from([("/metrics".into(), Reply::ok(all_smi("gpu-node1", "GPU-a")))]), None);
    let b = Server::start(HashMap::from([("/metrics".into(), Reply::ok(all_smi("gpu-node2", "GPU-b")))]), None);
    // A dcgm-exporter row with no Hostname behind a third tunnel: named by its address and port.
    let c = Server::start(
        HashMap::from([("/metrics".into(), Reply::ok("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-c\"} 5\n"))]),
        None,
    );
    let (code, v, err) = snapshot(
        &["--scrape", &a.url("/metrics"), "--scrape", &b.url("/metrics"), "--scrape", &c.url("/metrics")],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let nodes: Vec<(String, usize)> = v["nodes"]
        .as_array()
        .map(|ns| {
            ns.iter()
                .map(|n| {
                    (n["name"].as_str().unwrap_or_default().to_string(), n["cards"].as_array().map_or(0, Vec::len))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut want = vec![("gpu-node1".to_string(), 1), ("gpu-node2".to_string(), 1), (c.addr.to_string(), 1)];
    want.sort();
    let mut got = nodes.clone();
    got.sort();
    assert_eq!(got, want, "{v}");
}
