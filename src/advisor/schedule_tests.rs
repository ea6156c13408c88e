//! The suggestion on a measured day: small inference by day, training on whole cards at night.

use super::*;
use crate::model::demand::Hour;
use chrono::TimeZone;

fn fleet() -> Fleet {
    let at = chrono::Utc.with_ymd_and_hms(2026, 3, 2, 14, 30, 0).single().unwrap_or_default();
    crate::engine::simulated_store(42, at).fleet().clone()
}

/// `small(h)` instances of 1g.10gb and `whole(h)` whole cards in each UTC hour.
fn history(small: impl Fn(usize) -> f64, whole: impl Fn(usize) -> f64, hours: usize) -> DemandHistory {
    let mut d = DemandHistory::default();
    for h in 0..hours {
        let mut x = Hour { samples: 6, ..Hour::default() };
        x.mean.insert("1g.10gb".into(), small(h));
        x.mean.insert("whole".into(), whole(h));
        d.hours[h] = x;
    }
    d
}

fn day(h: usize) -> bool {
    (8..20).contains(&h)
}

#[test]
fn a_day_of_small_inference_and_a_night_of_training_gives_a_two_window_schedule() {
    let f = fleet();
    // By day 150 small instances, few whole cards; at night the reverse.
    let d = history(|h| if day(h) { 150.0 } else { 10.0 }, |h| if day(h) { 4.0 } else { 30.0 }, 24);
    let s: Vec<Suggested> = suggest(&f, &d, &|_, _| false).into_iter().filter(|s| s.recommended).collect();
    let h100 = s.iter().find(|s| s.model == "H100-80GB").unwrap_or_else(|| panic!("{s:#?}"));
    assert_eq!((h100.profile.as_str(), h100.per_card), ("1g.10gb", 7));
    assert_eq!((h100.day_start, h100.day_end), (8, 20), "{h100:#?}");
    assert!(h100.hours.iter().all(|x| x.small_layout == day(usize::from(x.hour))));
    // The schedule it prints is a valid config, with the windows it says.
    let cfg = crate::config::parse(&h100.toml, "suggested.toml").unwrap_or_else(|e| panic!("{e}\n{}", h100.toml));
    let w = &cfg.schedules[0].windows;
    assert_eq!(
        (w[0].name.as_str(), w[0].mig_config.as_deref(), w[1].layout.as_str()),
        ("day", Some("all-1g.10gb"), "whole")
    );
    // The schedule covers whole nodes of the model, named in the config.
    assert!(!h100.nodes.is_empty() && h100.cards > 0 && h100.cards <= 16, "{h100:#?}");
    assert_eq!(cfg.schedules[0].nodes, h100.nodes);
    // It beats the cards as they are now and either layout all day.
    for o in [h100.current, h100.all_whole, h100.all_small] {
        assert!(h100.suggested.waiting_gpu_h + MIN_GAIN_GPU_H <= o.waiting_gpu_h, "{h100:#?}");
        assert!(h100.suggested.waiting_h <= o.waiting_h + 1e-9, "{h100:#?}");
    }
}

#[test]
fn flat_demand_or_too_few_hours_suggests_nothing() {
    let f = fleet();
    // The same all day: a static layout does as well.
    assert!(
        suggest(&f, &history(|_| 150.0, |_| 4.0, 24), &|_, _| false)
            .iter()
            .all(|s| !s.recommended || s.model != "H100-80GB")
    );
    // Twenty-three hours measured: an hour never seen is not an hour without demand.
    let d = history(|h| if day(h) { 150.0 } else { 10.0 }, |h| if day(h) { 4.0 } else { 30.0 }, 23);
    assert!(suggest(&f, &d, &|_, _| false).is_empty());
}

#[test]
fn the_finding_names_the_window_and_compares_with_static_layouts() {
    let f = fleet();
    let d = history(|h| if day(h) { 150.0 } else { 10.0 }, |h| if day(h) { 4.0 } else { 30.0 }, 24);
    let cfg = crate::config::Config::default();
    let mut cx = Context::new(&cfg, chrono::Utc::now());
    cx.demand = Some(&d);
    let mut out = Vec::new();
    findings(&f, &cx, &mut out);
    let h = out
        .iter()
        .find(|x| x.subject == Subject::Pool { model: "H100-80GB".into() })
        .unwrap_or_else(|| panic!("{out:#?}"));
    assert_eq!(h.kind, Kind::ScheduleSuggestion);
    assert!(h.title.contains("all-1g.10gb 08:00-20:00 UTC"), "{}", h.title);
    assert!(h.evidence.iter().any(|e| e.starts_with("as laid out now: ")), "{:?}", h.evidence);
    assert_eq!((h.gpu_hours_per_day, h.cost_per_day), (0.0, None), "the gain is waiting, not waste held");
    assert!(!h.cards.is_empty());
}

#[test]
fn two_models_with_the_same_profile_never_claim_the_same_waiting_work() {
    let f = fleet();
    // Small demand that one node of seven 1g.10gb cards serves: only one model gets it.
    let d = history(|h| if day(h) { 40.0 } else { 0.0 }, |h| if day(h) { 0.0 } else { 30.0 }, 24);
    let s: Vec<Suggested> = suggest(&f, &d, &|_, _| false).into_iter().filter(|s| s.recommended).collect();
    assert_eq!(s.len(), 1, "{s:#?}");
    // Cards a configured schedule covers are not suggested again: with the first H100 node
    // under a schedule, a suggestion never names it.
    let skip = |n: &crate::model::Node, _: &crate::model::Card| n.name == s[0].nodes[0];
    let again = suggest(&f, &d, &skip);
    assert!(again.iter().all(|x| !x.nodes.contains(&s[0].nodes[0])), "{again:#?}");
}

#[test]
fn a_suggested_name_is_a_valid_schedule_name() {
    assert_eq!(schedule_name("H100-96GB (GH200)"), "suggested-h100-96gb-gh200");
    let text = format!(
        "[[schedule]]\nname = \"{}\"\n[[schedule.window]]\nname = \"d\"\nhours = \"08:00-20:00\"\nlayout = \"whole\"\n",
        schedule_name("H100-96GB (GH200)")
    );
    assert!(crate::config::parse(&text, "t.toml").is_ok());
}
