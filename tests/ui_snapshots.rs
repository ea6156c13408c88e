//! Screens of every view and the help at 80×24 and 160×48, on a fixed-seed simulated cluster
//! and a fixed clock, through ratatui's TestBackend.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use ratatui::{Terminal, backend::TestBackend};
use tessera::model::{CardRef, SourceKind};
use tessera::sources::SourceUpdate;
use tessera::sources::sim::{Sim, SimConfig};
use tessera::store::Store;
use tessera::ui::keymap::Intent;
use tessera::ui::state::UiState;
use tessera::ui::theme::{Depth, Theme};

fn clock() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 14, 30, 0).single().unwrap_or_default()
}

fn store() -> Store {
    let mut sim = Sim::new(SimConfig::new(42, clock()));
    let mut store = Store::new();
    store.register("sim", SourceKind::Simulated, Duration::from_secs(1));
    // Three updates so the card view has a little history.
    for i in 0..3 {
        if i > 0 {
            sim.advance(Duration::from_secs(30));
        }
        let at = sim.now();
        store.apply(
            SourceUpdate { source: "sim".into(), kind: SourceKind::Simulated, at, result: Ok(sim.snapshot()) },
            clock(),
        );
    }
    store
}

fn render(w: u16, h: u16, setup: impl Fn(&mut UiState, &Store), ascii: bool) -> String {
    let store = store();
    let theme = Theme::load(None, Depth::TrueColor, ascii).unwrap_or_else(|e| panic!("{e}"));
    let mut st = UiState::new(false, ascii, Duration::from_secs(1800), clock());
    st.screen.body = tessera::ui::viewport(ratatui::layout::Rect::new(0, 0, w, h));
    // Replay the history the loop would have recorded, then the latest fleet.
    st.on_fleet(store.fleet());
    st.clock.wall = clock();
    setup(&mut st, &store);
    if st.advice.banner.is_some() || st.replay.is_some() {
        st.screen.body = tessera::ui::viewport_for(ratatui::layout::Rect::new(0, 0, w, h), &st);
    }
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap_or_else(|e| panic!("{e}"));
    term.draw(|f| tessera::ui::draw(f, &st, store.fleet(), &theme, store.simulated()))
        .unwrap_or_else(|e| panic!("{e}"));
    term.backend().to_string()
}

type Setup = Box<dyn Fn(&mut UiState, &Store)>;

/// A replay of the last hour at 60×, ten minutes from its end, with two actions and a
/// Slurm outage on its timeline (as the replay loop sets it: read-only).
fn replaying(st: &mut UiState) {
    let t = |m: i64| clock() - chrono::Duration::minutes(m);
    let mut r = tessera::ui::replay::Replay::new(
        (0..=360).rev().map(|i| t(0) - chrono::Duration::seconds(i * 10)).collect(),
        60.0,
        "night.tsrec".into(),
    );
    r.actions = vec![(t(45), "intent drain gpu-a100-01/6".into()), (t(44), "outcome drain gpu-a100-01/6: done".into())];
    r.outages = vec![(t(30), t(25))];
    r.go(t(10));
    st.settings.read_only = true;
    st.replay = Some(r);
}

/// The simulated cluster's example schedule against the store at the fixed clock (Monday
/// 14:30, the day window): its banner on the state, and its group plan.
fn schedule_due(st: &mut UiState, s: &Store) -> tessera::schedule::group::GroupPlan {
    let cfg = tessera::config::Config::default();
    let (schedules, _) = tessera::schedule::demo::effective(&cfg, true).unwrap_or_else(|| panic!("the example"));
    let t = tessera::schedule::timelines(&schedules, s.fleet(), clock(), Duration::from_secs(1800), 24);
    st.advice.banner = tessera::schedule::group::banner(&t, clock());
    assert!(st.advice.banner.is_some());
    let runner = tessera::actions::run::Runner::new(&cfg, tessera::actions::Env::default()).with_audit(None);
    tessera::schedule::group::plan(&t[0], s.fleet(), clock(), &|a| runner.check(a, s.fleet()))
        .unwrap_or_else(|| panic!("a change is due"))
}

fn views() -> Vec<(&'static str, Setup)> {
    vec![
        ("fleet", Box::new(|_, _| {})),
        ("replay_fleet", Box::new(|st: &mut UiState, _: &Store| replaying(st))),
        (
            "replay_help",
            Box::new(|st: &mut UiState, _: &Store| {
                replaying(st);
                st.open.help = true;
            }),
        ),
        (
            "replay_goto",
            Box::new(|st: &mut UiState, _: &Store| {
                replaying(st);
                if let Some(r) = st.replay.as_mut() {
                    r.paused = true;
                }
                st.input = tessera::ui::state::Input::Goto("03:1".into());
            }),
        ),
        (
            "card",
            Box::new(|st: &mut UiState, _: &Store| {
                st.open.card = Some(CardRef::new("gpu-a100-01", 0));
            }),
        ),
        (
            "queue",
            Box::new(|st: &mut UiState, s: &Store| {
                st.apply(Intent::ViewQueue, s.fleet());
            }),
        ),
        (
            "workloads",
            Box::new(|st: &mut UiState, s: &Store| {
                st.apply(Intent::ViewWorkloads, s.fleet());
            }),
        ),
        (
            "help",
            Box::new(|st: &mut UiState, s: &Store| {
                st.apply(Intent::Help, s.fleet());
            }),
        ),
        (
            "workload_detail",
            Box::new(|st: &mut UiState, s: &Store| {
                st.apply(Intent::ViewQueue, s.fleet());
                st.apply(Intent::Open, s.fleet());
                assert!(st.open.workload.is_some());
            }),
        ),
        (
            "advice",
            Box::new(|st: &mut UiState, s: &Store| {
                let cfg = tessera::config::Config::default();
                let cx = tessera::advisor::Context::new(&cfg, clock());
                st.on_findings(tessera::advisor::advise(s.fleet(), &cx));
                assert!(!st.advice.list.rows.is_empty());
                st.apply(Intent::ViewAdvice, s.fleet());
            }),
        ),
        (
            "advice_projection",
            Box::new(|st: &mut UiState, s: &Store| {
                use tessera::simulate::projection::{Outlook, Projection};
                let cfg = tessera::config::Config::default();
                let cx = tessera::advisor::Context::new(&cfg, clock());
                st.on_findings(tessera::advisor::advise(s.fleet(), &cx));
                st.advice.projection = Some(Projection {
                    as_is: Outlook { p90_wait_s: 2520, held: 0.62, never_started: 0 },
                    following: Outlook { p90_wait_s: 0, held: 0.55, never_started: 0 },
                    changes: 3,
                    others: 1,
                    jobs: 240,
                    followed: tessera::advisor::followed(&st.advice.list.rows),
                    sampled: None,
                });
                st.apply(Intent::ViewAdvice, s.fleet());
            }),
        ),
        (
            "sources",
            Box::new(|st: &mut UiState, s: &Store| {
                st.apply(Intent::ViewSources, s.fleet());
            }),
        ),
        (
            "confirm_drain",
            Box::new(|st: &mut UiState, s: &Store| {
                let opts = tessera::actions::Options::new(&tessera::config::Config::default(), false, clock());
                let action = tessera::actions::Action::Drain { target: "gpu-a100-01/0".into(), evict: false };
                let plan = tessera::actions::plan::plan(&action, s.fleet(), &opts).unwrap_or_else(|e| panic!("{e}"));
                st.dialog.modal = Some(tessera::ui::dialogs::confirm(plan));
            }),
        ),
        (
            "schedule_banner",
            Box::new(|st: &mut UiState, s: &Store| {
                schedule_due(st, s);
            }),
        ),
        (
            "schedule_confirm",
            Box::new(|st: &mut UiState, s: &Store| {
                let plan = schedule_due(st, s);
                st.dialog.modal = Some(tessera::ui::dialogs::Modal::Group {
                    plan: Box::new(plan),
                    typed: "demo-h100".into(),
                    second: false,
                    scroll: Default::default(),
                });
            }),
        ),
        (
            "schedule_running",
            Box::new(|st: &mut UiState, s: &Store| {
                use tessera::schedule::group::Next;
                use tessera::schedule::unattended::Went;
                let mut m = tessera::ui::dialogs::group::running(schedule_due(st, s));
                if let tessera::ui::dialogs::Modal::GroupRunning { run, .. } = &mut m {
                    // The first card changed, the second under way.
                    assert!(matches!(run.next(s.fleet(), clock()), Next::RunShown(_)));
                    run.record(Went::Done, "every step done", clock());
                    assert!(matches!(run.next(s.fleet(), clock()), Next::RunShown(_)));
                }
                st.dialog.modal = Some(m);
            }),
        ),
        (
            "repartition_picker",
            Box::new(|st: &mut UiState, s: &Store| {
                st.apply(Intent::Repartition, s.fleet());
                assert!(st.dialog.modal.is_some(), "{:?}", st.footer.message);
            }),
        ),
        (
            "advice_finding_open",
            Box::new(|st: &mut UiState, s: &Store| {
                let cfg = tessera::config::Config::default();
                let cx = tessera::advisor::Context::new(&cfg, clock());
                st.on_findings(tessera::advisor::advise(s.fleet(), &cx));
                st.apply(Intent::ViewAdvice, s.fleet());
                st.apply(Intent::Open, s.fleet());
                assert!(st.advice.panel.is_some());
            }),
        ),
        (
            "fit_panel",
            Box::new(|st: &mut UiState, s: &Store| {
                st.command("fit 2g.35gb", s.fleet());
                assert!(st.advice.panel.is_some(), "{:?}", st.footer.message);
            }),
        ),
        (
            // Mixed modes: the shared nodes after MIG and whole cards (filter `l4 a30 h200`
            // would need every word; the rows are scrolled to instead).
            "fleet_sharing_modes",
            Box::new(|st: &mut UiState, s: &Store| {
                let at = st
                    .fleet
                    .list
                    .rows
                    .iter()
                    .position(
                        |r| matches!(r, tessera::ui::state::Row::Node(n) if s.fleet().nodes[*n].name == "gpu-h200-01"),
                    )
                    .unwrap_or(0);
                st.fleet.list.selected = at + 7;
                st.fleet.list.offset = at + 5;
            }),
        ),
        (
            "card_time_sliced",
            Box::new(|st: &mut UiState, _: &Store| {
                st.open.card = Some(CardRef::new("gpu-l4-01", 0));
            }),
        ),
        (
            "fleet_filter_shared",
            Box::new(|st: &mut UiState, s: &Store| {
                st.set_filter("shared".into(), s.fleet());
            }),
        ),
        (
            "fleet_sorted_filtered",
            Box::new(|st: &mut UiState, s: &Store| {
                st.set_filter("whole".into(), s.fleet());
                st.apply(Intent::Sort, s.fleet());
            }),
        ),
    ]
}

#[test]
fn every_view_at_80x24_and_160x48() {
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        for (name, setup) in views() {
            let screen = render(w, h, setup, false);
            insta::assert_snapshot!(format!("{name}_{w}x{h}"), screen);
        }
    }
}

#[test]
fn ascii_fallback_uses_no_box_or_block_glyphs() {
    for (name, setup) in views() {
        let screen = render(100, 30, setup, true);
        // #47: nothing but ASCII (a `·` or `×` was left).
        let mut bad: Vec<char> = screen.chars().filter(|c| !c.is_ascii()).collect();
        bad.dedup();
        assert!(bad.is_empty(), "{name}: {bad:?}\n{screen}");
    }
    insta::assert_snapshot!("fleet_ascii_100x30", render(100, 30, |_, _| {}, true));
}

#[test]
fn nothing_overflows_at_small_and_odd_sizes() {
    for (w, h) in [(80u16, 24u16), (20, 5), (1, 1), (200, 60), (81, 25)] {
        for (_, setup) in views() {
            // TestBackend panics on out-of-bounds writes; rendering must not.
            let _ = render(w, h, setup, false);
        }
    }
}

#[test]
fn long_plans_keep_warnings_and_the_prompt_in_view() {
    use tessera::actions::{Action, Backend, Op, Plan, Step};
    let setup = |st: &mut UiState, _: &Store| {
        let steps = (0..22)
            .map(|i| Step {
                what: format!("step {i}"),
                call: format!("call {i}"),
                op: Op::Wait { seconds: 0, why: String::new() },
            })
            .collect();
        let plan = Plan {
            action: Action::Repartition { target: "n1/0".into(), layout: "whole".into() },
            backend: Backend::Nvml,
            source: "nvml".into(),
            target: "n1/0".into(),
            summary: "Repartition n1/0".into(),
            steps,
            warnings: vec!["the last warning".into()],
            blockers: Vec::new(),
            destructive: true,
            second_confirmation: None,
            nothing_to_do: None,
            card: None,
            wait_idle: false,
        };
        st.dialog.modal = Some(tessera::ui::dialogs::confirm(plan));
    };
    let screen = render(80, 24, setup, false);
    assert!(screen.contains("steps 1-") && screen.contains("below: Down, PgDn"), "{screen}");
    assert!(screen.contains("(read to the end to confirm)"), "{screen}");
    assert!(screen.contains("warning: the last warning"), "{screen}");
    assert!(screen.contains("type n1/0 and Enter"), "{screen}");
    insta::assert_snapshot!("confirm_long_plan_80x24", screen);
    // Too small to show the question: it says so, and (tests in ui/actions_tests.rs) accepts
    // nothing but Esc.
    let tiny = render(20, 5, setup, false);
    assert!(tiny.contains("enlarge"), "{tiny}");
    assert!(!tiny.contains("type n1/0"), "{tiny}");
    insta::assert_snapshot!("confirm_too_small_20x5", tiny);
    insta::assert_snapshot!("confirm_too_small_40x10", render(40, 10, setup, false));
}

/// The sort column is marked in the header, with its direction (it was not marked).
#[test]
fn the_sort_column_is_marked() {
    use tessera::ui::keymap::Intent;
    let sorted = render(
        160,
        48,
        |st, store| {
            st.apply(Intent::Sort, store.fleet());
        },
        false,
    );
    let header = sorted.lines().find(|l| l.contains("MODEL")).unwrap_or_default().to_string();
    assert!(header.contains("UTIL▼"), "{header}");
    let reversed = render(
        160,
        48,
        |st, store| {
            st.apply(Intent::Sort, store.fleet());
            st.apply(Intent::ReverseSort, store.fleet());
        },
        false,
    );
    let header = reversed.lines().find(|l| l.contains("MODEL")).unwrap_or_default().to_string();
    assert!(header.contains("UTIL▲"), "{header}");
}

/// The text inside the help box's frame, row by row (the frame and padding left out).
fn help_rows(screen: &str) -> Vec<String> {
    screen
        .lines()
        .map(|l| l.trim_matches('"'))
        .filter(|l| l.starts_with('│'))
        .map(|l| l.trim_matches('│').trim().to_string())
        .collect()
}

/// At 80 columns the help wrapped its long lines instead of cutting them: every binding's
/// description and every filter term's meaning is on screen somewhere while scrolling to the
/// end, which the keys reach.
#[test]
fn help_wraps_at_80_columns_and_scrolls_to_its_end() {
    let mut seen: Vec<String> = Vec::new();
    let mut last = String::new();
    let mut first = String::new();
    for down in 0..200 {
        let screen = render(
            80,
            24,
            |st, store| {
                st.screen.area = ratatui::layout::Rect::new(0, 0, 80, 24);
                st.apply(Intent::Help, store.fleet());
                for _ in 0..down {
                    st.apply(Intent::Down, store.fleet());
                }
            },
            false,
        );
        let rows = help_rows(&screen);
        let foot = rows.last().cloned().unwrap_or_default();
        assert!(foot.starts_with("j/k scroll ("), "{screen}");
        let body = &rows[..rows.len() - 1];
        if down == 0 {
            seen.extend(body.iter().cloned());
            first = screen.clone();
        } else {
            seen.extend(body.last().cloned());
        }
        last = screen;
        if foot.contains(" 0 below") {
            break;
        }
    }
    assert!(help_rows(&last).last().is_some_and(|f| f.contains(" 0 below")), "the keys reach the end\n{last}");
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let all = words(&seen.join(" "));
    assert!(!all.contains('…'), "{all}");
    for b in tessera::ui::keymap::bindings_for(false, false) {
        assert!(all.contains(&words(b.description)), "{:?} is cut\n{all}", b.description);
    }
    for (term, means) in tessera::ui::filter::TERMS {
        assert!(all.contains(&words(&format!("{term} {means}"))), "{term}: {means:?} is cut\n{all}");
    }
    // A description goes on under its own column: the key column stays clear.
    let hanging = |l: &str| l.starts_with("\"│         ") && l.chars().nth(11).is_some_and(|c| c != ' ');
    assert!(first.lines().any(hanging), "{first}");
}

/// At 80 columns the workloads' PLACEMENT was cut to `gpu-a10` with no ellipsis: each row's
/// placement names its node and card whole (`gpu-a100-01/3 …`), or says where it was cut.
#[test]
fn workload_placements_read_at_80_columns() {
    let screen = render(80, 24, |st, s| drop(st.apply(Intent::ViewWorkloads, s.fleet())), false);
    let lines: Vec<&str> = screen.lines().map(|l| l.trim_matches('"')).collect();
    let head = lines.iter().position(|l| l.starts_with("ID ")).unwrap_or_else(|| panic!("{screen}"));
    assert!(lines[head].contains("PLACEMENT"), "{screen}");
    let at = lines[head].find("PLACEMENT").unwrap_or_default();
    let rows: Vec<&str> = lines[head + 1..lines.len() - 1].iter().copied().filter(|l| l.starts_with("sim:")).collect();
    assert!(rows.len() > 10, "{screen}");
    for row in rows {
        let place: String = row.chars().skip(at).collect::<String>().trim_end().to_string();
        let node_and_card = place.split_whitespace().next().unwrap_or_default();
        let whole = node_and_card.split_once('/').is_some_and(|(node, card)| {
            node.starts_with("gpu-") && node.rsplit('-').next().is_some_and(|n| n.len() == 2) && !card.is_empty()
        });
        assert!(whole || place.contains('…'), "{place:?} in {row:?}\n{screen}");
    }
}

/// At 80 columns the header's totals lost their labels (`│ 60% │`, `(1h32m)`) and were cut
/// mid-part: each part keeps its label, and a part that does not fit is left out whole.
#[test]
fn the_header_keeps_its_labels_at_80_columns() {
    for setup in [
        Box::new(|_: &mut UiState, _: &Store| {}) as Setup,
        Box::new(|st: &mut UiState, _: &Store| st.settings.read_only = true),
        Box::new(|st: &mut UiState, _: &Store| replaying(st)),
    ] {
        let screen = render(80, 24, setup, false);
        let top = screen.lines().next().unwrap_or_default().trim_matches('"').to_string();
        assert!(!top.contains('…'), "{top}");
        // The unhealthy cards first: in a replay, whose label takes most of the line, alone.
        assert!(top.contains("2 unhealthy"), "{top}");
        for part in top.split('│').skip(1) {
            let part = part.trim();
            // Each part starts with its label (or is the clock).
            let labelled = ["util ", "queue ", "advice ", "MIG ", "mem "].iter().any(|l| part.starts_with(l));
            assert!(labelled, "{part:?} has no label: {top}");
        }
    }
    let top = render(80, 24, |_, _| {}, false);
    // Queue 4 since the DynamicMIG node (issue 49) creates instances for MIG work that waited.
    assert!(top.contains("util 60%") && top.contains("queue 4, oldest 1h32m"), "{top}");
}

/// The Advice view opens with the header's counts: its first rows are the high findings the
/// header counts, then the warn ones (high crowding and interference, 0 GPU-hours, were the
/// last rows, pages down at 80×24), and its own first line says the same numbers.
#[test]
fn the_advice_list_begins_with_what_the_header_counts() {
    let advice = |st: &mut UiState, s: &Store| {
        let cfg = tessera::config::Config::default();
        let cx = tessera::advisor::Context::new(&cfg, clock());
        st.on_findings(tessera::advisor::advise(s.fleet(), &cx));
        st.apply(Intent::ViewAdvice, s.fleet());
    };
    let screen = render(160, 48, advice, false);
    let lines: Vec<&str> = screen.lines().map(|l| l.trim_matches('"')).collect();
    let header = lines.iter().find(|l| l.contains(" tessera ")).copied().unwrap_or_default();
    let number = |before: &str| -> usize {
        let at = header.find(before).unwrap_or_else(|| panic!("{before} not in {header}"));
        header[..at].split_whitespace().last().and_then(|n| n.parse().ok()).unwrap_or_default()
    };
    let (high, warn) = (number(" high"), number(" warn"));
    assert!(high > 0 && warn > 0, "{header}");
    let at = lines.iter().position(|l| l.starts_with("SEV ")).unwrap_or_else(|| panic!("{screen}"));
    let sev: Vec<&str> =
        lines[at + 1..].iter().take(high + warn + 1).map(|l| l.split(' ').next().unwrap_or("")).collect();
    let mut want = vec!["high"; high];
    want.extend(vec!["warn"; warn]);
    want.push("info");
    assert_eq!(sev, want, "{screen}");
    let said = format!("{high} high, {warn} warn, ");
    assert!(lines[at - 1].contains(&said) && lines[at - 1].contains("severity first"), "{screen}");
    // At 80×24 the header has no room for them: the list says them.
    let narrow = render(80, 24, advice, false);
    assert!(narrow.contains(&said), "{narrow}");
}

/// Without colour (NO_COLOR, the mono theme) at 80 columns, each source's health is in words:
/// two sources cut to their names ("scrape:gpu-node-0…") differed only by colour.
#[test]
fn source_health_reads_without_colour_at_80_columns() {
    let mut store = store();
    for (name, fatal) in [("scrape:gpu-node-01.example:9400", false), ("scrape:gpu-node-02.example:9400", true)] {
        store.register(name, SourceKind::Scrape, Duration::from_secs(1));
        let error = tessera::sources::SourceError { message: "connection refused".into(), fatal, unanswered: true };
        store.apply(
            SourceUpdate { source: name.into(), kind: SourceKind::Scrape, at: clock(), result: Err(error) },
            clock(),
        );
    }
    let theme = Theme::load(Some("mono"), Depth::Mono, false).unwrap_or_else(|e| panic!("{e}"));
    let mut st = UiState::new(false, false, Duration::from_secs(1800), clock());
    st.screen.body = tessera::ui::viewport(ratatui::layout::Rect::new(0, 0, 80, 24));
    st.on_fleet(store.fleet());
    st.clock.wall = clock();
    let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap_or_else(|e| panic!("{e}"));
    term.draw(|f| tessera::ui::draw(f, &st, store.fleet(), &theme, store.simulated()))
        .unwrap_or_else(|e| panic!("{e}"));
    let screen = term.backend().to_string();
    let line = screen.lines().nth(1).unwrap_or_default().to_string();
    // Each source's state in words before its cut name: the sim's, and both targets'.
    assert!(line.contains(" live ") || line.contains("sim: live"), "{line}");
    assert_eq!(line.matches(" down s").count(), 2, "{line}");
}

/// #47 (words): the Advice view's footer offers `a` (act on the finding), not the card keys
/// `d r p`; a sort said in the footer's message is not said twice ("sort: util · sorted by util").
#[test]
fn the_footer_offers_the_keys_of_its_view_and_says_a_sort_once() {
    let advice = render(
        160,
        48,
        |st, s| {
            let _ = st.apply(Intent::ViewAdvice, s.fleet());
        },
        false,
    );
    let last = advice.lines().last().unwrap_or_default().to_string();
    assert!(last.contains("a act") && !last.contains("d drain") && !last.contains("p preempt"), "{last}");
    let fleet = render(
        160,
        48,
        |st, s| {
            let _ = st.apply(Intent::Sort, s.fleet());
        },
        false,
    );
    let last = fleet.lines().last().unwrap_or_default().to_string();
    assert!(last.contains("sorted by util") && !last.contains("sort: util"), "{last}");
    assert!(last.contains("d drain") && !last.contains("a act"), "{last}");
}

/// #47 (words): at 160 columns the header keeps the clock, shortening the advice segment to
/// `8H 2W` first (a long advice segment pushed the clock out).
#[test]
fn the_wide_header_keeps_the_clock() {
    let screen = render(
        120,
        30,
        |st, _| {
            st.advice.counts = (18, 12, 40);
            st.settings.read_only = true;
        },
        false,
    );
    let top = screen.lines().next().unwrap_or_default().to_string();
    assert!(top.trim_matches(|c| c == '"' || c == ' ').ends_with(":00 UTC"), "{top}");
}
