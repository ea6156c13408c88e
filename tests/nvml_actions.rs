//! The NVML executor against the fake libnvidia-ml (tests/fake-nvml): a drain and an undrain
//! through the CLI with the audit log, then in-process checks (plan, execute, collect again):
//! drain/undrain, repartition, a half-way failure, a MIG mode change, read-only. The fake's
//! state is global to a process and loaded once, so each in-process check runs in a child
//! process of its own with its scenario in the environment.

mod common;
#[path = "nvml_actions/support.rs"]
mod support;

use std::path::PathBuf;

use serde_json::{Value, json};
use tessera::actions::plan::plan;
use tessera::actions::{Action, Op, audit};
use tessera::model::ComputeMode;
use tessera::sources::nvml::{hostname, open};

use common::scenario;
use support::*;

/// Drain then undrain card 0 through the CLI. The fake forgets its state between processes,
/// so the undrain runs on a scenario where card 0 is PROHIBITED, as the drain left it; the
/// mode to restore comes from the drain's outcome record in the audit log.
#[test]
fn drain_and_undrain_through_the_cli_with_the_audit_log() {
    let dir = temp_dir("cli");
    let state = dir.join("state");
    let set_mode = |m: &'static str| move |v: &mut Value| v["cards"][0]["compute_mode"] = json!(m);
    let before = derived(&dir, "h100x8.json", "before.json", set_mode("exclusive_process"));
    let drained = derived(&dir, "h100x8.json", "drained.json", set_mode("prohibited"));
    let card = format!("{}/0", hostname());

    let (code, out) = tessera(&["--read-only", "drain", &card, "--yes"], &before, &state);
    assert_eq!(code, 3, "read-only refuses with exit 3:\n{out}");
    assert!(out.contains("refused: tessera runs read-only"), "{out}");
    let refused: Vec<Value> = audit_records(&state).iter().map(|r| r["record"].clone()).collect();
    assert_eq!(refused, vec![json!("refused")], "a refusal is audited, nothing ran");

    let (code, out) = tessera(&["drain", &card, "--yes"], &before, &state);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("done: compute mode EXCLUSIVE_PROCESS -> PROHIBITED"), "{out}");
    let records = audit_records(&state);
    assert_eq!(records.len(), 3, "{records:?}");
    let (intent, outcome) = (&records[1], &records[2]);
    assert_eq!(intent["record"], "intent");
    assert_eq!(intent["plan"]["action"], json!({"action": "drain", "target": card}));
    assert_eq!(intent["plan"]["backend"], "nvml");
    assert_eq!(intent["plan"]["steps"][0]["call"], "nvmlDeviceSetComputeMode(index 0, NVML_COMPUTEMODE_PROHIBITED)");
    assert_eq!(outcome["record"], "outcome");
    assert_eq!(outcome["card"], card);
    assert_eq!(outcome["result"]["ok"], true);
    assert_eq!(outcome["result"]["previous_mode"], "exclusive_process");
    assert_eq!(outcome["result"]["steps"][0]["status"], "done");
    assert_eq!(outcome["result"]["steps"][0]["message"], "compute mode EXCLUSIVE_PROCESS -> PROHIBITED");

    let (code, out) = tessera(&["undrain", &card, "--yes"], &drained, &state);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("NVML_COMPUTEMODE_EXCLUSIVE_PROCESS"), "the mode from the audit log:\n{out}");
    assert!(!out.contains("not in the audit log"), "{out}");
    assert!(out.contains("done: compute mode PROHIBITED -> EXCLUSIVE_PROCESS"), "{out}");
    let records = audit_records(&state);
    assert_eq!(records.len(), 5);
    assert_eq!(records[4]["action"]["action"], "undrain");
    assert_eq!(records[4]["result"]["ok"], true);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn drain_and_undrain_in_process() {
    let dir = temp_dir("drain");
    let file = derived(&dir, "h100x8.json", "s.json", |v| v["cards"][2]["compute_mode"] = json!("exclusive_process"));
    in_child("child_drain_and_undrain", &file);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn child_drain_and_undrain() {
    let Some(lib) = child_lib() else { return };
    let nvml = open(Some(&lib)).unwrap_or_else(|e| panic!("{e}"));
    let target = format!("{}/2", hostname());
    let p = make_plan(&fleet(&nvml), Action::Drain { target: target.clone(), evict: false });
    let o = run(&p, &lib, false);
    assert!(o.ok, "{o:?}");
    assert_eq!(o.previous_mode, Some(ComputeMode::ExclusiveProcess));
    assert_eq!(messages(&o), vec!["compute mode EXCLUSIVE_PROCESS -> PROHIBITED"]);
    let f = fleet(&nvml);
    assert_eq!(mode(&f, 2), Some(ComputeMode::Prohibited));
    assert!(f.nodes[0].cards[2].draining);
    assert_eq!(
        (mode(&f, 1), mode(&f, 3)),
        (Some(ComputeMode::Default), Some(ComputeMode::Default)),
        "others untouched"
    );

    let undrain = plan(&Action::Undrain { target, force: false }, &f, &options(o.previous_mode))
        .unwrap_or_else(|e| panic!("{e}"));
    let o = run(&undrain, &lib, false);
    assert!(o.ok, "{o:?}");
    assert_eq!(messages(&o), vec!["compute mode PROHIBITED -> EXCLUSIVE_PROCESS"]);
    let f = fleet(&nvml);
    assert_eq!(mode(&f, 2), Some(ComputeMode::ExclusiveProcess));
    assert!(!f.nodes[0].cards[2].draining);
}

#[test]
fn repartition_in_process() {
    in_child("child_repartition", &scenario("a100-idle.json"));
}

#[test]
fn child_repartition() {
    let Some(lib) = child_lib() else { return };
    let nvml = open(Some(&lib)).unwrap_or_else(|e| panic!("{e}"));
    let f = fleet(&nvml);
    let old = vec![("3g.40gb".into(), 0, 4, 1), ("2g.20gb".into(), 4, 2, 1), ("1g.10gb".into(), 6, 1, 1)];
    assert_eq!(layout(&f, 0), old);
    let p = make_plan(&f, repartition(0, "4g.40gb@0,3g.40gb@4"));
    assert!(p.allowed(), "{}", p.render());
    let ops: Vec<Op> = p.steps.iter().map(|s| s.op.clone()).collect();
    let create = |profile: &str, start| Op::NvmlCreateGpuInstance { index: 0, profile: profile.into(), start };
    let want = vec![("4g.40gb".to_string(), 0), ("3g.40gb".to_string(), 4)];
    assert_eq!(
        ops,
        vec![
            Op::NvmlDestroyComputeInstance { index: 0, gi: 1, ci: 0 },
            Op::NvmlDestroyGpuInstance { index: 0, gi: 1 },
            Op::NvmlDestroyComputeInstance { index: 0, gi: 2, ci: 0 },
            Op::NvmlDestroyGpuInstance { index: 0, gi: 2 },
            Op::NvmlDestroyComputeInstance { index: 0, gi: 3, ci: 0 },
            Op::NvmlDestroyGpuInstance { index: 0, gi: 3 },
            create("4g.40gb", 0),
            create("3g.40gb", 4),
            Op::NvmlVerifyLayout { index: 0, layout: want.clone() },
        ]
    );
    let o = run(&p, &lib, false);
    assert!(o.ok, "{o:?}");
    assert_eq!(statuses(&o), vec!["done"; 9]);
    assert_eq!(o.reached, "every step done");
    let m = messages(&o);
    assert_eq!(m[0], "destroyed compute instance 0 of GPU instance 1");
    assert_eq!(m[1], "destroyed GPU instance 1");
    assert_eq!(m[6], "created GPU instance 1 (4g.40gb@0, slices 0-3) with compute instance 0 (4 compute slices)");
    assert_eq!(m[7], "created GPU instance 2 (3g.40gb@4, slices 4-7) with compute instance 0 (3 compute slices)");
    assert_eq!(m[8], "layout read back: 4g.40gb@0,3g.40gb@4 matches the plan");
    let f = fleet(&nvml);
    assert_eq!(layout(&f, 0), vec![("4g.40gb".into(), 0, 4, 1), ("3g.40gb".into(), 4, 4, 1)]);
    let cis: Vec<String> = f.nodes[0].cards[0]
        .mig
        .instances
        .iter()
        .flat_map(|i| i.compute_instances.iter().map(|c| c.profile.clone()))
        .collect();
    assert_eq!(cis, vec!["4c.4g.40gb", "3c.3g.40gb"], "one full-size compute instance each");

    // Planned from what was read back: a media-extension profile, told apart by its NVML enum.
    let p = make_plan(&f, repartition(0, "4g.40gb@0,2g.20gb@4,1g.10gb+me@6"));
    assert_eq!(p.steps.len(), 8, "{}", p.render());
    let o = run(&p, &lib, false);
    assert!(o.ok, "{o:?}");
    assert_eq!(messages(&o)[7], "layout read back: 4g.40gb@0,2g.20gb@4,1g.10gb+me@6 matches the plan");
    let now = vec![("4g.40gb".into(), 0, 4, 1), ("2g.20gb".into(), 4, 2, 1), ("1g.10gb+me".into(), 6, 1, 1)];
    assert_eq!(layout(&fleet(&nvml), 0), now);

    // Single steps that fail name the call and NVML's error, and change nothing.
    let step = |op: Op| tessera::actions::nvml::run_op(&op, Some(&lib)).map_err(|e| e.to_string());
    let verify_old = Op::NvmlVerifyLayout { index: 0, layout: vec![("3g.40gb".into(), 0), ("1g.10gb".into(), 6)] };
    assert_eq!(
        step(verify_old),
        Err(
            "layout read back: 4g.40gb@0,2g.20gb@4,1g.10gb+me@6 does not match the plan: missing 3g.40gb@0,1g.10gb@6; \
             not planned 4g.40gb@0,2g.20gb@4,1g.10gb+me@6"
                .into()
        )
    );
    assert_eq!(
        step(Op::NvmlDestroyGpuInstance { index: 0, gi: 9 }),
        Err("nvmlDeviceGetGpuInstanceById(GPU 0 GI 9): a query to find an object was unsuccessful".into())
    );
    assert_eq!(
        step(Op::NvmlDestroyGpuInstance { index: 0, gi: 1 }),
        Err("nvmlGpuInstanceDestroy(GPU 0 GI 1): operation cannot be performed because the GPU is currently in use"
            .into())
    );
    assert_eq!(
        step(Op::NvmlDestroyComputeInstance { index: 0, gi: 1, ci: 4 }),
        Err("nvmlGpuInstanceGetComputeInstanceById(GPU 0 GI 1 CI 4): a query to find an object was unsuccessful".into())
    );
    assert_eq!(
        step(create("1g.10gb", 7)),
        Err("1g.10gb cannot start at slice 7 on GPU 0 (allowed starts: 0, 1, 2, 3, 4, 5, 6)".into())
    );
    assert_eq!(
        step(create("1g.10gb", 5)),
        Err("nvmlDeviceCreateGpuInstanceWithPlacement(GPU 0, profile id 19, start 5, size 1): \
             insufficient resources (NVML_ERROR_INSUFFICIENT_RESOURCES)"
            .into())
    );
    assert_eq!(step(create("5g.50gb", 0)), Err("A100-80GB has no MIG profile 5g.50gb".into()));
    assert_eq!(layout(&fleet(&nvml), 0), now);
}

/// The A100 repartition with the fake failing every mutation after the first `n`.
fn failing(n: u32) -> (PathBuf, PathBuf) {
    let dir = temp_dir(&format!("fail{n}"));
    let file = derived(&dir, "a100-idle.json", "s.json", |v| v["fail_after_mutations"] = json!(n));
    (dir, file)
}

#[test]
fn a_failure_half_way_is_reported_and_audited() {
    for (n, child) in [(6, "child_fail_after_the_destroys"), (7, "child_fail_inside_a_create")] {
        let (dir, file) = failing(n);
        in_child(child, &file);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Six mutations: the three compute and three GPU instances are destroyed; the first creation fails.
#[test]
fn child_fail_after_the_destroys() {
    let Some(lib) = child_lib() else { return };
    let nvml = open(Some(&lib)).unwrap_or_else(|e| panic!("{e}"));
    let p = make_plan(&fleet(&nvml), repartition(0, "4g.40gb@0,3g.40gb@4"));
    let o = run(&p, &lib, false);
    assert!(!o.ok);
    let mut want = vec!["done"; 6];
    want.extend(["failed", "not run", "not run"]);
    assert_eq!(statuses(&o), want);
    let error = "nvmlDeviceCreateGpuInstanceWithPlacement(GPU 0, profile id 5, start 0, size 4): \
                 an internal driver error occurred";
    assert_eq!(o.error.as_deref(), Some(error));
    assert_eq!(o.steps[6].message.as_deref(), Some(error));
    let done: Vec<&str> = p.steps[..6].iter().map(|s| s.what.as_str()).collect();
    assert_eq!(done[5], "Destroy GPU instance 3 (1g.10gb@6)");
    assert_eq!(
        o.reached,
        format!("steps 1-6 done ({}); step 7 failed: {error}; steps after it did not run", done.join("; "))
    );
    assert_eq!(layout(&fleet(&nvml), 0), vec![], "the card is left empty, as reached says");

    // The audit log records what the CLI would: the intent, then this outcome.
    let dir = temp_dir("audit");
    let path = dir.join("tessera/audit.jsonl");
    audit::append(&path, &audit::intent(&p)).unwrap_or_else(|e| panic!("{e}"));
    audit::append(&path, &audit::outcome(&p, &o)).unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap_or(Value::Null)).collect();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["plan"]["steps"].as_array().map(Vec::len), Some(9));
    let result = &records[1]["result"];
    assert_eq!(result["ok"], false);
    assert_eq!(result["reached"], o.reached.as_str());
    assert_eq!(result["error"], error);
    let logged: Vec<&str> =
        result["steps"].as_array().into_iter().flatten().map(|s| s["status"].as_str().unwrap_or("?")).collect();
    assert_eq!(logged, want);
    assert_eq!(result["steps"][6]["message"], error);
    assert_eq!(result["steps"][6]["call"], p.steps[6].call.as_str());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Seven mutations: the GPU instance is created, its compute instance is not, and removing the
/// GPU instance again fails too; the message says it remains.
#[test]
fn child_fail_inside_a_create() {
    let Some(lib) = child_lib() else { return };
    let nvml = open(Some(&lib)).unwrap_or_else(|e| panic!("{e}"));
    let p = make_plan(&fleet(&nvml), repartition(0, "4g.40gb@0,3g.40gb@4"));
    let o = run(&p, &lib, false);
    assert_eq!(statuses(&o)[5..], ["done", "failed", "not run", "not run"]);
    let error = "created GPU instance 1 (4g.40gb@0) but nvmlGpuInstanceCreateComputeInstance(GPU 0 GI 1): an internal \
                 driver error occurred; destroying it again failed too (nvmlGpuInstanceDestroy(GPU 0 GI 1): an internal \
                 driver error occurred): GPU instance 1 remains, without a compute instance";
    assert_eq!(o.error.as_deref(), Some(error));
    assert!(o.reached.ends_with(&format!("step 7 failed: {error}; steps after it did not run")), "{}", o.reached);
    assert_eq!(layout(&fleet(&nvml), 0), vec![("4g.40gb".into(), 0, 4, 0)], "as the message says");
}

#[test]
fn a_mig_mode_change_is_refused() {
    let dir = temp_dir("mig");
    // Card 0 MIG; 1 whole; 2 whole with MIG on pending a reset; 3 MIG with MIG off pending.
    let file = derived(&dir, "a100-idle.json", "s.json", |v| {
        let card = |i: u32, enabled: bool, pending: bool| {
            let mut c = v["cards"][0].clone();
            (c["mig_enabled"], c["mig_pending"], c["instances"]) = (json!(enabled), json!(pending), json!([]));
            c["uuid"] = json!(format!("GPU-5a9e0f36-2d1b-4c8e-9f1a-00000000000{i}"));
            c["pci_bus_id"] = json!(format!("00000000:0{}:00.0", i + 7));
            c
        };
        let more = [card(1, false, false), card(2, false, true), card(3, true, false)];
        v["cards"].as_array_mut().into_iter().for_each(|c| c.extend(more.clone()));
    });
    in_child("child_mig_mode_change", &file);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn child_mig_mode_change() {
    let Some(lib) = child_lib() else { return };
    let nvml = open(Some(&lib)).unwrap_or_else(|e| panic!("{e}"));
    let f = fleet(&nvml);
    let before = (layout(&f, 0), layout(&f, 1));
    assert_eq!((before.0.len(), before.1.len()), (3, 0));
    for (index, to, flag) in [(1, "3g.40gb@0,3g.40gb@4", ("on", 1)), (0, "whole", ("off", 0))] {
        let p = make_plan(&f, repartition(index, to));
        let blocker = format!(
            "this needs MIG mode {}, which takes effect only after a GPU reset (nvidia-smi -i {index} -mig {}); \
             tessera does not change MIG mode or reset GPUs",
            flag.0, flag.1
        );
        assert_eq!(p.blockers, vec![blocker.clone()]);
        let o = run(&p, &lib, false);
        assert!(!o.ok);
        assert_eq!(o.error, Some(format!("refused: {blocker}")));
        assert_eq!(o.reached, "nothing was changed");
    }
    let p = make_plan(&f, repartition(2, "7g.80gb@0"));
    assert_eq!(
        p.blockers,
        vec![
            "this needs MIG mode on, which is already pending: it takes effect after a GPU reset (nvidia-smi -i 2 -r); \
             tessera does not reset GPUs"
        ]
    );
    let p = make_plan(&f, repartition(3, "7g.80gb@0"));
    assert!(p.allowed());
    assert_eq!(
        p.warnings,
        vec!["MIG mode off is pending on this card: the new instances disappear at its next GPU reset"]
    );
    // A plan with steps and a blocker is refused before its first step.
    let mut p = make_plan(&f, repartition(0, "7g.80gb@0"));
    assert_eq!(p.steps.len(), 8);
    p.blockers.push("test blocker".into());
    let o = run(&p, &lib, false);
    assert_eq!((o.ok, statuses(&o)), (false, vec!["not run"; 8]));
    let after = fleet(&nvml);
    assert_eq!((layout(&after, 0), layout(&after, 1)), before, "nothing changed");
    assert!(!after.nodes[0].cards[1].mig.enabled);
}

#[test]
fn read_only_refuses() {
    in_child("child_read_only", &scenario("a100-idle.json"));
}

#[test]
fn child_read_only() {
    let Some(lib) = child_lib() else { return };
    let nvml = open(Some(&lib)).unwrap_or_else(|e| panic!("{e}"));
    let f = fleet(&nvml);
    let target = format!("{}/0", hostname());
    for action in [repartition(0, "7g.80gb@0"), Action::Drain { target: target.clone(), evict: false }] {
        let p = make_plan(&f, action);
        assert!(p.allowed() && !p.steps.is_empty());
        let o = run(&p, &lib, true);
        assert!(!o.ok);
        assert_eq!(o.error.as_deref(), Some("read-only: the executor refuses every action"));
        assert_eq!(o.reached, "nothing was changed");
        assert!(statuses(&o).iter().all(|s| *s == "not run"));
    }
    let mut o = options(None);
    o.ctx.read_only = true;
    let p = plan(&Action::Drain { target, evict: false }, &f, &o).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.blockers, vec!["tessera runs read-only: every action is refused"]);
    let after = fleet(&nvml);
    assert_eq!(layout(&after, 0), layout(&f, 0));
    assert_eq!(mode(&after, 0), Some(ComputeMode::Default));
}

/// A schedule applied on the fake NVML: the window in effect (all day) wants another MIG
/// layout on the idle A100, so `schedule apply` repartitions it through the runner (audited);
/// a window that wants MIG off is left, since NVML cannot switch MIG mode without a reset.
#[test]
fn a_schedule_applied_through_nvml() {
    let dir = temp_dir("schedule");
    let state = dir.join("state");
    let cfg = dir.join("tessera.toml");
    let write = |layout: &str| {
        let text = format!(
            "[[schedule]]\nname = \"a100\"\nmodel = \"A100-80GB\"\n[[schedule.window]]\nname = \"always\"\nhours = \"00:00-24:00\"\nlayout = \"{layout}\"\n"
        );
        std::fs::write(&cfg, text).unwrap_or_else(|e| panic!("{e}"));
    };
    let idle = scenario("a100-idle.json");
    write("4g.40gb@0,3g.40gb@4");
    let c = cfg.to_str().unwrap_or_default();
    let (code, out) = tessera(&["schedule", "--config", c, "apply", "a100", "--yes"], &idle, &state);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("window always applied to 1 card\n"), "{out}");
    let records = audit_records(&state);
    let kinds: Vec<&str> = records.iter().filter_map(|r| r["record"].as_str()).collect();
    assert_eq!(kinds, ["intent", "outcome"], "{records:?}");
    assert_eq!(records[1]["result"]["ok"], true, "{:?}", records[1]);
    write("whole");
    let (code, out) = tessera(&["schedule", "--config", c, "apply", "a100", "--yes"], &idle, &state);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("switching MIG mode needs a GPU reset"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One action at a time on a card across processes: while another tessera holds the card's
/// lock (here this test, as a console mid-action would), a drain is refused with who holds it
/// and nothing runs; once released, the drain runs.
#[test]
fn a_card_another_process_acts_on_is_refused_with_who_holds_it() {
    let dir = temp_dir("lock");
    let state = dir.join("state");
    let card = format!("{}/0", hostname());
    // The host's lock place, here one of this test's own.
    let locks = dir.join("locks");
    let cfg = dir.join("tessera.toml");
    std::fs::write(&cfg, format!("[actions]\nlock_dir = {:?}\n", locks.display().to_string()))
        .unwrap_or_else(|e| panic!("{e}"));
    let cfg = cfg.display().to_string();
    std::fs::create_dir_all(&locks).unwrap_or_else(|e| panic!("{e}"));
    // Nobody else's to write, whatever the umask (else the place is refused).
    std::fs::set_permissions(&locks, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .unwrap_or_else(|e| panic!("{e}"));
    // The node's lock: an action on any of its cards takes it.
    let path = locks.join(format!(
        "tessera.{}.lock",
        hostname().replace(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '.', "_")
    ));
    let held = std::fs::File::create(&path).unwrap_or_else(|e| panic!("{e}"));
    held.try_lock().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        &path,
        "{\"user\":\"alice\",\"host\":\"login-1\",\"pid\":4242,\"action\":\"Repartition ...\",\"since\":\"2026-12-04 10:02:11Z\"}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (code, out) = tessera(&["drain", &card, "--yes", "--config", &cfg], &scenario("h100x8.json"), &state);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains(&format!("{} is being acted on by alice@login-1 (pid 4242", hostname())), "{out}");
    assert!(audit_records(&state).iter().all(|r| r["record"] != "intent"), "nothing ran");
    drop(held);
    let (code, out) = tessera(&["drain", &card, "--yes", "--config", &cfg], &scenario("h100x8.json"), &state);
    assert_eq!(code, 0, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
