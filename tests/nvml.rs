//! The NVML source against the project's fake libnvidia-ml (tests/fake-nvml), built once per
//! test run. In-process checks run in one test, in sequence, because the library's state is
//! global to the process; the binary checks each run in a process of their own.

use std::process::Command;

mod common;
use common::{fake_lib, scenario};

use serde_json::Value;
use tessera::sources::nvml::{Collector, open};

fn snapshot(scenario_file: &str) -> (i32, Value, String) {
    let lib = fake_lib();
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["snapshot", "--json"])
        .arg(format!("--nvml={}", lib.display()))
        .env("FAKE_NVML_SCENARIO", scenario(scenario_file))
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v = serde_json::from_str(&text).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn cards(v: &Value) -> Vec<Value> {
    v["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["cards"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn layout(card: &Value) -> Vec<(String, u64, u64)> {
    card["mig"]["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            (
                i["profile"].as_str().unwrap_or("?").to_string(),
                i["start"].as_u64().unwrap_or(99),
                i["size"].as_u64().unwrap_or(99),
            )
        })
        .collect()
}

#[test]
fn snapshot_of_eight_whole_h100s() {
    let (code, v, err) = snapshot("h100x8.json");
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["simulated"], false);
    assert_eq!(v["sources"][0]["kind"], "nvml");
    assert_eq!(v["sources"][0]["state"], "live");
    assert_eq!(v["nodes"][0]["name"], tessera::sources::nvml::hostname());
    let cards = cards(&v);
    assert_eq!(cards.len(), 8);
    for (i, c) in cards.iter().enumerate() {
        assert_eq!(c["index"], i);
        assert_eq!(c["model"], "NVIDIA H100 80GB HBM3");
        assert_eq!(c["gpu_model"], "H100-80GB");
        assert_eq!(c["mig"]["enabled"], false);
        assert!(c["utilization_pct"].is_number(), "{c}");
        assert!(c["uuid"].as_str().is_some_and(|u| u.starts_with("GPU-")));
        assert!(c["pci_bus_id"].is_string());
    }
    let uuids: std::collections::BTreeSet<_> = cards.iter().map(|c| c["uuid"].to_string()).collect();
    assert_eq!(uuids.len(), 8);
}

#[test]
fn snapshot_of_a_mixed_a100_layout() {
    let (code, v, err) = snapshot("a100-mixed.json");
    assert_eq!(code, 0, "{err}");
    let cards = cards(&v);
    assert_eq!(cards.len(), 1);
    let c = &cards[0];
    assert_eq!(c["mig"]["enabled"], true);
    assert!(c["utilization_pct"].is_null(), "NVML has no utilisation for MIG: null, never 0");
    assert_eq!(
        layout(c),
        vec![("3g.40gb".to_string(), 0, 4), ("2g.20gb".to_string(), 4, 2), ("1g.10gb".to_string(), 6, 1)]
    );
    for i in c["mig"]["instances"].as_array().into_iter().flatten() {
        assert!(i["utilization_pct"].is_null(), "no GPM on Ampere: N/A");
        assert!(i["memory_total_mib"].as_u64().is_some_and(|m| m > 0));
    }
    // The process on GPU instance 1 holds it, as a workload.
    assert_eq!(c["mig"]["instances"][0]["workloads"], serde_json::json!(["pid:4242"]));
    assert_eq!(c["mig"]["instances"][1]["workloads"], serde_json::json!([]));
    let w = v["workloads"].as_array().and_then(|ws| ws.iter().find(|w| w["id"] == "pid:4242")).cloned();
    let w = w.unwrap_or_else(|| panic!("no pid:4242 workload in {v}"));
    assert_eq!(w["state"], "running");
    assert_eq!(w["cards"][0], format!("{}/0", tessera::sources::nvml::hostname()));
    assert_eq!(c["processes"][0]["pid"], 4242);
    assert_eq!(c["processes"][0]["gi_id"], 1);
}

#[test]
fn snapshot_of_seven_small_h200_instances() {
    let (code, v, err) = snapshot("h200-7x1g.json");
    assert_eq!(code, 0, "{err}");
    let c = &cards(&v)[0];
    let want: Vec<(String, u64, u64)> = (0..7).map(|s| ("1g.18gb".to_string(), s, 1)).collect();
    assert_eq!(layout(c), want);
}

#[test]
fn a_missing_library_is_reported_not_fatal() {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["snapshot", "--json", "--nvml=/nonexistent/libnvidia-ml.so.1"])
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    // Reported, not fatal: the JSON says why; the exit code says no source answered.
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(v["sources"][0]["state"], "unavailable");
    assert!(
        v["sources"][0]["error"].as_str().is_some_and(|e| e.contains("cannot load /nonexistent/libnvidia-ml.so.1")),
        "{v}"
    );
    // With nothing configured and no NVML, the simulated cluster runs and the header says why.
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["snapshot", "--json"])
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    if v["sources"][0]["kind"] == "nvml" && v["sources"][0]["state"] == "unavailable" {
        assert_eq!(v["simulated"], true);
        assert!(v["sources"][0]["error"].as_str().is_some_and(|e| e.contains("running the simulated cluster")));
    }
}

/// Runs `in_process_degraded_lost_and_xid` in a child process with the scenario in its
/// environment (the fake reads it at init; setting it here would race other tests).
#[test]
fn the_source_in_process_degraded_lost_and_xid() {
    let lib = fake_lib();
    let out = Command::new(std::env::current_exe().unwrap_or_else(|e| panic!("{e}")))
        .args(["--exact", "in_process_degraded_lost_and_xid", "--nocapture", "--test-threads", "1"])
        .env("FAKE_NVML_SCENARIO", scenario("degraded.json"))
        .env("FAKE_NVML_LIB", &lib)
        .env("TESSERA_NVML_CHILD", "1")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}

#[test]
fn in_process_degraded_lost_and_xid() {
    if std::env::var_os("TESSERA_NVML_CHILD").is_none() {
        return; // run by the test above, in its own process
    }
    let lib = fake_lib();
    let lib = lib.to_string_lossy().into_owned();
    let nvml = open(Some(&lib)).unwrap_or_else(|e| panic!("{e}"));
    let mut c = Collector::new(&nvml);
    let first = c.collect().unwrap_or_else(|e| panic!("{e}"));
    let cards = &first.nodes[0].cards;
    assert_eq!(cards.len(), 2);
    let c0 = &cards[0];
    assert_eq!(
        (c0.power_w, c0.temperature_c, c0.utilization_pct, c0.health.ecc_volatile_uncorrected),
        (None, None, None, None)
    );
    assert_eq!(c0.health.last_xid, Some(79), "the XID arrived through the event set");
    assert!(first.events.iter().any(|e| e.text == "XID 79"));
    // degraded.json: card 1 answers three handle lookups (event registration, the GPM
    // probe, the first collection), then is lost.
    assert!(!cards[1].health.lost);
    assert!(cards[1].uuid.is_some());
    let second = c.collect().unwrap_or_else(|e| panic!("{e}"));
    let lost = &second.nodes[0].cards[1];
    assert!(lost.health.lost, "the lost card is marked, not dropped");
    assert_eq!(lost.uuid, cards[1].uuid, "with its last known identity");
    assert!(second.events.iter().any(|e| e.text.starts_with("GPU lost")));
    let third = c.collect().unwrap_or_else(|e| panic!("{e}"));
    assert!(third.events.iter().all(|e| !e.text.starts_with("GPU lost")), "reported once");
    assert_eq!(third.nodes[0].cards[0].health.last_xid, Some(79), "the last XID stays");
}

#[test]
fn gpm_gives_per_instance_activity_on_hopper() {
    let (code, v, err) = snapshot("h100-mig-gpm.json");
    assert_eq!(code, 0, "{err}");
    let c = &cards(&v)[0];
    let utils: Vec<Value> =
        c["mig"]["instances"].as_array().into_iter().flatten().map(|i| i["utilization_pct"].clone()).collect();
    assert_eq!(utils, vec![serde_json::json!(63.5), serde_json::json!(12.0), serde_json::json!(12.0)]);
    assert!(c["utilization_pct"].is_null(), "no whole-card utilisation on a MIG card");
}

#[test]
fn compute_and_mps_processes_give_contexts_and_the_sharing_mode() {
    let (code, v, err) = snapshot("l4-shared.json");
    assert_eq!(code, 0, "{err}");
    let cards = cards(&v);
    // Three compute contexts in the default compute mode: the driver time-slices them.
    assert_eq!(cards[0]["sharing_mode"], "time_sliced", "{}", cards[0]);
    assert_eq!(cards[0]["sharing"]["contexts"], 3);
    assert_eq!(cards[0]["sharing"]["mps_server"], Value::Null);
    assert_eq!(cards[0]["gpu_model"], Value::Null, "an L4 has no MIG");
    // Two clients from nvmlDeviceGetMPSComputeRunningProcesses_v3.
    assert_eq!(cards[1]["sharing_mode"], "mps", "{}", cards[1]);
    assert_eq!(cards[1]["sharing"]["contexts"], 2);
    let mps: Vec<bool> = cards[1]["processes"].as_array().into_iter().flatten().map(|p| p["mps"] == true).collect();
    assert_eq!(mps, vec![true, true]);
    // Each process holds its card, as with NVML alone elsewhere.
    let holders = cards[1]["workloads"].as_array().map_or(0, Vec::len);
    assert_eq!(holders, 2);
}

/// `simulate` with a demand file and NVML configured runs on the live cards, collected once,
/// with their MIG layouts as they are.
#[test]
fn simulate_runs_a_demand_on_the_live_fleet() {
    let lib = fake_lib();
    let dir = std::env::temp_dir().join(format!("tessera-simulate-live-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let csv = dir.join("demand.csv");
    let _ =
        std::fs::write(&csv, "submit,duration,mig_profile,class\n0,600,1g.18gb,inference\n0,600,1g.18gb,inference\n");
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["simulate", "--json", "--policy", "mig", "--demand"])
        .arg(&csv)
        .arg(format!("--nvml={}", lib.display()))
        .env("FAKE_NVML_SCENARIO", scenario("h200-7x1g.json"))
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let notes = v["demand"]["notes"].to_string();
    assert!(notes.contains("the live one"), "{notes}");
    assert_eq!(v["fleet"]["models"][0]["model"], "H200-141GB", "{}", v["fleet"]);
    // Two 1g jobs on the card's 1g instances: both start at once.
    assert_eq!(v["policies"][0]["wait"]["p99_s"], 0, "{}", v["policies"][0]["wait"]);
    let _ = std::fs::remove_dir_all(&dir);
}
