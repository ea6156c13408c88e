//! Windows, days, time zones (DST change days included) and min_hold, as tables.

use super::*;
use chrono::TimeZone;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).single().unwrap_or_default()
}

fn window(name: &str, hours: &str, days: &[&str], layout: &str) -> Window {
    let (start_min, end_min) = parse_hours(hours).unwrap_or_else(|e| panic!("{e}"));
    let days: Vec<String> = days.iter().map(|d| (*d).to_string()).collect();
    Window {
        name: name.into(),
        start_min,
        end_min,
        days: parse_days(&days).unwrap_or_else(|e| panic!("{e}")),
        layout: layout.into(),
        mig_config: None,
    }
}

fn schedule(tz: &str, windows: Vec<Window>, hold_h: u64) -> Schedule {
    Schedule {
        name: "s".into(),
        nodes: Vec::new(),
        node_labels: Vec::new(),
        model: None,
        tz_name: tz.into(),
        tz: jiff::tz::TimeZone::get(tz).unwrap_or_else(|e| panic!("{tz}: {e}")),
        windows,
        lead: Duration::from_secs(900),
        min_hold: Duration::from_secs(hold_h * 3600),
        running: Running::Wait,
        unattended: false,
    }
}

#[test]
fn hours_and_days_parse_or_say_why() {
    assert_eq!(parse_hours("08:00-20:00"), Ok((480, 1200)));
    assert_eq!(parse_hours("20:00-08:00"), Ok((1200, 480)));
    assert_eq!(parse_hours("00:00-24:00"), Ok((0, 1440)));
    // An end at the start crosses midnight, as docs/schedules.md says: 24 hours from then.
    assert_eq!(parse_hours("00:00-00:00"), Ok((0, 0)));
    assert_eq!(parse_hours("10:00-10:00"), Ok((600, 600)));
    for bad in ["08:00", "8-20", "25:00-01:00", "08:60-09:00", "24:00-01:00"] {
        assert!(parse_hours(bad).is_err(), "{bad}");
    }
    let d = |xs: &[&str]| parse_days(&xs.iter().map(|x| (*x).to_string()).collect::<Vec<_>>());
    assert_eq!(d(&["mon-fri"]), Ok([true, true, true, true, true, false, false]));
    assert_eq!(d(&["fri-mon"]), Ok([true, false, false, false, true, true, true]), "ranges wrap");
    assert_eq!(d(&["Saturday", "sun"]), Ok([false, false, false, false, false, true, true]));
    assert_eq!(d(&["all"]), Ok([true; 7]));
    assert!(d(&["someday"]).is_err());
    assert!(d(&[]).is_err());
}

#[test]
fn globs() {
    for (p, t, ok) in [
        ("gpu-a100-*", "gpu-a100-01", true),
        ("gpu-?100-0?", "gpu-h100-02", true),
        ("gpu-*-01", "gpu-h200-01", true),
        ("gpu-a100-*", "gpu-h100-01", false),
        ("*", "", true),
        ("a*b*c", "aXbYc", true),
        ("a*b*c", "aXbY", false),
    ] {
        assert_eq!(glob(p, t), ok, "{p} {t}");
    }
}

#[test]
fn the_window_in_effect_in_its_time_zone() {
    // Day 08:00-20:00 on weekdays in Berlin (UTC+1 in January), night otherwise.
    let s = schedule(
        "Europe/Berlin",
        vec![window("day", "08:00-20:00", &["mon-fri"], "1g.10gb"), window("night", "20:00-08:00", &["all"], "whole")],
        4,
    );
    let cases = [
        (utc(2026, 1, 5, 7, 0), Some(0), "Monday 08:00 in Berlin"),
        (utc(2026, 1, 5, 6, 59), Some(1), "Monday 07:59: Sunday's night"),
        (utc(2026, 1, 5, 19, 0), Some(1), "Monday 20:00: night"),
        (utc(2026, 1, 10, 12, 0), None, "Saturday noon: no day window, night ended at 08:00"),
        (utc(2026, 1, 10, 20, 0), Some(1), "Saturday 21:00"),
    ];
    for (t, want, what) in cases {
        assert_eq!(s.active_at(t), want, "{what}");
    }
}

/// A window whose end is its start holds for 24 hours from the day it starts on.
#[test]
fn a_window_ending_at_its_start_holds_for_a_day() {
    let s = schedule("UTC", vec![window("day", "10:00-10:00", &["mon"], "whole")], 0);
    // 2026-01-05 is a Monday.
    for (t, want, what) in [
        (utc(2026, 1, 5, 9, 59), None, "Monday 09:59: before it starts"),
        (utc(2026, 1, 5, 10, 0), Some(0), "Monday 10:00"),
        (utc(2026, 1, 6, 3, 0), Some(0), "Tuesday 03:00: still in it"),
        (utc(2026, 1, 6, 10, 0), None, "Tuesday 10:00: over"),
    ] {
        assert_eq!(s.active_at(t), want, "{what}");
    }
    let whole = schedule("UTC", vec![window("all", "00:00-00:00", &["all"], "whole")], 0);
    assert_eq!(whole.active_at(utc(2026, 1, 7, 13, 0)), Some(0));
}

/// A window inside the spring-forward gap (Berlin 02:30-03:30 on 2026-03-29) holds for no
/// instant that day: no change is planned (7 cards were drained for one that never came).
#[test]
fn a_window_the_clock_skips_makes_no_change() {
    let s = schedule("Europe/Berlin", vec![window("gap", "02:30-03:30", &["all"], "whole")], 0);
    let spring = s.changes(utc(2026, 3, 28, 12, 0), 24);
    assert!(spring.is_empty(), "{spring:?}");
    let next = s.changes(utc(2026, 3, 29, 12, 0), 24);
    assert_eq!(next.len(), 1, "the next day it holds again");
}

#[test]
fn dst_change_days() {
    // Europe/Berlin springs forward on 2026-03-29 (02:00 -> 03:00) and falls back on
    // 2026-10-25 (03:00 -> 02:00).
    let s = schedule("Europe/Berlin", vec![window("early", "02:30-06:00", &["all"], "whole")], 0);
    let spring = s.changes(utc(2026, 3, 28, 12, 0), 24);
    assert_eq!(spring.len(), 1);
    assert_eq!(spring[0].at, utc(2026, 3, 29, 1, 30), "02:30 does not exist: it starts at 03:30 CEST");
    let autumn = s.changes(utc(2026, 10, 24, 12, 0), 24);
    assert_eq!(autumn.len(), 1);
    assert_eq!(autumn[0].at, utc(2026, 10, 25, 0, 30), "02:30 happens twice: the first (CEST)");
    // A day-long window on the short day lasts 23 hours of real time.
    let day = schedule("Europe/Berlin", vec![window("d", "08:00-20:00", &["all"], "whole")], 0);
    let c = day.changes(utc(2026, 3, 28, 12, 0), 48);
    assert_eq!(c.iter().map(|c| c.at).collect::<Vec<_>>(), [utc(2026, 3, 29, 6, 0), utc(2026, 3, 30, 6, 0)]);
}

#[test]
fn windows_end_on_the_local_clock_on_dst_days() {
    // The night ends at 08:00 local whatever the clock did: in spring at 06:00 UTC (CEST),
    // in autumn at 07:00 UTC (CET); a fixed 12 h would end it at 07:00 and 06:00 UTC.
    let s = schedule("Europe/Berlin", vec![window("night", "20:00-08:00", &["all"], "whole")], 0);
    let cases = [
        (utc(2026, 3, 29, 5, 59), Some(0), "spring, 07:59 CEST"),
        (utc(2026, 3, 29, 6, 30), None, "spring, 08:30 CEST: over"),
        (utc(2026, 10, 25, 6, 30), Some(0), "autumn, 07:30 CET: still night"),
        (utc(2026, 10, 25, 7, 0), None, "autumn, 08:00 CET: over"),
    ];
    for (t, want, what) in cases {
        assert_eq!(s.active_at(t), want, "{what}");
    }
    // A whole-day window lasts 23 hours of real time on the spring day.
    let d = schedule("Europe/Berlin", vec![window("d", "00:00-24:00", &["sun"], "whole")], 0);
    assert_eq!(d.active_at(utc(2026, 3, 29, 21, 59)), Some(0), "23:59 CEST");
    assert_eq!(d.active_at(utc(2026, 3, 29, 22, 0)), None, "Monday 00:00 CEST");
}

#[test]
fn min_hold_counts_from_the_last_change() {
    let s = schedule("UTC", vec![window("a", "08:00-09:00", &["all"], "whole")], 2);
    let (t, h) = (utc(2026, 6, 1, 8, 0), chrono::Duration::hours(1));
    assert!(s.held(Some(t), t + h), "an hour after a change, within 2 h");
    assert!(!s.held(Some(t), t + h * 2), "two hours after: allowed");
    assert!(!s.held(None, t), "no change known");
}
