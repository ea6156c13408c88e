//! The command-line contract, driven through the real binary.

use std::process::Command;

use serde_json::Value;

fn tessera(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .output()
        .unwrap_or_else(|e| panic!("cannot run tessera: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// Run tessera with its state (the audit log) in `state`: the exit code and all it printed.
fn with_state(args: &[&str], state: &std::path::Path) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .env("XDG_STATE_HOME", state)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn snapshot_demo_json_has_the_contract_keys() {
    let (code, out, err) = tessera(&["snapshot", "--demo", "--json", "--seed", "7"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["schema_version"], 1);
    for key in ["taken_at", "sources", "nodes", "workloads", "queue"] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["simulated"], true);
    assert_eq!(v["sources"][0]["kind"], "simulated");
    assert_eq!(v["sources"][0]["state"], "live");
    let cards: Vec<&Value> =
        v["nodes"].as_array().into_iter().flatten().flat_map(|n| n["cards"].as_array().into_iter().flatten()).collect();
    assert_eq!(cards.len(), 42, "32 MIG and whole cards, 10 shared");
    for key in [
        "index",
        "uuid",
        "model",
        "vendor",
        "serial",
        "memory_total_mib",
        "memory_used_mib",
        "utilization_pct",
        "temperature_c",
        "power_w",
        "draining",
        "mig",
        "workloads",
        "sharing_mode",
        "sharing",
    ] {
        assert!(cards.iter().all(|c| c.get(key).is_some()), "card key {key}");
    }
    // The simulated models are NVIDIA's, and the snapshot says so.
    assert!(cards.iter().all(|c| c["vendor"] == "nvidia"), "vendor");
    let modes: std::collections::BTreeSet<&str> = cards.iter().filter_map(|c| c["sharing_mode"].as_str()).collect();
    // dra_dynamic since the demo's DynamicMIG node (issue 49).
    assert_eq!(modes.into_iter().collect::<Vec<_>>(), ["dra_dynamic", "exclusive", "mig", "mps", "time_sliced"]);
    let mig: Vec<&Value> = cards.iter().copied().filter(|c| c["mig"]["enabled"] == true).collect();
    assert!(!mig.is_empty() && mig.len() < cards.len(), "MIG and whole cards");
    let inst = &mig[0]["mig"]["instances"][0];
    for key in
        ["gi_id", "profile", "start", "size", "memory_total_mib", "memory_used_mib", "utilization_pct", "workloads"]
    {
        assert!(inst.get(key).is_some(), "instance key {key}");
    }
    // A MIG card has no whole-card utilisation: null, never 0.
    assert!(mig.iter().all(|c| c["utilization_pct"].is_null()));
    let workloads = v["workloads"].as_array().cloned().unwrap_or_default();
    assert!(workloads.iter().any(|w| w["state"] == "running"));
    assert!(workloads.iter().any(|w| w["state"] == "pending" && w["reason"].is_string()));
    for w in &workloads {
        assert!(["training", "inference", "other"].contains(&w["kind"].as_str().unwrap_or("")));
        for key in ["id", "name", "owner", "priority", "request", "submitted_at", "started_at", "node", "cards"] {
            assert!(w.get(key).is_some(), "workload key {key}");
        }
        assert!(w["cards"].as_array().into_iter().flatten().all(|c| c.as_str().is_some_and(|s| s.contains('/'))));
    }
    assert!(v["queue"]["pending"].as_u64().is_some_and(|n| n > 0));
    assert!(v["queue"]["oldest_wait_s"].is_i64());
}

#[test]
fn snapshot_is_deterministic_per_seed_apart_from_the_clock() {
    let strip = |s: String| {
        let mut v = json(&s);
        v["taken_at"] = Value::Null;
        for w in v["workloads"].as_array_mut().into_iter().flatten() {
            w["submitted_at"] = Value::Null;
            w["started_at"] = Value::Null;
        }
        v
    };
    // The simulator starts at the wall clock's second and its readings follow the clock (a
    // 5-second noise step, the day's load): two runs that straddle such a step differ there.
    // Three tries: a run pair that never agrees is real nondeterminism.
    let mut last = (Value::Null, Value::Null);
    for _ in 0..3 {
        let a = strip(tessera(&["snapshot", "--demo", "--json", "--seed", "3"]).1);
        let b = strip(tessera(&["snapshot", "--demo", "--json", "--seed", "3"]).1);
        if a["nodes"] == b["nodes"] && a["workloads"] == b["workloads"] {
            return;
        }
        last = (a, b);
    }
    assert_eq!(last.0["nodes"], last.1["nodes"]);
    assert_eq!(last.0["workloads"], last.1["workloads"]);
}

#[test]
fn snapshot_table_says_simulated() {
    let (code, out, _) = tessera(&["snapshot"]);
    assert_eq!(code, 0);
    assert!(out.contains("SIMULATED"), "{out}");
    assert!(out.contains("3g.40gb@0,2g.20gb@4,1g.10gb@6"), "{out}");
    assert!(out.contains("queue:"), "{out}");
}

#[test]
fn layouts_json_follows_the_placement_rules() {
    let (code, out, err) = tessera(&["layouts", "NVIDIA A100-SXM4-80GB", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["model"], "A100-80GB");
    let layouts = v["layouts"].as_array().cloned().unwrap_or_default();
    assert_eq!(layouts.len(), 78);
    assert_eq!(layouts[0], serde_json::json!([{ "profile": "7g.80gb", "start": 0, "size": 8 }]));
    for l in &layouts {
        let mut used = 0u32;
        for i in l.as_array().into_iter().flatten() {
            let (start, size) = (i["start"].as_u64().unwrap_or(99), i["size"].as_u64().unwrap_or(99));
            let mask = ((1u32 << size) - 1) << start;
            assert_eq!(used & mask, 0, "overlap in {l}");
            assert!(start + size <= 8);
            used |= mask;
        }
    }
    let (code, out, _) = tessera(&["layouts", "A30"]);
    assert_eq!(code, 0);
    assert!(out.contains("A30-24GB: 5 maximal layouts"), "{out}");
}

#[test]
fn bad_input_exits_2_with_one_clear_line() {
    for args in [
        &["layouts", "Tesla T4"][..],
        &["snapshot", "--demo-size", "8by8"],
        &["snapshot", "--refresh", "fast"],
        &["snapshot", "--prometheus", "prometheus:9090"],
        &["no-such-command"],
        // Bounded: ten minutes of 200 ms refreshes at most (it ran for as long as asked).
        &["device-check", "probe", "--refreshes", "4000000000"],
    ] {
        let (code, _, err) = tessera(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(!err.trim().is_empty(), "{args:?}");
    }
    let (_, _, err) = tessera(&["layouts", "Tesla T4"]);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // A card tessera knows without MIG is said as such (not "unknown").
    assert!(err.contains("T4 has no MIG"), "{err}");
    let (code, _, err) = tessera(&["layouts", "Z9000"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown GPU model \"Z9000\""), "{err}");
}

#[test]
fn check_config_names_file_key_and_value() {
    let dir = std::env::temp_dir().join(format!("tessera-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[policy]\nmin_runtime = \"soon\"\n").unwrap_or_else(|e| panic!("{e}"));
    let (code, _, err) = tessera(&["check-config", bad.to_str().unwrap_or_default()]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.toml: policy.min_runtime = \"soon\""), "{err}");
    let good = dir.join("good.toml");
    std::fs::write(&good, "read_only = true\n").unwrap_or_else(|e| panic!("{e}"));
    let (code, out, _) = tessera(&["check-config", good.to_str().unwrap_or_default()]);
    assert_eq!(code, 0);
    assert!(out.contains("good.toml: ok"));
    let (code, out, _) = tessera(&["check-config", "--example"]);
    assert_eq!(code, 0);
    assert_eq!(out, include_str!("../config.example.toml"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_theme_exits_2_naming_the_key() {
    let dir = std::env::temp_dir().join(format!("tessera-theme-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let bad = dir.join("bad-theme.toml");
    std::fs::write(&bad, "[colors]\nwarning = \"blurple\"\n").unwrap_or_else(|e| panic!("{e}"));
    let (code, _, err) = tessera(&["--theme", bad.to_str().unwrap_or_default()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad-theme.toml: colors.warning = \"blurple\""), "{err}");
    let (code, _, err) = tessera(&["--theme", "no-such-theme"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("built-in themes: default, light, high-contrast, colorblind, mono"), "{err}");
    let (code, out, _) = tessera(&["--theme", "light"]);
    assert_eq!(code, 0);
    assert!(out.contains("SIMULATED"), "not a terminal: the snapshot table");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_reader_leaving_early_is_no_error() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    // Outputs larger than a pipe's buffer (64 KiB), so the write after the reader left fails.
    for args in [&["snapshot", "--demo", "--json"][..], &["snapshot", "--demo", "--demo-size", "64x8"][..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run tessera: {e}"));
        // Like `| head -1`: read one line, then close the pipe.
        let mut first = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut first);
        }
        let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

#[test]
fn snapshot_with_every_source_down_exits_1_and_still_prints() {
    let (code, out, err) = tessera(&["snapshot", "--json", "--nvml=/nonexistent/libnvidia-ml.so.1"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no source answered"), "{err}");
    let v = json(&out);
    assert_eq!(v["sources"][0]["state"], "unavailable");
    assert_eq!(v["queue"]["known"]["state"], "no_scheduler");
}

#[test]
fn check_config_refuses_what_the_console_would_refuse() {
    let dir = std::env::temp_dir().join(format!("tessera-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let broken_theme = dir.join("broken.toml");
    std::fs::write(&broken_theme, "[colors]\nwarning = \"blurple\"\n").unwrap_or_else(|e| panic!("{e}"));
    let cases = [
        ("theme = \"no-such-theme\"\n".to_string(), "no-such-theme"),
        (format!("theme = {:?}\n", broken_theme.display().to_string()), "colors.warning = \"blurple\""),
        ("[slurm]\npreempt_signal = \"FOO\"\n".to_string(), "slurm.preempt_signal = \"FOO\""),
        // What the sources would refuse at start: a missing token file, a CA file that is not
        // PEM, credentials over plain http.
        (
            "[sources]\nprometheus = \"https://p:9090\"\n[sources.http]\nbearer_token_file = \"/nonexistent/token\"\n"
                .to_string(),
            "cannot read /nonexistent/token",
        ),
        (
            format!(
                "[sources]\nscrape = [\"https://g:9400\"]\n[sources.http]\nca_file = {:?}\n",
                broken_theme.display().to_string()
            ),
            "no PEM certificate",
        ),
        (
            "[[sources.auth]]\nurl = \"http://g:9400\"\nbearer_token_env = \"PATH\"\n".to_string(),
            "sources.auth[0]: http://g:9400: credentials over plain http",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let file = dir.join(format!("c{i}.toml"));
        std::fs::write(&file, text).unwrap_or_else(|e| panic!("{e}"));
        let (code, _, err) = tessera(&["check-config", file.to_str().unwrap_or_default()]);
        assert_eq!(code, 2, "{text}: {err}");
        assert!(err.contains(want) && err.contains(&format!("c{i}.toml")), "{text}: {err}");
    }
    let ok = dir.join("ok.toml");
    std::fs::write(&ok, "theme = \"light\"\n[slurm]\npreempt_signal = \"SIGUSR2\"\n").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tessera(&["check-config", ok.to_str().unwrap_or_default()]).0, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn repartition_says_what_is_wrong_and_where_instances_land() {
    // Card 3 of the first A100 node is a whole card in the simulated cluster (seed 7).
    // An invalid layout is a usage error (exit 2; it was 3, a refusal of a valid request).
    let (code, out, _) = tessera(&["repartition", "gpu-a100-01/0", "3g.40gb@1", "--demo", "--seed", "7", "--dry-run"]);
    assert_eq!(code, 2);
    let head = out.lines().next().unwrap_or_default();
    assert!(head.contains("3g.40gb@1: not a valid layout"), "{out}");
    let (_, out, _) =
        tessera(&["repartition", "gpu-a100-01/0", "3g.40gb,2g.20gb", "--demo", "--seed", "7", "--dry-run"]);
    assert!(
        out.lines().next().unwrap_or_default().contains("3g.40gb@0,2g.20gb@4 (placements chosen by tessera"),
        "{out}"
    );
    // The snapshot prints layouts in the form repartition takes.
    let (_, table, _) = tessera(&["snapshot", "--demo", "--seed", "7"]);
    let layout = table
        .lines()
        .find(|l| l.starts_with("gpu-a100-01") && l.contains('@'))
        .and_then(|l| l.split_whitespace().find(|w| w.contains('@')))
        .unwrap_or_else(|| panic!("no MIG layout in {table}"))
        .to_string();
    // Card 0's own layout, typed back: the same layout, so nothing to do (exit 0).
    let own = table
        .lines()
        .find(|l| l.split_whitespace().take(2).eq(["gpu-a100-01", "0"]))
        .and_then(|l| l.split_whitespace().find(|w| w.contains('@')))
        .unwrap_or_else(|| panic!("no layout of card 0 in {table}"))
        .to_string();
    assert_eq!(layout, own, "the first MIG row is card 0");
    let (code, out, err) = tessera(&["repartition", "gpu-a100-01/0", &own, "--demo", "--seed", "7", "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("nothing to do: gpu-a100-01/0 is already"), "{own}: {out}{err}");
}

/// A valid layout written without placements is valid in any order: tessera searches for the
/// placements (2g@0, 2g@2, 3g@4), not greedily in the order written.
#[test]
fn unplaced_layouts_are_placed_by_search_in_the_cli_and_the_config() {
    for text in ["3g.40gb,2g.20gb,2g.20gb", "2g.20gb,2g.20gb,3g.40gb"] {
        let (_, out, err) = tessera(&["repartition", "gpu-h100-01/1", text, "--demo", "--seed", "7", "--dry-run"]);
        let head = out.lines().next().unwrap_or_default();
        assert!(head.contains("2g.20gb@0,2g.20gb@2,3g.40gb@4 (placements chosen by tessera"), "{text}: {out}{err}");
    }
    let dir = std::env::temp_dir().join(format!("tessera-unplaced-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join("h200.toml");
    let cfg = "[[schedule]]\nname = \"h200\"\nnodes = [\"gpu-h200-*\"]\nmodel = \"H200\"\n\n\
               [[schedule.window]]\nname = \"day\"\nhours = \"08:00-20:00\"\nlayout = \"3g.71gb,2g.35gb,2g.35gb\"\n\n\
               [[schedule.window]]\nname = \"night\"\nhours = \"20:00-08:00\"\nlayout = \"whole\"\n";
    std::fs::write(&path, cfg).unwrap_or_else(|e| panic!("{e}"));
    let (code, out, err) = tessera(&["check-config", path.to_str().unwrap_or_default()]);
    assert_eq!(code, 0, "{out}{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn advise_lists_the_waste_and_fails_on_request() {
    let (code, out, err) = tessera(&["advise", "--demo", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["schema_version"], 2, "advise --json is at 2: it carries the plan");
    let findings = v["findings"].as_array().cloned().unwrap_or_default();
    let idle = findings.iter().find(|f| f["kind"] == "held_idle").unwrap_or_else(|| panic!("{out}"));
    // The demo's notebook has held its card idle for hours: the simulator sends the two hours
    // of activity the model keeps, so it is high from the first answer (one hour was sent, and
    // it stayed a warning until the console had run another hour).
    assert_eq!(idle["severity"], "high", "{idle}");
    assert!(idle["gpu_hours_per_day"].as_f64().is_some_and(|h| h > 0.0));
    assert!(idle["evidence"].as_array().is_some_and(|e| !e.is_empty()));
    assert!(findings.iter().any(|f| f["kind"] == "mig_waste"));
    // Waiting work with nowhere to go is capacity to add.
    assert!(findings.iter().any(|f| f["kind"] == "scale_out"), "{out}");
    // For cron: exit 4 when a finding at the level exists (exit 0 when none does: see the
    // Slurm fixture test, where a patient queue threshold leaves nothing).
    assert_eq!(tessera(&["advise", "--demo", "--fail-on", "warn"]).0, 4);
    // Every kind of advice has a case in the demo from its first minute (scale-in too, but it
    // follows the hour of the day the demo starts at: the library's tests cover it by hour;
    // fragmentation not: the demo's MIG cards are all in packed layouts, #36).
    for kind in
        ["held_idle", "oversized", "mig_waste", "unhealthy_held", "preemption_candidate", "scale_out", "layout_plan"]
    {
        assert!(findings.iter().any(|f| f["kind"] == kind), "no {kind} in the demo: {out}");
    }
}

/// Capacity that waiting work could use is never offered for release: no pool has a scale-in
/// while work it could serve (whole cards of its model or of any, its MIG profiles, shares of
/// its shared cards) has a scale-out, over the demo at several seeds.
#[test]
fn advise_never_scales_a_pool_in_while_work_it_serves_waits() {
    for seed in [None, Some("3"), Some("5"), Some("7")] {
        let seeded = |args: &[&str]| {
            let mut args = args.to_vec();
            args.extend(seed.map(|s| ["--seed", s]).into_iter().flatten());
            let (code, out, err) = tessera(&args);
            assert_eq!(code, 0, "{args:?}: {err}");
            json(&out)
        };
        let findings = seeded(&["advise", "--demo", "--json"])["findings"].as_array().cloned().unwrap_or_default();
        let subjects = |kind: &str, key: &str| -> Vec<String> {
            findings
                .iter()
                .filter(|f| f["kind"] == kind)
                .filter_map(|f| f["subject"][key].as_str().map(str::to_string))
                .collect()
        };
        let (pools, short) = (subjects("scale_in", "model"), subjects("scale_out", "resource"));
        if pools.is_empty() || short.is_empty() {
            continue;
        }
        // The share units each pool's cards are shared in, by their catalog or short name.
        let snapshot = seeded(&["snapshot", "--demo", "--json"]);
        let cards: Vec<Value> = snapshot["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|n| n["cards"].as_array().cloned().unwrap_or_default())
            .collect();
        for pool in &pools {
            let (code, layouts, _) = tessera(&["layouts", pool, "--json"]);
            let profiles: Vec<String> = if code == 0 {
                json(&layouts)["layouts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|l| l.as_array().cloned().unwrap_or_default())
                    .filter_map(|p| p["profile"].as_str().map(str::to_string))
                    .collect()
            } else {
                Vec::new()
            };
            let units: Vec<String> = cards
                .iter()
                .filter(|c| c["gpu_model"] == pool.as_str() || c["model"].as_str().is_some_and(|m| m.ends_with(pool)))
                .filter_map(|c| c["sharing"]["unit"].as_str())
                .map(|u| if u == "mps" { "mps share".to_string() } else { u.to_string() })
                .collect();
            for resource in &short {
                let whole = resource == "whole (any)" || *resource == format!("whole {pool}");
                let mig = resource.strip_prefix("MIG ").is_some_and(|p| profiles.iter().any(|x| x == p));
                let shared = units.iter().any(|u| {
                    resource.strip_prefix(u.as_str()).is_some_and(|m| m == " (any)" || *m == format!(" {pool}"))
                });
                assert!(
                    !(whole || mig || shared),
                    "seed {seed:?}: {pool} is offered for release while work it serves waits for {resource}"
                );
            }
        }
    }
}

/// The path of a file under tests/fixtures.
fn fixture_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// A two-window schedule for the simulated H100 nodes, written to a temporary config file.
fn schedule_config(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("tessera-schedule-{name}-{}.toml", std::process::id()));
    // The shared day/night schedule, in Berlin time.
    let text = std::fs::read_to_string(fixture_path("schedules/h100-day-night.toml"))
        .unwrap_or_else(|e| panic!("{e}"))
        .replace("name = \"h100\"", "name = \"h100-day-night\"")
        .replace("timezone = \"UTC\"", "timezone = \"Europe/Berlin\"");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    path
}

#[test]
fn schedule_timeline_json_and_the_mig_parted_export() {
    let cfg = schedule_config("cli");
    let cfg = cfg.to_str().unwrap_or_default();
    let (code, out, err) = tessera(&["schedule", "--demo", "--json", "--config", cfg]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let s = &v["schedules"][0];
    assert_eq!((s["schedule"].as_str(), s["timezone"].as_str()), (Some("h100-day-night"), Some("Europe/Berlin")));
    let cards = s["cards"].as_array().cloned().unwrap_or_default();
    // One node: the other H100 node is DynamicMIG since issue 49, laid out per claim.
    assert_eq!(cards.len(), 8, "the simulated static-MIG H100 node");
    for c in &cards {
        let steps = c["steps"].as_array().cloned().unwrap_or_default();
        // A day and a night start in 24 h (three on a DST day; an overdue change comes first).
        assert!((1..=4).contains(&steps.len()), "{c}");
        for st in &steps {
            for key in
                ["at", "drain_at", "window", "layout", "no_op", "requires", "readiness", "serves_now", "serves_after"]
            {
                assert!(st.get(key).is_some(), "step key {key}");
            }
            // Inference is never preempted by a schedule.
            for n in st["requires"].as_array().into_iter().flatten() {
                if n["kind"] == "inference" {
                    assert_eq!(n["preemptible"], false, "{n}");
                }
            }
        }
    }
    let (code, text, err) = tessera(&["schedule", "--demo", "--config", cfg, "export", "--format", "mig-parted"]);
    assert_eq!(code, 0, "{err}");
    let body: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(&body[..2], ["version: v1", "mig-configs:"]);
    assert!(body.contains(&"  all-1g.10gb:") && body.contains(&"        \"1g.10gb\": 7"), "{text}");
    assert!(body.contains(&"  h100-day-night-night:") && body.contains(&"      mig-enabled: false"), "{text}");
    assert!(text.contains("kubectl label node gpu-h100-01 nvidia.com/mig.config=all-1g.10gb"), "{text}");
    // Apply the change due now on the simulated cluster (running = "preempt"): idle cards are
    // changed; cards held only by training past its minimum runtime are drained, the training
    // preempted (the guard's own rules), then changed; inference is never preempted, its cards
    // are left for later; every action audited.
    // (A window that always holds: the day/night one's change due now depends on the hour the
    // test runs at.)
    let always = std::env::temp_dir().join(format!("tessera-schedule-always-{}.toml", std::process::id()));
    let text = std::fs::read_to_string(cfg).unwrap_or_default();
    let one = text.split("[[schedule.window]]").next().unwrap_or_default().replace("h100-day-night", "h100-always");
    let one = one + "[[schedule.window]]\nname = \"always\"\nhours = \"00:00-24:00\"\nmig_config = \"all-1g.10gb\"\n";
    std::fs::write(&always, one).unwrap_or_else(|e| panic!("{e}"));
    let cfg = always.to_str().unwrap_or_default();
    let state = std::env::temp_dir().join(format!("tessera-schedule-state-{}", std::process::id()));
    let run = |args: &[&str]| with_state(args, &state);
    let (code, text) = run(&["schedule", "--demo", "--config", cfg, "apply", "h100-always", "--dry-run"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("left for later") && text.contains("dry run: nothing done"), "{text}");
    assert!(text.contains("(checkpoint, requeue), wait for it to empty"), "{text}");
    let (code, text) = run(&["schedule", "--demo", "--speed", "60", "--config", cfg, "apply", "h100-always", "--yes"]);
    assert_eq!(code, Some(0), "{text}");
    let applied: usize = text
        .split("applied to ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    let audit = std::fs::read_to_string(state.join("tessera/audit.jsonl")).unwrap_or_default();
    let intents = |what: &str| {
        audit
            .lines()
            .filter(|l| l.contains("\"record\":\"intent\"") && l.contains(&format!("\"action\":\"{what}\"")))
            .count()
    };
    assert_eq!(intents("repartition"), applied, "{audit}");
    assert!(intents("preempt") > 0, "training was preempted for the change: {text}");
    assert!(!audit.contains(", inference): checkpoint"), "no inference preempted: {audit}");
    assert!(!text.contains("refused"), "{text}");
    let _ = std::fs::remove_dir_all(&state);
    let _ = std::fs::remove_file(&always);
    // Without schedules the simulated cluster shows its example; real sources say what to add.
    let (code, out, err) = tessera(&["schedule", "--demo"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("the simulated cluster's example") && out.contains("schedule demo-h100-day-night"),
        "{err}{out}"
    );
    let (code, _, err) = tessera(&["schedule", "--prometheus", "http://127.0.0.1:9"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no [[schedule]]"), "{err}");
}

#[test]
fn schedule_run_applies_unattended_changes_headless_and_refuses_read_only() {
    let cfg = std::env::temp_dir().join(format!("tessera-schedule-run-{}.toml", std::process::id()));
    let text = "[[schedule]]\nname = \"h100-small\"\nnodes = [\"gpu-h100-*\"]\nmodel = \"H100-80GB\"\nunattended = true\n[[schedule.window]]\nname = \"always\"\nhours = \"00:00-24:00\"\nmig_config = \"all-1g.10gb\"\n";
    std::fs::write(&cfg, text).unwrap_or_else(|e| panic!("{e}"));
    let c = cfg.to_str().unwrap_or_default();
    let state = std::env::temp_dir().join(format!("tessera-schedule-run-state-{}", std::process::id()));
    let run = |args: &[&str]| with_state(args, &state);
    let (code, out) = run(&["schedule", "--demo", "--speed", "60", "--config", c, "run", "--for", "2s"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("skipped for window always") && out.contains("done: every step done"), "{out}");
    let audit = std::fs::read_to_string(state.join("tessera/audit.jsonl")).unwrap_or_default();
    assert!(audit.lines().any(|l| l.contains("\"repartition\"")), "{audit}");
    assert!(!audit.contains("\"preempt\""), "unattended never preempts: {audit}");
    let (code, out) = run(&["schedule", "--demo", "--read-only", "--config", c, "run", "--for", "1s"]);
    assert_eq!(code, Some(3), "{out}");
    std::fs::write(&cfg, text.replace("unattended = true\n", "")).unwrap_or_else(|e| panic!("{e}"));
    let (code, out) = run(&["schedule", "--demo", "--config", c, "run", "--for", "1s"]);
    assert_eq!(code, Some(2), "{out}");
    let _ = std::fs::remove_dir_all(&state);
    let _ = std::fs::remove_file(&cfg);
}

/// `schedule suggest` on the simulated cluster: its previous day replayed, every hour measured;
/// the best schedule per MIG model, each a valid config, recommended only when it beats the
/// layout now.
#[test]
fn schedule_suggest_reads_the_measured_day_and_prints_a_valid_schedule() {
    let (code, out, err) = tessera(&["schedule", "suggest", "--demo", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!((v["hours_measured"].as_u64(), v["hours_needed"].as_u64()), (Some(24), Some(24)), "{v}");
    assert!(v["measured_from"].as_str().unwrap_or_default().contains("previous day"), "{v}");
    let dir = std::env::temp_dir().join(format!("tessera-suggest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let found = v["suggestions"].as_array().cloned().unwrap_or_default();
    // The best found per MIG model of the cluster (A100-80GB, H100-80GB, H200), recommended or
    // with why not.
    assert_eq!(found.len(), 3, "{v}");
    for s in &found {
        assert!(s["recommended"] == true || s["why_not"].is_string(), "{s}");
        let path = dir.join("suggested.toml");
        std::fs::write(&path, s["toml"].as_str().unwrap_or_default()).unwrap_or_else(|e| panic!("{e}"));
        let (code, _, err) = tessera(&["check-config", "--config", path.to_str().unwrap_or_default()]);
        assert_eq!(code, 0, "the suggested schedule is a valid config: {err}\n{s}");
        if s["recommended"] == true {
            assert!(s["suggested"]["waiting_gpu_h"].as_f64() < s["current"]["waiting_gpu_h"].as_f64(), "{s}");
        }
        assert_eq!(s["hours"].as_array().map(Vec::len), Some(24));
    }
    let (code, text, err) = tessera(&["schedule", "suggest", "--demo"]);
    assert_eq!(code, 0, "{err}");
    assert!(text.starts_with("MIG schedule suggestion from the demand measured by hour (24 of 24 hours"), "{text}");
    assert!(text.contains("[[schedule]]") || text.contains("the best found for H100-80GB: "), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shipped examples are valid configs (the README runs them).
#[test]
fn the_example_configs_check() {
    let dir = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/examples")).unwrap_or_else(|e| panic!("{e}"));
    let mut checked = 0;
    for entry in dir.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "toml") {
            checked += 1;
            let (code, out, err) = tessera(&["check-config", path.to_str().unwrap_or_default()]);
            assert_eq!(code, 0, "{}: {out}{err}", path.display());
        }
    }
    assert!(checked > 0, "no example config found");
}

/// `record` then `snapshot --at TIME FILE`: one recorded moment, in the snapshot contract;
/// the flags that belong elsewhere, a file that exists, a newer format and no terminal are
/// each said with the usage or failure code.
#[test]
fn record_then_snapshot_at_a_recorded_moment() {
    let dir = std::env::temp_dir().join(format!("tessera-cli-rec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let file = dir.join("r.tsrec");
    let f = file.to_string_lossy().into_owned();
    let (code, _, err) =
        tessera(&["--demo", "--speed", "600", "record", "--for", "3s", "--every", "500ms", "--out", &f]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("recorded") && err.contains(" keyframe"), "{err}");
    let (code, out, err) = tessera(&["snapshot", "--json", &f]);
    assert_eq!(code, 0, "{err}");
    let last = json(&out);
    assert_eq!(last["schema_version"], 1);
    assert_eq!(last["simulated"], true);
    assert!(last["nodes"].as_array().is_some_and(|n| !n.is_empty()), "{last}");
    let end = last["recorded"]["at"].as_str().unwrap_or_default().to_string();
    // A moment a minute of data before the end (600×: within the recording).
    let t = chrono::DateTime::parse_from_rfc3339(&end).map(|t| t - chrono::Duration::seconds(60)).unwrap_or_default();
    let (code, out, err) = tessera(&["snapshot", "--json", "--at", &t.to_rfc3339(), &f]);
    assert_eq!(code, 0, "{err}");
    let past = json(&out);
    assert!(past["recorded"]["at"].as_str().is_some_and(|a| a < end.as_str()), "{past}");
    // Outside it: refused, with the span.
    let (code, _, err) = tessera(&["snapshot", "--at", "2001-01-01T00:00:00Z", &f]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("outside the recording"), "{err}");
    // Never overwritten.
    let (code, _, err) = tessera(&["--demo", "record", "--for", "1s", "--out", &f]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("exists"), "{err}");
    // Not a terminal.
    let (code, _, err) = tessera(&["replay", &f]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs a terminal"), "{err}");
    // A newer format.
    let mut bytes = std::fs::read(&file).unwrap_or_default();
    bytes[8] = 9;
    let newer = dir.join("newer.tsrec");
    std::fs::write(&newer, &bytes).unwrap_or_else(|e| panic!("{e}"));
    let (code, _, err) = tessera(&["snapshot", &newer.to_string_lossy()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("recorded by a newer tessera (recording format 9.0)"), "{err}");
    // Flags where they do not belong.
    let (code, _, err) = tessera(&["--record", &f, "snapshot"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = tessera(&["--at", "03:12", "advise"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = tessera(&["replay"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs a recording FILE"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bare job number is the one workload with that number (`preempt 19` is `sim:19` on the
/// simulated cluster); the plan and its confirmation name the workload whole.
#[test]
fn a_bare_job_number_names_its_workload() {
    let (_, out, err) = tessera(&["preempt", "19", "--demo", "--dry-run"]);
    let head = out.lines().next().unwrap_or_default();
    assert!(head.starts_with("Preempt sim:19 ("), "{out}{err}");
    let (code, _, err) = tessera(&["preempt", "99999", "--demo", "--dry-run"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no workload 99999"), "{err}");
}

/// A model name that is none says which it may have meant.
#[test]
fn an_unknown_model_gets_a_did_you_mean() {
    let (code, _, err) = tessera(&["layouts", "H10"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown GPU model \"H10\" (did you mean H100-80GB or H100-94GB or H100-96GB (GH200)?)"),
        "{err}"
    );
}

/// The timeline's words: a change due now drains from now (it printed a time already past),
/// and layouts show where each instance lands, as `repartition` takes them.
#[test]
fn the_schedule_timeline_says_now_for_due_changes_and_places_layouts() {
    // A window that always holds: every card not in its layout has a change due now.
    let dir = std::env::temp_dir().join(format!("tessera-sched-words-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join("always.toml");
    let text = "[[schedule]]\nname = \"always\"\nnodes = [\"gpu-h100-*\"]\nmodel = \"H100-80GB\"\n\
                [[schedule.window]]\nname = \"all-day\"\nhours = \"00:00-24:00\"\nmig_config = \"all-1g.10gb\"\n";
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    let (code, out, err) = tessera(&["schedule", "--demo", "--config", path.to_str().unwrap_or_default()]);
    assert_eq!(code, 0, "{err}");
    let changes: Vec<&str> = out.lines().filter(|l| l.contains(" -> ")).collect();
    assert!(!changes.is_empty(), "{out}");
    for l in &changes {
        assert!(l.contains("(no new work from now;"), "a due change drains from now: {l}");
        assert!(l.contains("1g.10gb@0,1g.10gb@1"), "placed: {l}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A node's drain on the simulated cluster drains each of its cards (it was refused: "acts on
/// one card").
#[test]
fn a_node_drains_card_by_card_on_the_simulated_cluster() {
    let (code, out, err) = tessera(&["drain", "gpu-a100-01", "--demo", "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("Drain gpu-a100-01: 8 of its 8 cards"), "{out}");
    assert!(out.contains("simulator: drain gpu-a100-01/7"), "{out}");
    let (code, _, err) = tessera(&["repartition", "gpu-a100-01", "whole", "--demo", "--dry-run"]);
    assert_ne!(code, 0, "a layout is still per card: {err}");
    // A node with a drained card undrains that card (it said "not drained": the node is).
    let drained = tessera(&["snapshot", "--demo", "--json"]).1;
    let v = json(&drained);
    let node = v["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| {
            n["cards"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["draining"] == true && c["health"]["lost"] != true))
        })
        .and_then(|n| n["name"].as_str())
        .map(str::to_string);
    if let Some(node) = node {
        let (_, out, err) = tessera(&["undrain", &node, "--demo", "--dry-run", "--force"]);
        assert!(out.starts_with(&format!("Undrain {node}: ")), "{out}{err}");
    }
}

/// `advise` lists the most severe first, then the most GPU-hours (text and JSON); waiting
/// work's evidence says what is free against what it wants the right way round ("6 free of 4
/// wanted" read as "it fits"), with what one node has free where a request needs several.
#[test]
fn advise_is_severity_first_and_says_free_against_wanted() {
    let (code, out, err) = tessera(&["advise", "--demo", "--json"]);
    assert_eq!(code, 0, "{err}");
    let findings = json(&out)["findings"].as_array().cloned().unwrap_or_default();
    let rank = |f: &Value| match f["severity"].as_str() {
        Some("high") => 2,
        Some("warn") => 1,
        _ => 0,
    };
    for pair in findings.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let hours = |f: &Value| f["gpu_hours_per_day"].as_f64().unwrap_or_default();
        assert!(
            rank(a) > rank(b) || (rank(a) == rank(b) && hours(a) >= hours(b)),
            "{} ({}) before {} ({})",
            a["title"],
            a["severity"],
            b["title"],
            b["severity"]
        );
    }
    let (code, text, err) = tessera(&["advise", "--demo"]);
    assert_eq!(code, 0, "{err}");
    let severities: Vec<&str> =
        text.lines().filter_map(|l| l.strip_prefix('[')).filter_map(|l| l.split(']').next()).collect();
    assert_eq!(severities.len(), findings.len(), "{text}");
    let mut sorted = severities.clone();
    sorted.sort_by_key(|s| std::cmp::Reverse(["info", "warn", "high"].iter().position(|x| x == s)));
    assert_eq!(severities, sorted, "{text}");
    // "6 free, at most 3 on one node; ...": what is free, then what one node has free.
    let free_then_block = |e: &str| -> (u64, u64) {
        let (free, rest) = e.split_once(" free, at most ").unwrap_or_else(|| panic!("{e}"));
        let block = rest.split_once(" on one node; ").map(|(b, _)| b).unwrap_or_else(|| panic!("{e}"));
        (free.parse().unwrap_or_else(|_| panic!("{e}")), block.parse().unwrap_or_else(|_| panic!("{e}")))
    };
    // The demo's 4-GPU inference: more than 4 whole cards free, fewer than 4 on any one node.
    let preempt = findings.iter().find(|f| f["kind"] == "preemption_candidate").unwrap_or_else(|| panic!("{out}"));
    let e = preempt["evidence"][0].as_str().unwrap_or_default();
    let (free, block) = free_then_block(e);
    assert!(free >= block && block < 4, "{e}");
    assert!(e.contains(" on one node; it wants 4 together; waited "), "{e}");
    // Its 8-GPU training job, past the threshold, with nowhere to go.
    let short = findings.iter().find(|f| f["kind"] == "scale_out").unwrap_or_else(|| panic!("{out}"));
    let e = short["evidence"][0].as_str().unwrap_or_default();
    let (free, block) = free_then_block(e);
    assert!(free >= block && block < 8, "{e}");
    assert!(e.contains(" on one node; 1 waiting past the threshold (15m) wants 8 together"), "{e}");
    for f in &findings {
        for e in f["evidence"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            assert!(!e.contains(" free of ") && !e.contains(" wanted;"), "{e}");
        }
    }
}

/// #47 (words): a subcommand's help lists only the flags it reads (`layouts --help` listed
/// every source flag); those that read sources still list them.
#[test]
fn subcommand_help_lists_the_flags_it_reads() {
    let (code, out, _) = tessera(&["layouts", "--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("--json") && !out.contains("--prometheus") && !out.contains("--demo"), "{out}");
    let (_, out, _) = tessera(&["check-config", "--help"]);
    assert!(out.contains("--config") && !out.contains("--scrape"), "{out}");
    let (_, out, _) = tessera(&["snapshot", "--help"]);
    assert!(out.contains("--prometheus") && out.contains("--demo"), "{out}");
    // The live fleet's flags, and not the console's.
    for cmd in [&["simulate", "--help"][..], &["schedule", "export", "--help"][..]] {
        let (code, out, _) = tessera(cmd);
        assert_eq!(code, 0, "{cmd:?}");
        assert!(
            out.contains("--prometheus") && out.contains("--demo-size") && out.contains("--seed"),
            "{cmd:?}: {out}"
        );
        for flag in ["--theme", "--ascii", "--record ", "--speed", "--read-only", "--refresh", "--at "] {
            assert!(!out.contains(flag), "{cmd:?} lists {flag}: {out}");
        }
    }
    let (_, out, _) = tessera(&["device-check", "--help"]);
    assert!(out.contains("--nvml") && !out.contains("--prometheus") && !out.contains("--demo"), "{out}");
    // The console's --record is no subcommand's; --at only snapshot's and replay's.
    for cmd in ["snapshot", "advise", "record", "replay", "drain", "preempt", "schedule", "simulate"] {
        let (_, out, _) = tessera(&[cmd, "--help"]);
        assert!(!out.contains("--record "), "{cmd} lists --record: {out}");
        assert_eq!(out.contains("--at "), ["snapshot", "replay"].contains(&cmd), "{cmd}: {out}");
    }
    let (_, out, _) = tessera(&["schedule", "run", "--help"]);
    assert!(!out.contains("--record ") && !out.contains("--at "), "{out}");
    // Still taken where given, read by nobody.
    let (code, out, _) = tessera(&["layouts", "H100", "--demo"]);
    assert_eq!(code, 0, "{out}");
}
