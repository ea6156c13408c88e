//! A card taken while the operator confirmed a repartition: the runner offers the plan that
//! holds the card (drain), waits for its work to end, then changes it and gives it back.

use std::sync::{Arc, Mutex};

use chrono::Utc;

use super::tests::records;
use super::{Approval, Runner};
use crate::actions::{Action, Env};
use crate::config::Config;
use crate::model::Fleet;
use crate::sources::sim::{SimError, SimHandle, SimOp, SimRequest};

fn at() -> chrono::DateTime<Utc> {
    chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 3, 2, 14, 30, 0).single().unwrap_or_default()
}

/// A stand-in for the running simulator: it answers every operation and says the card is
/// busy the first `busy_for` times it is asked whether it is idle (`u32::MAX`: always busy).
fn simulator(busy_for: u32, speed: f64) -> (SimHandle, Arc<Mutex<Vec<String>>>) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<SimRequest>(8);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let mut asked = 0;
        while let Some(req) = rx.recv().await {
            let answer = match &req.op {
                SimOp::WaitIdle { node, index, .. } if asked < busy_for => {
                    asked += 1;
                    Err(SimError::NotIdle { node: node.clone(), index: *index, holders: 1 })
                }
                op => Ok(op.to_string()),
            };
            log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(req.op.to_string());
            let _ = req.reply.send(answer);
        }
    });
    (SimHandle { tx, speed }, seen)
}

/// A MIG card of the demo made idle (its holders gone), to be laid out whole.
fn idle_mig_card(f: &mut Fleet) -> String {
    let (n, c) = f
        .nodes
        .iter_mut()
        .flat_map(|n| {
            let name = n.name.clone();
            n.cards.iter_mut().map(move |c| (name.clone(), c))
        })
        .find(|(_, c)| c.mig.enabled && !c.draining && c.health.fault().is_none())
        .unwrap_or_else(|| panic!("the demo has a MIG card"));
    c.workloads.clear();
    for i in &mut c.mig.instances {
        i.workloads.clear();
        (i.utilization_pct, i.memory_used_mib) = (Some(0.0), Some(0));
    }
    format!("{n}/{}", c.index)
}

/// `f` with the card `target` held by `who` alone (by nobody: `None`).
fn held_by(f: &Fleet, target: &str, who: Option<&str>) -> Fleet {
    let mut moved = f.clone();
    let (node, index) = target.split_once('/').unwrap_or_default();
    let index: u32 = index.parse().unwrap_or_default();
    for n in moved.nodes.iter_mut().filter(|n| n.name == node) {
        for c in n.cards.iter_mut().filter(|c| c.index == index) {
            c.workloads.clear();
            c.mig.instances.iter_mut().for_each(|i| i.workloads.clear());
            let gi = c.mig.instances.first().map(|i| i.gi_id);
            if let Some(who) = who {
                c.add_holder(gi, who);
            }
        }
    }
    moved
}

fn taken(f: &Fleet, target: &str) -> Fleet {
    held_by(f, target, Some("sim:arrived"))
}

fn runner(dir: &std::path::Path, sim: SimHandle) -> (Runner, std::path::PathBuf) {
    let _ = std::fs::create_dir_all(dir);
    let path = dir.join("audit.jsonl");
    let mut cfg = Config::default();
    cfg.actions.lock_dir = Some(dir.join("locks"));
    let env = Env { sim: Some(sim), ..Env::default() };
    (Runner::new(&cfg, env).with_audit(Some(path.clone())), path)
}

/// The held plan, as offered at the re-check: drain, wait, change, undrain.
fn held_plan(r: &Runner, path: &std::path::Path) -> (crate::actions::Plan, Fleet) {
    let mut f = crate::engine::simulated_store(42, at()).fleet().clone();
    let target = idle_mig_card(&mut f);
    let shown = r
        .propose(&Action::Repartition { target: target.clone(), layout: "whole".into() }, &f)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(shown.allowed() && !shown.wait_idle, "{:?}", shown.blockers);
    let moved = taken(&f, &target);
    let Approval::Changed(held) = r.approve(&shown, &moved) else { panic!("a taken card changes the plan") };
    // The refusal at the re-check is audited, as every refusal is.
    assert_eq!(records(path), vec!["refused"]);
    (*held, moved)
}

#[tokio::test]
async fn a_card_taken_while_confirming_is_held_then_changed_once_idle() {
    let dir = std::env::temp_dir().join(format!("tessera-hold-{}-idle", std::process::id()));
    let (sim, seen) = simulator(3, 3600.0);
    let (r, path) = runner(&dir, sim);
    let (held, moved) = held_plan(&r, &path);
    assert!(held.allowed() && held.wait_idle, "{:?}", held.blockers);
    let calls: Vec<&str> = held.steps.iter().map(|s| s.call.as_str()).collect();
    assert!(calls[0].starts_with("simulator: drain "), "{calls:?}");
    assert!(calls[1].starts_with("simulator: wait until ") && calls[1].contains("is idle"), "{calls:?}");
    assert!(calls.last().is_some_and(|c| c.starts_with("simulator: undrain ")), "{calls:?}");
    assert!(held.warnings[0].contains("was taken while the plan was confirmed (sim:arrived)"), "{:?}", held.warnings);
    // The held plan has the steps the plan shown had: only the guard's answer differs.
    let target = held.target.clone();
    let shown = r.check(&held.action, &held_by(&moved, &target, None)).map(|p| p.steps).unwrap_or_default();
    assert_eq!(held.steps, shown);
    // Confirmed again while other work holds the card (the first left, another came), or none
    // does: the same plan, so it runs.
    // (Without an audit log an unchanged plan stops just before its intent: nothing is left open.)
    let unaudited = r.clone().with_audit(None);
    for now in [held_by(&moved, &target, Some("sim:another")), held_by(&moved, &target, None)] {
        let a = unaudited.approve(&held, &now);
        assert!(matches!(a, Approval::NotStarted(_)), "the held plan stands whoever holds the card: {a:?}");
    }
    let Approval::Go(approved) = r.approve(&held, &moved) else { panic!("the held plan is approved") };
    let finished = approved.run(None).await;
    assert!(finished.outcome.ok, "{:?}", finished.outcome);
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    let kinds: Vec<&str> = seen.iter().map(|s| s.split_whitespace().next().unwrap_or("")).collect();
    assert_eq!(kinds, vec!["drain", "wait", "wait", "wait", "wait", "repartition", "undrain"], "{seen:?}");
    assert_eq!(records(&path), vec!["refused", "intent", "outcome"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_held_card_whose_work_does_not_end_is_left_drained_and_unchanged() {
    let dir = std::env::temp_dir().join(format!("tessera-hold-{}-busy", std::process::id()));
    // 1,800 simulated seconds pass in about half a second.
    let (sim, seen) = simulator(u32::MAX, 3600.0);
    let (r, path) = runner(&dir, sim);
    let (held, moved) = held_plan(&r, &path);
    let Approval::Go(approved) = r.approve(&held, &moved) else { panic!("the held plan is approved") };
    let finished = approved.run(None).await;
    let o = &finished.outcome;
    assert!(!o.ok);
    assert!(
        o.error
            .as_deref()
            .is_some_and(|e| e.contains("still held") && e.contains("not changed") && e.contains("given back")),
        "{o:?}"
    );
    assert!(o.reached.starts_with("steps 1-1 done (Drain the card"), "{}", o.reached);
    // Never changed, and given back: the plan drained it.
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert!(!seen.iter().any(|s| s.starts_with("repartition")), "{seen:?}");
    assert!(seen.last().is_some_and(|s| s.starts_with("undrain")), "{seen:?}");
    assert_eq!(records(&path), vec!["refused", "intent", "outcome"]);
    let _ = std::fs::remove_dir_all(&dir);
}
