//! Tests for merging sources and tracking their health.

use std::time::Duration;

use chrono::{TimeZone, Utc};

use super::*;
use crate::model::Event;
use crate::sources::SourceError;

fn t(s: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).single().unwrap_or_default() + chrono::Duration::seconds(s)
}

fn card(index: u32, uuid: Option<&str>) -> Card {
    Card { index, uuid: uuid.map(str::to_string), model: "NVIDIA H100 80GB HBM3".into(), ..Card::default() }
}

fn update(source: &str, at: DateTime<Utc>, cards: Vec<Card>) -> SourceUpdate {
    let node = Node { cards, ..Node::new("n1") };
    SourceUpdate {
        source: source.into(),
        kind: SourceKind::Nvml,
        at,
        result: Ok(Partial { nodes: vec![node], ..Partial::default() }),
    }
}

#[test]
fn cards_join_by_uuid_then_index_and_the_first_source_wins() {
    let mut s = Store::new();
    s.register("nvml", SourceKind::Nvml, Duration::from_secs(1));
    s.register("prom", SourceKind::Prometheus, Duration::from_secs(15));
    let mut a = card(0, Some("GPU-a"));
    a.utilization_pct = Some(50.0);
    let b = card(1, None);
    s.apply(update("nvml", t(0), vec![a, b]), t(0));
    // Prometheus numbers the card differently but the UUID matches; it knows the temperature.
    let mut pa = card(5, Some("GPU-a"));
    pa.utilization_pct = Some(10.0);
    pa.temperature_c = Some(61.0);
    let mut pb = card(1, None);
    pb.power_w = Some(300.0);
    s.apply(update("prom", t(1), vec![pa, pb]), t(1));
    let cards = &s.fleet().nodes[0].cards;
    assert_eq!(cards.len(), 2);
    assert_eq!(cards[0].utilization_pct, Some(50.0), "the first source wins");
    assert_eq!(cards[0].temperature_c, Some(61.0), "the second fills gaps");
    assert_eq!(cards[1].power_w, Some(300.0), "joined by index without UUIDs");
}

#[test]
fn sharing_merges_field_by_field_and_the_mode_brings_its_origin() {
    use crate::model::{ShareUnit, Sharing, SharingMode};
    let mut s = Store::new();
    s.register("nvml", SourceKind::Nvml, Duration::from_secs(1));
    s.register("k8s", SourceKind::Kubernetes, Duration::from_secs(2));
    // NVML counts contexts; Kubernetes' labels say how the card is shared.
    let mut n = card(0, Some("GPU-a"));
    n.sharing = Sharing { contexts: Some(3), origin: Some("NVML process lists".into()), ..Sharing::default() };
    s.apply(update("nvml", t(0), vec![n]), t(0));
    let mut k = card(0, None);
    k.sharing = Sharing {
        mode: Some(SharingMode::TimeSliced),
        replicas: Some(4),
        unit: Some(ShareUnit::Replica),
        origin: Some("label nvidia.com/gpu.sharing-strategy=time-slicing".into()),
        ..Sharing::default()
    };
    s.apply(update("k8s", t(1), vec![k]), t(1));
    let c = &s.fleet().nodes[0].cards[0];
    assert_eq!(c.sharing_text(false), "TS×4");
    assert_eq!(c.sharing.contexts, Some(3));
    assert_eq!(c.sharing.origin.as_deref(), Some("label nvidia.com/gpu.sharing-strategy=time-slicing"));
}

#[test]
fn health_moves_through_its_states() {
    let mut s = Store::new();
    s.register("nvml", SourceKind::Nvml, Duration::from_secs(2));
    assert_eq!(s.fleet().sources[0].health, SourceHealth::Connecting);
    let err = |fatal| SourceUpdate {
        source: "nvml".into(),
        kind: SourceKind::Nvml,
        at: t(0),
        result: Err(SourceError { message: "boom".into(), fatal, unanswered: false }),
    };
    s.apply(err(false), t(0));
    assert_eq!(s.fleet().sources[0].health, SourceHealth::Unavailable { reason: "boom".into() });
    s.apply(update("nvml", t(1), vec![card(0, None)]), t(1));
    assert_eq!(s.fleet().sources[0].health, SourceHealth::Live { at: t(1) });
    assert!(!s.check_staleness(t(6)), "two and a half intervals are fine");
    assert!(s.check_staleness(t(8)), "three missed intervals make it stale");
    assert!(matches!(s.fleet().sources[0].health, SourceHealth::Stale { since, .. } if since == t(1)));
    assert_eq!(s.fleet().nodes[0].cards.len(), 1, "stale data is kept");
    s.apply(err(false), t(9));
    assert!(matches!(&s.fleet().sources[0].health, SourceHealth::Stale { error: Some(e), .. } if e == "boom"));
    assert_eq!(s.fleet().nodes[0].cards.len(), 1);
    assert_eq!(s.fleet().sources[0].summary(t(9)), "nvml: stale 8s");
}

/// A source that never answered by the end of a wait is said so, not left "connecting".
#[test]
fn a_source_that_never_answered_says_so() {
    let mut s = Store::new();
    s.register("nvml", SourceKind::Nvml, Duration::from_secs(2));
    s.register("scrape:gpu-1:9400", SourceKind::Scrape, Duration::from_secs(2));
    s.apply(update("nvml", t(1), vec![card(0, None)]), t(1));
    s.no_answer(Duration::from_secs(20));
    assert_eq!(s.fleet().sources[0].health, SourceHealth::Live { at: t(1) });
    assert_eq!(s.fleet().sources[1].health, SourceHealth::Unavailable { reason: "no answer within 20s".into() });
}

#[test]
fn events_are_bounded_and_simulated_data_is_flagged() {
    let mut s = Store::new();
    s.register("sim", SourceKind::Simulated, Duration::from_secs(1));
    let events: Vec<Event> = (0..MAX_EVENTS + 20)
        .map(|i| Event { at: t(0), card: None, severity: crate::model::Severity::Info, text: i.to_string() })
        .collect();
    let p = Partial { events, simulated: true, ..Partial::default() };
    s.apply(SourceUpdate { source: "sim".into(), kind: SourceKind::Simulated, at: t(0), result: Ok(p) }, t(0));
    assert_eq!(s.fleet().events.len(), MAX_EVENTS);
    assert_eq!(s.fleet().events[0].text, "20");
    assert!(s.simulated());
}

#[test]
fn mig_views_merge_by_placement_and_fill_gaps() {
    use crate::model::MigInstance;
    let mut s = Store::new();
    s.register("nvml", SourceKind::Nvml, Duration::from_secs(1));
    s.register("prom", SourceKind::Prometheus, Duration::from_secs(15));
    // NVML knows MIG is on but could not list instances; Prometheus has them with activity.
    let mut a = card(0, Some("GPU-a"));
    a.mig.enabled = true;
    s.apply(update("nvml", t(0), vec![a]), t(0));
    let mut b = card(0, Some("GPU-a"));
    b.mig.enabled = true;
    b.mig.instances = vec![
        MigInstance {
            gi_id: 1,
            profile: "3g.40gb".into(),
            start: 0,
            size: 4,
            utilization_pct: Some(40.0),
            ..MigInstance::default()
        },
        MigInstance { gi_id: 2, profile: "3g.40gb".into(), start: 4, size: 4, ..MigInstance::default() },
    ];
    s.apply(update("prom", t(1), vec![b.clone()]), t(1));
    assert_eq!(s.fleet().nodes[0].cards[0].mig.instances.len(), 2, "instances come from the later source");
    // Now NVML lists them too, with placements: matched by id and profile, activity filled in.
    let mut a2 = card(0, Some("GPU-a"));
    a2.mig.enabled = true;
    a2.mig.instances = vec![
        MigInstance { gi_id: 1, profile: "3g.40gb".into(), start: 0, size: 4, ..MigInstance::default() },
        MigInstance { gi_id: 2, profile: "1g.10gb".into(), start: 4, size: 1, ..MigInstance::default() },
    ];
    s.apply(update("nvml", t(2), vec![a2]), t(2));
    let inst = &s.fleet().nodes[0].cards[0].mig.instances;
    assert_eq!(inst[0].utilization_pct, Some(40.0));
    assert_eq!(inst[1].utilization_pct, None, "same id, other profile: not the same instance");
    assert_eq!((inst[0].start, inst[1].start), (0, 4), "placements from the source that has them");
}

#[test]
fn an_unavailable_source_shows_no_data() {
    let mut s = Store::new();
    s.register("nvml", SourceKind::Nvml, Duration::from_secs(1));
    s.apply(update("nvml", t(0), vec![card(0, None)]), t(0));
    let fatal = SourceUpdate {
        source: "nvml".into(),
        kind: SourceKind::Nvml,
        at: t(1),
        result: Err(SourceError { message: "gone".into(), fatal: true, unanswered: false }),
    };
    s.apply(fatal, t(1));
    assert!(s.fleet().nodes.is_empty());
    assert_eq!(s.fleet().sources[0].health, SourceHealth::Unavailable { reason: "gone".into() });
}

#[test]
fn deferred_updates_merge_once() {
    let mut s = Store::new();
    s.register("a", SourceKind::Scrape, Duration::from_secs(1));
    s.register("b", SourceKind::Scrape, Duration::from_secs(1));
    assert!(s.any_connecting());
    s.apply_deferred(update("a", t(0), vec![card(0, Some("GPU-a"))]), t(0));
    s.apply_deferred(update("b", t(0), vec![card(1, Some("GPU-b"))]), t(0));
    assert!(!s.any_connecting());
    assert!(s.fleet().nodes.is_empty(), "nothing merged before the rebuild");
    s.rebuild();
    assert_eq!(s.fleet().nodes[0].cards.len(), 2);
}

#[test]
fn a_scheduler_that_cannot_see_the_layout_yields_to_a_source_that_can() {
    let mut s = Store::new();
    s.register("kubernetes", SourceKind::Kubernetes, Duration::from_secs(1));
    s.register("prom", SourceKind::Prometheus, Duration::from_secs(15));
    let mut k = card(0, None);
    k.mig.enabled = true;
    k.mig.error = Some("layout not reported by Kubernetes".into());
    s.apply(update("kubernetes", t(0), vec![k.clone(), { card(1, None) }]), t(0));
    let mut p = card(0, None);
    p.mig = crate::model::MigState::from_layout(&p.model, "3g.40gb@0,3g.40gb@4");
    let whole = card(1, None);
    s.apply(update("prom", t(1), vec![p, whole]), t(1));
    let cards = &s.fleet().nodes[0].cards;
    assert_eq!(cards[0].mig.instances.len(), 2);
    assert_eq!(cards[0].mig.error, None);
    assert!(!cards[1].mig.enabled);
    assert_eq!(s.fleet().nodes[0].sources, vec!["kubernetes".to_string(), "prom".to_string()]);
}

/// An A800 in MIG mode as dcgm-exporter alone reports it: three 2g.20gb instances, no
/// placements, no card-level memory total, one instance busy with no pod label.
fn exporter_only_a800() -> Card {
    let mut c = Card { index: 0, model: "NVIDIA A800-SXM4-80GB".into(), ..Card::default() };
    c.mig.enabled = true;
    c.mig.placements = crate::model::Placements::Inferred;
    for gi in [1, 2, 3] {
        c.mig.instances.push(crate::model::MigInstance {
            gi_id: gi,
            profile: "2g.20gb".into(),
            start: 0,
            size: 2,
            memory_total_mib: Some(19968),
            memory_used_mib: Some(if gi == 2 { 15000 } else { 3 }),
            utilization_pct: Some(if gi == 2 { 64.0 } else { 0.0 }),
            ..crate::model::MigInstance::default()
        });
    }
    c
}

#[test]
fn instances_without_placements_are_placed_and_a_busy_one_is_never_free() {
    let mut s = Store::new();
    s.register("dcgm", SourceKind::Scrape, Duration::from_secs(1));
    s.apply(update("dcgm", t(0), vec![exporter_only_a800()]), t(0));
    let c = &s.fleet().nodes[0].cards[0];
    let starts: Vec<u8> = c.mig.instances.iter().map(|i| i.start).collect();
    assert_eq!(starts, vec![0, 2, 4], "placed like an unplaced layout, not all at slice 0");
    assert_eq!(c.mig.placements, crate::model::Placements::Inferred);
    assert_eq!(c.used_slice_mask().count_ones(), 6, "the hidden slices are not free");
    let node = &s.fleet().nodes[0];
    // Two idle instances and the free slices 6-7; the busy instance with no holder is not free.
    assert_eq!(crate::model::capacity::free_units(node, c), 2 + c.usable_free_slices().map_or(0, u16::count_ones));
    assert!(c.mig.instances[1].in_use_by_unknown());
    assert!(c.memory_total_mib.is_some_and(|m| m >= 80 * 1000), "the catalog gives the MIG card's total");
    // A source that knows the placements corrects the inference.
    s.register("nvml", SourceKind::Nvml, Duration::from_secs(1));
    let mut known = exporter_only_a800();
    known.mig.placements = crate::model::Placements::Known;
    for (i, start) in known.mig.instances.iter_mut().zip([4, 0, 2]) {
        i.start = start;
    }
    s.apply(update("nvml", t(1), vec![known]), t(1));
    let c = &s.fleet().nodes[0].cards[0];
    assert_eq!(c.mig.placements, crate::model::Placements::Known);
    let by_gi: Vec<(u32, u8)> = c.mig.instances.iter().map(|i| (i.gi_id, i.start)).collect();
    assert!(by_gi.contains(&(1, 4)) && by_gi.contains(&(2, 0)), "{by_gi:?}");
}

#[test]
fn instances_no_layout_holds_leave_free_slices_unknown() {
    let mut s = Store::new();
    s.register("dcgm", SourceKind::Scrape, Duration::from_secs(1));
    let mut c = exporter_only_a800();
    for i in &mut c.mig.instances {
        i.profile = "4g.40gb".into();
        i.size = 4;
    }
    s.apply(update("dcgm", t(0), vec![c]), t(0));
    let c = &s.fleet().nodes[0].cards[0];
    assert_eq!(c.mig.placements, crate::model::Placements::Unknown);
    assert_eq!(c.usable_free_slices(), None);
}

#[test]
fn the_merged_fleet_keeps_used_within_total_and_unreadable_instances_are_not_free() {
    let mut s = Store::new();
    s.register("nvml", SourceKind::Nvml, Duration::from_secs(1));
    s.register("dcgm", SourceKind::Scrape, Duration::from_secs(1));
    // One source knows the used memory, the other the total; together they break used <= total.
    let mut a = card(0, Some("GPU-a"));
    a.memory_used_mib = Some(90_000);
    let mut b = card(0, Some("GPU-a"));
    b.memory_total_mib = Some(81_559);
    // A MIG card whose instances cannot be read: nothing on it counts as free.
    let mut m = card(1, Some("GPU-m"));
    m.mig.enabled = true;
    m.mig.error = Some("listing instances needs root".into());
    s.apply(update("nvml", t(0), vec![a, m]), t(0));
    s.apply(update("dcgm", t(0), vec![b]), t(0));
    let f = s.fleet();
    assert!(crate::model::invariants::violations(f).is_empty(), "{:?}", crate::model::invariants::violations(f));
    assert_eq!(f.nodes[0].cards[0].memory_used_mib, None, "unknown rather than 90000 of 81559");
    let mig = &f.nodes[0].cards[1];
    assert_eq!(crate::model::capacity::free_units(&f.nodes[0], mig), 0);
}

#[test]
fn one_source_is_moved_into_the_fleet_and_a_second_merge_gives_the_same_fleet() {
    let mut s = Store::new();
    s.register("nvml", SourceKind::Nvml, Duration::from_secs(1));
    let mut a = card(0, Some("GPU-a"));
    a.utilization_pct = Some(50.0);
    a.memory_used_mib = Some(90_000);
    a.memory_total_mib = Some(81_920);
    s.apply(update("nvml", t(0), vec![a, card(1, None)]), t(0));
    let first = s.fleet().clone();
    assert_eq!(first.nodes[0].sources, ["nvml"]);
    assert_eq!(first.nodes[0].cards[0].memory_used_mib, None, "used over total: unknown");
    // A merge with no newer data (the fleet holds the source's data) takes them back.
    s.rebuild();
    assert_eq!(s.fleet().nodes, first.nodes);
    assert_eq!(s.fleet().workloads, first.workloads);
}

#[test]
fn an_unchanged_update_keeps_the_data_and_says_the_source_is_live() {
    let mut s = Store::new();
    s.register("sim", SourceKind::Simulated, Duration::from_secs(1));
    let alive =
        |at| SourceUpdate { source: "sim".into(), kind: SourceKind::Simulated, at, result: Ok(Partial::unchanged()) };
    // Before any data, "unchanged" says nothing: the source is still connecting.
    assert!(!s.apply_deferred(alive(t(0)), t(0)));
    assert!(s.any_connecting());
    s.apply(update("sim", t(1), vec![card(0, Some("GPU-a"))]), t(1));
    let before = s.fleet().nodes.clone();
    // Stale after three missed intervals, live again with the next "unchanged".
    assert!(s.check_staleness(t(10)));
    assert!(!s.apply_deferred(alive(t(11)), t(11)), "no merge needed");
    assert_eq!(s.fleet().sources[0].health, SourceHealth::Live { at: t(11) });
    assert_eq!(s.fleet().nodes, before);
}

#[test]
fn history_is_in_the_fleet_of_one_rebuild_then_let_go() {
    let mut s = Store::new();
    s.register("prom", SourceKind::Prometheus, Duration::from_secs(15));
    let mut first = update("prom", t(0), vec![card(0, None)]);
    if let Ok(p) = &mut first.result {
        p.history = vec![crate::model::CardHistory {
            card: crate::model::CardRef::new("n1", 0),
            gi: None,
            step_s: 60,
            util: vec![Some(40.0); 30],
            mem_pct: Vec::new(),
            mem_mib: Vec::new(),
        }];
    }
    s.apply(first, t(0));
    assert_eq!(s.fleet().history.len(), 1, "the rebuild after it came carries it (the sparklines seed)");
    s.apply(update("prom", t(15), vec![card(0, None)]), t(15));
    assert!(s.fleet().history.is_empty(), "an hour of every card's series is not kept for the run");
}

/// An answer past the largest supported fleet is cut there and the source's note says what
/// was cut; the largest fleet itself is kept whole.
#[test]
fn an_answer_past_the_largest_fleet_is_cut_and_said() {
    let max = crate::sources::MAX_CARDS;
    let mut s = Store::new();
    s.register("nvml", SourceKind::Nvml, Duration::from_secs(1));
    let cards = |n: usize| (0..n).map(|i| card(i as u32, None)).collect::<Vec<_>>();
    s.apply(update("nvml", t(0), cards(max)), t(0));
    assert_eq!(s.fleet().nodes[0].cards.len(), max);
    assert_eq!(s.fleet().sources[0].note, None);
    s.apply(update("nvml", t(1), cards(max + 5)), t(1));
    assert_eq!(s.fleet().nodes[0].cards.len(), max);
    let note = s.fleet().sources[0].note.clone().unwrap_or_default();
    assert!(note.contains("5 cards and 0 nodes past 65536 cut"), "{note}");
}
