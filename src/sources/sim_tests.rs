//! Tests for the simulated cluster: determinism, queue growth, the load curve.

use std::time::Duration;

use chrono::{TimeZone, Utc};

use super::*;
use crate::model::{WorkloadKind, WorkloadState};

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 9, 0, 0).single().unwrap_or_default()
}

fn pending(p: &Partial) -> usize {
    p.workloads.iter().filter(|w| w.state == WorkloadState::Pending).count()
}

/// Every simulated workload is named after the team that owns it (`search/embed-small-14`
/// was owned by `vision`), over a day, for a few seeds.
#[test]
fn names_and_owners_agree() {
    for seed in [7, 42, 1234] {
        let mut sim = Sim::new(SimConfig::new(seed, start()));
        for _ in 0..24 {
            sim.advance(Duration::from_secs(3600));
            for w in &sim.snapshot().workloads {
                let owner = w.owner.as_deref().unwrap_or("?");
                assert!(w.name.starts_with(&format!("{owner}/")), "seed {seed}: {} owned by {owner}", w.name);
            }
        }
    }
}

/// The first frame's running work says when it started: each "started" event is at its
/// workload's start (they were at the console's start for work that had run for hours).
#[test]
fn start_events_are_dated_when_the_work_started() {
    let mut sim = Sim::new(SimConfig::new(42, start()));
    let p = sim.snapshot();
    let mut checked = 0;
    for e in &p.events {
        let Some((id, _)) = e.text.split_once(" started (") else { continue };
        let Some(w) = p.workloads.iter().find(|w| w.id == id) else { continue };
        if w.state == WorkloadState::Running {
            assert_eq!(Some(e.at), w.started_at, "{}", e.text);
            checked += 1;
        }
    }
    assert!(checked > 10, "{checked} start events checked");
}

#[test]
fn same_seed_same_fleet_after_n_minutes() {
    let mut a = Sim::new(SimConfig::new(42, start()));
    let mut b = Sim::new(SimConfig::new(42, start()));
    // Fed in different chunks: the tick grid keeps them identical.
    a.advance(Duration::from_secs(30 * 60));
    for _ in 0..180 {
        b.advance(Duration::from_secs(10));
    }
    let (sa, sb) = (a.snapshot(), b.snapshot());
    assert_eq!(sa.nodes, sb.nodes);
    assert_eq!(sa.workloads, sb.workloads);
    let mut c = Sim::new(SimConfig::new(43, start()));
    c.advance(Duration::from_secs(30 * 60));
    assert_ne!(c.snapshot().workloads, sa.workloads, "another seed gives another cluster");
}

#[test]
fn the_default_fleet_is_realistic() {
    let mut sim = Sim::new(SimConfig::new(1, start()));
    let p = sim.snapshot();
    assert!(p.simulated);
    assert_eq!(p.nodes.len(), 7, "four MIG and whole-card nodes, three shared ones");
    let cards: Vec<_> = p.nodes.iter().flat_map(|n| &n.cards).collect();
    assert_eq!(cards.len(), 42);
    assert!(cards.iter().any(|c| c.mig.enabled) && cards.iter().any(|c| !c.mig.enabled));
    for model in ["A100-80GB", "H100-80GB", "H200-141GB"] {
        assert!(cards.iter().any(|c| c.gpu_model().is_some_and(|m| m.name == model)), "{model}");
    }
    assert!(p.workloads.iter().any(|w| w.state == WorkloadState::Running && w.kind == WorkloadKind::Inference));
    assert!(p.workloads.iter().any(|w| w.state == WorkloadState::Running && w.kind == WorkloadKind::Training));
    // Every running workload's cards exist and list it as a holder.
    for w in p.workloads.iter().filter(|w| w.state == WorkloadState::Running) {
        for r in &w.cards {
            let card =
                p.nodes.iter().find(|n| n.name == r.node).and_then(|n| n.cards.iter().find(|c| c.index == r.index));
            assert!(card.is_some_and(|c| c.holders().any(|h| h == w.id)), "{} on {r}", w.id);
        }
    }
    // Every sharing mode shows, each shared card within its replicas, its contexts its holders.
    use crate::model::SharingMode;
    let modes: std::collections::BTreeSet<_> = cards.iter().filter_map(|c| c.sharing_mode()).collect();
    // Five since the DynamicMIG node (issue 49): exclusive, MIG, time-sliced, MPS, DRA dynamic.
    assert_eq!(modes.len(), 5, "{modes:?}");
    for c in cards.iter().filter(|c| c.sharing_mode().is_some_and(SharingMode::unisolated)) {
        let (used, replicas) = (c.sharing.replicas_used.unwrap_or(99), c.sharing.replicas.unwrap_or(0));
        assert!(used <= replicas && used as usize == c.workloads.len(), "{c:?}");
        assert_eq!(c.sharing.contexts, Some(used));
        assert!(c.memory_used_mib <= c.memory_total_mib);
    }
    // MIG cards report no whole-card utilisation; instances do.
    for c in cards.iter().filter(|c| c.mig.enabled) {
        assert_eq!(c.utilization_pct, None);
        assert!(c.mig.instances.iter().all(|i| i.utilization_pct.is_some()));
    }
}

#[test]
fn the_queue_grows_when_arrivals_exceed_capacity() {
    let mut calm = Sim::new(SimConfig::new(5, start()));
    let mut busy = Sim::new(SimConfig { arrival_scale: 20.0, ..SimConfig::new(5, start()) });
    calm.advance(Duration::from_secs(3 * 3600));
    busy.advance(Duration::from_secs(3 * 3600));
    let (pc, pb) = (pending(&calm.snapshot()), pending(&busy.snapshot()));
    assert!(pb > pc + 10, "busy {pb} vs calm {pc}");
    let later = {
        busy.advance(Duration::from_secs(3 * 3600));
        pending(&busy.snapshot())
    };
    assert!(later > pb, "the queue keeps growing: {later} after {pb}");
    assert!(busy.snapshot().workloads.iter().filter(|w| w.state == WorkloadState::Pending).all(|w| w.reason.is_some()));
}

#[test]
fn utilisation_follows_the_load_curve() {
    let night = Utc.with_ymd_and_hms(2026, 3, 2, 4, 0, 0).single().unwrap_or_default();
    let afternoon = Utc.with_ymd_and_hms(2026, 3, 2, 16, 0, 0).single().unwrap_or_default();
    assert!((jobs::load_curve(night) - 0.2).abs() < 1e-9);
    assert!((jobs::load_curve(afternoon) - 1.0).abs() < 1e-9);
    let mean_inference = |sim: &mut Sim| {
        let p = sim.snapshot();
        let ids: Vec<_> = p
            .workloads
            .iter()
            .filter(|w| w.kind == WorkloadKind::Inference && w.state == WorkloadState::Running)
            .map(|w| w.id.clone())
            .collect();
        let utils: Vec<f64> = p
            .nodes
            .iter()
            .flat_map(|n| &n.cards)
            .flat_map(|c| &c.mig.instances)
            .filter(|i| i.workloads.iter().any(|w| ids.contains(w)))
            .filter_map(|i| i.utilization_pct)
            .collect();
        utils.iter().sum::<f64>() / utils.len().max(1) as f64
    };
    let mut sim = Sim::new(SimConfig::new(9, night));
    let low = mean_inference(&mut sim);
    sim.advance(Duration::from_secs(12 * 3600));
    let high = mean_inference(&mut sim);
    assert!(high > low * 2.0, "afternoon {high:.1} vs night {low:.1}");
}

#[test]
fn demo_size_scales_to_thousands_of_cards() {
    let mut sim = Sim::new(SimConfig { size: Some((512, 8)), ..SimConfig::new(3, start()) });
    let p = sim.snapshot();
    assert_eq!(p.nodes.iter().map(|n| n.cards.len()).sum::<usize>(), 4096);
}

#[test]
fn the_free_counts_kept_by_the_scheduler_match_a_fresh_count() {
    // They are kept current as jobs take and leave cards; a recount must agree after hours of
    // starts and completions, on both fleets, and after operations.
    for size in [None, Some((64, 8))] {
        let mut sim = Sim::new(SimConfig { size, ..SimConfig::new(5, start()) });
        for hour in 0..6 {
            sim.advance(Duration::from_secs(3600));
            assert_eq!(sim.free, Some(sim.count_free_capacity()), "{size:?}, hour {hour}");
        }
        let node = sim.nodes[0].name.clone();
        let ran = sim.apply(&SimOp::Drain { node: node.clone(), index: 0 });
        assert!(ran.is_ok(), "{ran:?}");
        sim.advance(Duration::from_secs(600));
        assert_eq!(sim.free, Some(sim.count_free_capacity()), "{size:?}, after a drain");
    }
}

#[test]
fn the_default_queue_stays_bounded_over_a_simulated_week() {
    let mut sim = Sim::new(SimConfig::new(11, start()));
    let mut worst = 0;
    for _ in 0..(7 * 24) {
        sim.advance(Duration::from_secs(3600));
        worst = worst.max(pending(&sim.snapshot()));
    }
    assert!(worst < 60, "the queue peaked at {worst}");
    assert!(sim.snapshot().workloads.len() < 200);
}

#[test]
fn the_previous_day_replayed_gives_demand_for_every_hour_with_the_daytime_wave() {
    let start = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 3, 2, 14, 30, 0).single().unwrap_or_default();
    let d = Sim::past_day_demand(&SimConfig::new(42, start));
    assert_eq!(d.covered(), 24);
    // The wave of 1g.10gb services by day, gone at night.
    assert!(d.mean(15, "1g.10gb") > 2.0 * d.mean(3, "1g.10gb"), "{:?}", d.hours[15]);
    // It is sent once, with the first snapshot, and seeds the store's.
    let mut sim = Sim::new(SimConfig::new(42, start));
    sim.seed_demand(d.clone());
    assert_eq!(sim.snapshot().demand.as_ref(), Some(&d));
    assert_eq!(sim.snapshot().demand, None);
}

#[test]
fn the_same_seed_gives_the_same_cluster_whatever_second_it_starts_across_the_wave_boundary() {
    // The hour before 18:20 crosses the wave's 18:00 end: a start a few seconds later must
    // not shift the wave's draws.
    let ids = |s: u32| {
        let start = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 3, 2, 18, 20, s).single().unwrap_or_default();
        let mut sim = Sim::new(SimConfig::new(42, start));
        // Everything but the clock's own times.
        let mut v: Vec<String> = sim
            .snapshot()
            .workloads
            .into_iter()
            .map(|mut w| {
                (w.submitted_at, w.started_at) = (None, None);
                serde_json::to_string(&w).unwrap_or_default()
            })
            .collect();
        v.sort();
        v
    };
    // Starts a tick (5 s) and more apart, so the hour before holds a different number of ticks.
    assert_eq!(ids(1), ids(6));
    assert_eq!(ids(1), ids(13));
}

/// Every pending workload has a reason from the first snapshot (the 4-GPU inference the demo
/// adds after its warm-up had none), and a whole-card request that no node has room for now
/// says what it waits for against what one node has free.
#[test]
fn every_pending_workload_has_a_reason_from_the_first_snapshot() {
    for seed in [1, 7, 42, 1234] {
        for hour in [3, 9, 14, 21] {
            let at = Utc.with_ymd_and_hms(2026, 3, 2, hour, 0, 0).single().unwrap_or_default();
            let p = Sim::new(SimConfig::new(seed, at)).snapshot();
            for w in p.workloads.iter().filter(|w| w.state == WorkloadState::Pending) {
                let reason =
                    w.reason.as_deref().unwrap_or_else(|| panic!("seed {seed} {hour}h: {} has no reason", w.id));
                assert!(!reason.is_empty(), "{}", w.id);
            }
        }
    }
    let p = Sim::new(SimConfig::new(42, start())).snapshot();
    let big = p
        .workloads
        .iter()
        .find(|w| w.name.starts_with("llm-core/chat-70b-"))
        .unwrap_or_else(|| panic!("the 4-GPU job"));
    let reason = big.reason.clone().unwrap_or_default();
    assert!(reason.starts_with("Resources: waits for 4 whole cards on one node; at most "), "{reason}");
    assert!(reason.ends_with(" free on one"), "{reason}");
}

/// Issue 49: the DynamicMIG node. Its cards are DRA's, laid out per claim: every instance on
/// them is held (created when its job starts, destroyed when it ends), MIG is on exactly while
/// one exists, the placeable profiles are what the counters still allow, and instances come
/// and go over the hours.
#[test]
fn the_dynamic_mig_node_creates_and_destroys_instances_with_its_jobs() {
    let mut sim = Sim::new(SimConfig::new(42, start()));
    let mut layouts = std::collections::BTreeSet::new();
    for _ in 0..12 {
        sim.advance(Duration::from_secs(1800));
        let p = sim.snapshot();
        let node = p.nodes.iter().find(|n| n.name == "gpu-h100-dra-01").unwrap_or_else(|| panic!("no DRA node"));
        assert_eq!(node.cards.len(), 8);
        for c in &node.cards {
            assert_eq!(c.sharing_mode(), Some(crate::model::SharingMode::DraDynamic));
            assert_eq!(c.allocation, Some(crate::model::dra::Allocation::Dra));
            let dra = c.dra.as_deref().unwrap_or_else(|| panic!("no DRA part"));
            assert_eq!(dra.devices, 26, "the whole GPU and 25 H100 placements");
            assert_eq!(c.mig.enabled, !c.mig.instances.is_empty(), "{}", c.layout_text());
            assert!(c.mig.instances.iter().all(|i| !i.workloads.is_empty()), "an idle instance: {}", c.layout_text());
            assert!(c.mig.instances.is_empty() || c.workloads.is_empty(), "carved and held whole");
            let Some(m) = c.gpu_model() else { panic!("catalog") };
            let layout: Vec<crate::model::mig::Placed> = c
                .mig
                .instances
                .iter()
                .map(|i| crate::model::mig::Placed { profile: i.profile.clone(), start: i.start, size: i.size })
                .collect();
            assert!(crate::model::mig::validate(m, &layout).is_ok(), "{layout:?}");
            let want = if c.workloads.is_empty() { crate::model::mig::layout::placeable(m, &layout) } else { vec![] };
            assert_eq!(dra.placeable.as_ref(), Some(&want));
            layouts.insert((c.index, c.layout_text()));
        }
    }
    assert!(layouts.len() > 8, "the layouts never changed: {layouts:?}");
    let created = layouts.iter().filter(|(_, l)| !l.is_empty() && l != "-").count();
    assert!(created > 1, "{layouts:?}");
}

/// The waiting claim is said as the Kubernetes source says a pending claim.
#[test]
fn the_waiting_claim_says_why_in_the_kubernetes_sources_words() {
    let mut sim = Sim::new(SimConfig::new(42, start()));
    sim.advance(Duration::from_secs(600));
    let p = sim.snapshot();
    let w = p.workloads.iter().find(|w| w.id == "sim:c1").unwrap_or_else(|| panic!("no claim"));
    assert_eq!(w.state, WorkloadState::Pending);
    let why = w.reason.as_deref().unwrap_or("");
    assert!(
        why.starts_with("wants 8 whole H100 on one node (matchAttribute productName): gpu-h100-dra-01 has "),
        "{why}"
    );
    assert!(why.contains("gpu-0 carved into MIG") || why.contains("gpu-0 held"), "{why}");
    // Nobody gives up on a claim: it still waits a day later.
    sim.advance(Duration::from_secs(86_400));
    let p = sim.snapshot();
    assert!(p.workloads.iter().any(|w| w.id == "sim:c1" && w.state == WorkloadState::Pending));
}

/// On the DynamicMIG node a repartition is refused (the driver lays the card out per claim);
/// a drain works as on any card.
#[test]
fn a_dynamic_mig_card_refuses_repartition_and_drains() {
    let mut sim = Sim::new(SimConfig::new(42, start()));
    let node = "gpu-h100-dra-01".to_string();
    let r = sim.apply(&SimOp::Repartition { node: node.clone(), index: 2, layout: "whole".into() });
    assert_eq!(
        r.err().map(|e| e.to_string()).as_deref(),
        Some("gpu-h100-dra-01/2: the DRA driver lays this card out per claim")
    );
    assert!(sim.apply(&SimOp::Drain { node: node.clone(), index: 2 }).is_ok());
    sim.advance(Duration::from_secs(3600 * 12));
    let p = sim.snapshot();
    let card = p.nodes.iter().find(|n| n.name == node).and_then(|n| n.cards.iter().find(|c| c.index == 2));
    assert!(card.is_some_and(|c| c.draining && c.workloads.is_empty() && c.mig.instances.is_empty()), "{card:?}");
}

/// `--demo-size` scales the DynamicMIG nodes with the rest: every second H100 node.
#[test]
fn demo_sizes_have_dynamic_mig_nodes() {
    let mut sim = Sim::new(SimConfig { size: Some((12, 8)), ..SimConfig::new(42, start()) });
    let p = sim.snapshot();
    let dra: Vec<&str> = p
        .nodes
        .iter()
        .filter(|n| n.cards.iter().all(|c| c.sharing_mode() == Some(crate::model::SharingMode::DraDynamic)))
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(dra, ["gpu-h100-dra-002", "gpu-h100-dra-004"]);
}
