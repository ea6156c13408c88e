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
    let node =
        Node { name: "n1".into(), schedulable: true, reason: None, cards, capacity: Vec::new(), sources: Vec::new() };
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
fn health_moves_through_its_states() {
    let mut s = Store::new();
    s.register("nvml", SourceKind::Nvml, Duration::from_secs(2));
    assert_eq!(s.fleet().sources[0].health, SourceHealth::Connecting);
    let err = |fatal| SourceUpdate {
        source: "nvml".into(),
        kind: SourceKind::Nvml,
        at: t(0),
        result: Err(SourceError { message: "boom".into(), fatal }),
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
        result: Err(SourceError { message: "gone".into(), fatal: true }),
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
