//! The read-only device check (scripts/device-check.sh) on the fake library, with a fake
//! nvidia-smi built from the same scenario: it passes when both agree, fails naming the field
//! when they do not, names the calls NVML refused, and captures a scenario the fake
//! reproduces.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use common::{Temp, fake_lib, have, root, scenario};

/// The fake nvidia-smi, built with the fake library (the same package).
fn fake_smi_dir() -> PathBuf {
    let lib = fake_lib();
    let dir = lib.parent().unwrap_or_else(|| panic!("{}", lib.display())).to_path_buf();
    assert!(dir.join("nvidia-smi").exists(), "no fake nvidia-smi beside {}", lib.display());
    dir
}

/// Run the script into `out` with `env`; exit code and what it printed.
fn device_check(out: &Path, seconds: u32, env: &[(&str, &Path)]) -> (i32, String) {
    let path = format!("{}:{}", fake_smi_dir().display(), std::env::var("PATH").unwrap_or_default());
    let o = Command::new("bash")
        .arg(root().join("scripts/device-check.sh"))
        .arg(out)
        .env("PATH", path)
        .env("TESSERA", env!("CARGO_BIN_EXE_tessera"))
        .env("NVML_LIB", fake_lib())
        .env("CONSOLE_SECONDS", seconds.to_string())
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    (o.status.code().unwrap_or(-1), text)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn tessera(args: &[&str], scenario: &Path) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .arg(format!("--nvml={}", fake_lib().display()))
        .env("FAKE_NVML_SCENARIO", scenario)
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn the_device_check_passes_on_the_fake_library_and_writes_every_result() {
    let tmux = have("tmux");
    let tmp = Temp::new("device-check-pass");
    let out = tmp.join("out");
    let scenario = scenario("a100-mixed.json");
    let (code, text) = device_check(&out, 2, &[("FAKE_NVML_SCENARIO", &scenario)]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("PASSED: every field agrees within its tolerance"), "{text}");
    for f in ["nvidia-smi-version.txt", "nvidia-smi-q.xml", "snapshot.json", "snapshot.txt", "probe.json"] {
        assert!(out.join(f).metadata().is_ok_and(|m| m.len() > 0), "{f} missing: {text}");
    }
    for f in ["compare.txt", "compare.json", "scenario.json", "summary.txt"] {
        assert!(out.join(f).metadata().is_ok_and(|m| m.len() > 0), "{f} missing: {text}");
    }
    let compare = json(&out.join("compare.json"));
    assert_eq!(compare["summary"]["differ"], 0, "{compare}");
    assert!(compare["summary"]["agree"].as_u64().is_some_and(|n| n >= 15), "{compare}");
    assert_eq!(compare["cards"][0]["matched_by"], "uuid");
    let probe = json(&out.join("probe.json"));
    assert_eq!(probe["refresh_ms"].as_array().map(Vec::len), Some(10), "{probe}");
    assert!(probe["first_collect_ms"].as_f64().is_some(), "{probe}");
    assert_eq!(probe["driver_version"], "550.54.15");
    let calls = probe["calls"].as_array().cloned().unwrap_or_default();
    assert!(calls.iter().any(|c| c["call"] == "nvmlDeviceGetGpuInstances" && c["ok"].as_u64() > Some(0)), "{probe}");
    if tmux {
        let screen = read(&out.join("console-160x48.txt"));
        assert!(screen.contains("A100-80GB") && screen.contains("READ-ONLY"), "{screen}");
        let usage = read(&out.join("console-usage.txt"));
        assert!(usage.contains("tessera: ") && usage.contains("peak resident"), "{usage}");
        assert!(read(&out.join("dmon.txt")).contains("# gpu"), "dmon beside the console");
    }
    // The script refuses to write over earlier results.
    let (code, text) = device_check(&out, 0, &[("FAKE_NVML_SCENARIO", &scenario)]);
    assert_eq!(code, 2, "{text}");
}

#[test]
fn a_difference_beyond_tolerance_fails_the_check_and_names_the_field() {
    let tmp = Temp::new("device-check-differs");
    // nvidia-smi reads a card 30 C hotter and in exclusive-process mode.
    let text = read(&scenario("a100-mixed.json"))
        .replace("\"temperature_c\": 41", "\"temperature_c\": 71")
        .replace("\"mig_pending\": true,", "\"mig_pending\": true,\n      \"compute_mode\": \"exclusive_process\",");
    let other = tmp.join("smi-scenario.json");
    std::fs::write(&other, text).unwrap_or_else(|e| panic!("{e}"));
    let out = tmp.join("out");
    let env = [("FAKE_NVML_SCENARIO", scenario("a100-mixed.json")), ("FAKE_SMI_SCENARIO", other)];
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
    let (code, printed) = device_check(&out, 0, &env);
    assert_eq!(code, 1, "{printed}");
    assert!(printed.contains("2 differ beyond tolerance") && printed.contains("FAILED"), "{printed}");
    let report = read(&out.join("compare.txt"));
    assert!(report.contains("temperature_c              DIFFERS  tessera 41, nvidia-smi 71 (±5 C)"), "{report}");
    assert!(
        report.contains("compute_mode               DIFFERS  tessera default, nvidia-smi exclusive_process"),
        "{report}"
    );
}

/// A card whose process lists NVML refuses is not "a card without processes": the check
/// passes, the processes unknown.
#[test]
fn refused_process_lists_are_unknown_not_a_difference() {
    let tmp = Temp::new("device-check-noproc");
    let mut v: Value = serde_json::from_str(&read(&scenario("h100x8.json"))).unwrap_or_else(|e| panic!("{e}"));
    v["cards"][0]["processes"] = serde_json::json!([{"pid": 41877, "used_mib": 1000}]);
    v["cards"][0]["no_permission"] =
        serde_json::json!(["nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetMPSComputeRunningProcesses"]);
    let path = tmp.join("noproc.json");
    std::fs::write(&path, v.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let out = tmp.join("out");
    let (code, printed) = device_check(&out, 0, &[("FAKE_NVML_SCENARIO", &path)]);
    assert_eq!(code, 0, "{printed}");
    let report = read(&out.join("compare.txt"));
    assert!(report.contains("processes (compute pids)   unknown  tessera unknown, nvidia-smi 41877"), "{report}");
}

#[test]
fn the_probe_names_the_calls_nvml_refused_and_the_scenario_keeps_them() {
    let tmp = Temp::new("device-check-refused");
    let text = read(&scenario("h100x8.json"));
    let mut v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    v["cards"][0]["no_permission"] = serde_json::json!(["nvmlDeviceGetPowerUsage"]);
    v["cards"][0]["not_supported"] = serde_json::json!(["nvmlDeviceGetTemperature"]);
    let path = tmp.join("refused.json");
    std::fs::write(&path, v.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let (code, out) = tessera(&["device-check", "probe", "--refreshes", "1"], &path);
    assert_eq!(code, 0, "{out}");
    let probe: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let failing = probe["failing_calls"].as_array().cloned().unwrap_or_default();
    let find = |call: &str| failing.iter().find(|c| c["call"] == call && c["card"] == 0).cloned();
    assert!(find("nvmlDeviceGetPowerUsage").is_some_and(|c| c["no_permission"] == 2), "{failing:?}");
    assert!(find("nvmlDeviceGetTemperature").is_some_and(|c| c["not_supported"] == 2), "{failing:?}");
    assert!(failing.iter().all(|c| c["card"] == 0 || c["call"] == "nvmlGpmQueryDeviceSupport"), "{failing:?}");
    // The captured scenario fails the same calls the same way.
    let (_, snap) = tessera(&["snapshot", "--json"], &path);
    std::fs::write(tmp.join("snap.json"), snap).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(tmp.join("probe.json"), &out).unwrap_or_else(|e| panic!("{e}"));
    let (code, captured) = tessera(
        &[
            "device-check",
            "scenario",
            &tmp.join("snap.json").display().to_string(),
            "--probe",
            &tmp.join("probe.json").display().to_string(),
        ],
        &path,
    );
    assert_eq!(code, 0, "{captured}");
    let s: Value = serde_json::from_str(&captured).unwrap_or_else(|e| panic!("{e}: {captured}"));
    assert_eq!(s["cards"][0]["no_permission"], serde_json::json!(["nvmlDeviceGetPowerUsage"]), "{s}");
    assert!(
        s["cards"][0]["not_supported"].as_array().is_some_and(|a| a.iter().any(|c| c == "nvmlDeviceGetTemperature"))
    );
}

/// The fields a captured scenario must give back in the fake, card by card (UUIDs are
/// stand-ins; names and users of processes come from this host's /proc, not the scenario).
fn essentials(snapshot: &Value) -> Vec<Value> {
    let keys = [
        "index",
        "model",
        "gpu_model",
        "pci_bus_id",
        "memory_total_mib",
        "memory_used_mib",
        "utilization_pct",
        "temperature_c",
        "power_w",
        "power_limit_w",
        "sm_clock_mhz",
        "memory_clock_mhz",
        "compute_mode",
    ];
    let mut out = Vec::new();
    for card in
        snapshot["nodes"].as_array().into_iter().flatten().flat_map(|n| n["cards"].as_array().into_iter().flatten())
    {
        let mut m = serde_json::Map::new();
        for k in keys {
            m.insert(k.into(), card[k].clone());
        }
        m.insert("ecc".into(), card["health"]["ecc_volatile_uncorrected"].clone());
        m.insert("mig_enabled".into(), card["mig"]["enabled"].clone());
        let instances: Vec<Value> = card["mig"]["instances"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| {
                serde_json::json!([
                    i["gi_id"],
                    i["profile"],
                    i["start"],
                    i["memory_total_mib"],
                    i["memory_used_mib"],
                    i["utilization_pct"]
                ])
            })
            .collect();
        m.insert("instances".into(), Value::Array(instances));
        let procs: Vec<Value> = card["processes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| serde_json::json!([p["pid"], p["used_mib"], p["gi_id"], p["mps"]]))
            .collect();
        m.insert("processes".into(), Value::Array(procs));
        out.push(Value::Object(m));
    }
    out
}

#[test]
fn a_captured_scenario_gives_back_the_same_cards_in_the_fake() {
    let tmp = Temp::new("device-check-capture");
    for name in [
        "h100x8.json",
        "a100-mixed.json",
        "h200-7x1g.json",
        "l4-shared.json",
        "h100-mig-gpm.json",
        "a100-idle.json",
        "h200-driver580.json",
    ] {
        let original = scenario(name);
        let (code, snap) = tessera(&["snapshot", "--json"], &original);
        assert_eq!(code, 0, "{name}: {snap}");
        let snap_path = tmp.join(format!("{name}.snapshot.json"));
        std::fs::write(&snap_path, &snap).unwrap_or_else(|e| panic!("{e}"));
        let (code, captured) = tessera(&["device-check", "scenario", &snap_path.display().to_string()], &original);
        assert_eq!(code, 0, "{name}: {captured}");
        let scenario_json: Value = serde_json::from_str(&read(&original)).unwrap_or_else(|e| panic!("{e}"));
        for uuid in scenario_json["cards"].as_array().into_iter().flatten().filter_map(|c| c["uuid"].as_str()) {
            assert!(!captured.contains(uuid), "{name}: the card's UUID {uuid} was kept");
        }
        let captured_path = tmp.join(format!("{name}.captured.json"));
        std::fs::write(&captured_path, &captured).unwrap_or_else(|e| panic!("{e}"));
        let (code, again) = tessera(&["snapshot", "--json"], &captured_path);
        assert_eq!(code, 0, "{name}: the captured scenario loads in the fake: {again}\n{captured}");
        let parse = |t: &str| serde_json::from_str::<Value>(t).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = essentials(&parse(&snap));
        assert!(!want.is_empty(), "{name}: no card in {snap}");
        assert_eq!(essentials(&parse(&again)), want, "{name}: {captured}");
    }
}

/// Hostile inputs are refused with the reason, not read: an entity bomb (60,000 uses passed
/// 13.7 GB), a snapshot past the largest fleet, a scenario input of a million tiny values.
#[test]
fn hostile_inputs_are_refused_with_the_reason() {
    let dir = Temp::new("device-check-hostile");
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("{e}"));
        p.to_string_lossy().into_owned()
    };
    let snap = write("snap.json", r#"{"nodes":[{"name":"n","cards":[{"index":0,"uuid":"GPU-1"}]}]}"#);
    let bomb = write(
        "bomb.xml",
        &format!(
            "<?xml version=\"1.0\"?><!DOCTYPE nvidia_smi_log [<!ENTITY a \"{}\">]><nvidia_smi_log><driver_version>{}</driver_version></nvidia_smi_log>",
            "x".repeat(100),
            "&a;".repeat(1000)
        ),
    );
    let (code, err) = run(&["device-check", "compare", &snap, &bomb]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("internal DTD subset or an entity declaration"), "{err}");
    let fleet = write("fleet.json", &format!("{{\"nodes\":[{{\"cards\":[{}]}}]}}", vec!["{}"; 65_537].join(",")));
    let real = write("smi.xml", "<nvidia_smi_log><gpu id=\"x\"><uuid>GPU-1</uuid></gpu></nvidia_smi_log>");
    let (code, err) = run(&["device-check", "compare", &fleet, &real]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("more than 65536 cards"), "{err}");
    let values = write("values.json", &format!("{{\"nodes\":[],\"x\":[{}]}}", vec!["0"; 1_000_001].join(",")));
    let (code, err) = run(&["device-check", "scenario", &values]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("more than 1000000 JSON values"), "{err}");
}
