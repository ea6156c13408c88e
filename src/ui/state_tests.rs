//! Tests for navigation, filtering, sorting and commands over a simulated fleet.

use chrono::TimeZone;

use super::*;
use crate::ui::keymap::Intent;

fn fleet() -> Fleet {
    let t = Utc.with_ymd_and_hms(2026, 3, 2, 14, 0, 0).single().unwrap_or_default();
    crate::engine::simulated_store(42, t).fleet().clone()
}

fn state(f: &Fleet) -> UiState {
    let mut st = UiState::new(false, false, std::time::Duration::from_secs(1800), Utc::now());
    st.screen.body = 10;
    st.on_fleet(f);
    st
}

#[test]
fn selection_skips_node_headings() {
    let f = fleet();
    let mut st = state(&f);
    assert_eq!(st.fleet.list.rows[0], Row::Node(0));
    assert_eq!(st.fleet.list.selected, 1, "starts on the first card");
    for _ in 0..8 {
        st.apply(Intent::Down, &f);
    }
    assert_eq!(st.fleet.list.rows[st.fleet.list.selected], Row::Card(1, 0), "jumped over the second heading");
    st.apply(Intent::Up, &f);
    assert_eq!(st.fleet.list.rows[st.fleet.list.selected], Row::Card(0, 7));
    st.apply(Intent::Top, &f);
    assert_eq!(st.fleet.list.selected, 1);
    st.apply(Intent::Bottom, &f);
    assert_eq!(st.fleet.list.selected, st.fleet.list.rows.len() - 1);
    assert!(st.fleet.list.offset + st.screen.body > st.fleet.list.selected, "the selection stays in view");
}

#[test]
fn filter_sort_and_jump() {
    let f = fleet();
    let mut st = state(&f);
    st.set_filter("h200 mig".into(), &f);
    let cards = st.fleet.list.rows.iter().filter(|r| matches!(r, Row::Card(..))).count();
    assert_eq!(cards, 2);
    st.apply(Intent::Back, &f);
    assert!(st.filter.text.is_empty());
    st.apply(Intent::Sort, &f);
    assert_eq!(st.fleet.sort, SortKey::Util);
    assert!(st.fleet.list.rows.iter().all(|r| matches!(r, Row::Card(..))), "sorted views are flat");
    st.command("node gpu-h100-dra-01", &f);
    assert_eq!(st.selected_card().map(|c| c.node), Some("gpu-h100-dra-01".to_string()));
    assert_eq!(st.command("bogus", &f), Effect::Redraw);
    assert!(st.footer.message.as_deref().is_some_and(|m| m.contains("unknown command")));
    assert_eq!(st.command("q", &f), Effect::Quit);
}

/// `:node` takes the start of a name when it is one node's; `:fit` on a running workload says
/// where it runs before where another like it would fit.
#[test]
fn node_by_its_start_and_fit_of_a_running_job() {
    let f = fleet();
    let mut st = state(&f);
    st.command("node gpu-h200", &f);
    assert_eq!(st.selected_card().map(|c| c.node), Some("gpu-h200-01".to_string()));
    st.command("node gpu-h100", &f);
    let m = st.footer.message.clone().unwrap_or_default();
    assert!(m.starts_with("gpu-h100 begins 2 nodes (gpu-h100-01, gpu-h100-dra-01)"), "{m}");
    let running = f
        .workloads
        .iter()
        .find(|w| w.state == crate::model::WorkloadState::Running && !w.cards.is_empty())
        .map(|w| w.id.clone())
        .unwrap_or_default();
    st.command(&format!("fit {running}"), &f);
    let title = st.advice.panel.as_ref().map(|(t, _)| t.clone()).unwrap_or_default();
    assert!(title.starts_with(&format!("{running} runs on ")) && title.contains("where another"), "{title}");
}

/// `a` on advice in a replay says the replay is read-only (it said the finding "suggests
/// nothing tessera can do").
#[test]
fn acting_on_advice_in_a_replay_says_it_is_read_only() {
    let f = fleet();
    let mut st = state(&f);
    st.replay = Some(crate::ui::replay::Replay::new(vec![Utc::now()], 1.0, "night.tsrec".into()));
    st.command("advice", &f);
    assert_eq!(st.apply(Intent::ShowAction, &f), Effect::Redraw);
    let m = st.footer.message.clone().unwrap_or_default();
    assert!(m.starts_with("a replay is read-only"), "{m}");
}

#[test]
fn open_and_close_a_card() {
    let f = fleet();
    let mut st = state(&f);
    st.apply(Intent::Open, &f);
    assert_eq!(st.open.card, Some(CardRef::new("gpu-a100-01", 0)));
    st.apply(Intent::Back, &f);
    assert_eq!(st.open.card, None);
    st.apply(Intent::ViewQueue, &f);
    assert_eq!(st.tab, Tab::Queue);
    assert!(!st.queue.list.rows.is_empty());
    st.click(0);
    assert_eq!(st.queue.list.selected, 0);
}

#[test]
fn the_selection_follows_its_card_and_headings_stay_visible() {
    let mut f = fleet();
    let mut st = state(&f);
    st.command("node gpu-h100-dra-01", &f);
    st.apply(Intent::Down, &f);
    let before = st.selected_card();
    // The next fleet lists the nodes in another order.
    f.nodes.reverse();
    st.on_fleet(&f);
    assert_eq!(st.selected_card(), before);
    st.apply(Intent::Top, &f);
    assert_eq!(st.fleet.list.offset, 0, "the first node heading is in view");
    st.apply(Intent::Help, &f);
    let sel = st.fleet.list.selected;
    st.click(3);
    assert_eq!(st.fleet.list.selected, sel, "clicks under the help do not move the list");
}

#[test]
fn source_history_seeds_the_sparklines_once() {
    let mut f = fleet();
    let r = CardRef::new("gpu-a100-01", 4);
    f.history = vec![crate::model::CardHistory {
        gi: None,
        mem_mib: Vec::new(),
        card: r.clone(),
        step_s: 30,
        util: vec![Some(10.0), None, Some(30.0)],
        mem_pct: vec![Some(50.0)],
    }];
    let mut st = UiState::new(false, false, std::time::Duration::from_secs(1800), Utc::now());
    st.on_fleet(&f);
    let h: Vec<Option<f64>> = st.samples(&r).unwrap_or_else(|| panic!("no samples")).iter().map(|s| s.util()).collect();
    assert_eq!(h.len(), 4, "three from the source, then the card's own sample");
    assert_eq!(&h[..3], &[Some(10.0), None, Some(30.0)]);
    f.taken_at = f.taken_at.map(|t| t + chrono::Duration::seconds(5));
    st.on_fleet(&f);
    assert_eq!(
        st.samples(&r).unwrap_or_else(|| panic!("no samples")).len(),
        5,
        "seeded once; later fleets only add samples"
    );
}

#[test]
fn held_but_idle_workloads_are_found_by_the_filter_in_every_list() {
    let f = fleet();
    let idle: Vec<&crate::model::Workload> =
        f.workloads.iter().filter(|w| w.activity.is_some_and(|a| a.held_idle())).collect();
    assert!(!idle.is_empty(), "the simulated cluster has a notebook idling on a whole card");
    assert!(idle.iter().all(|w| w.kind == crate::model::WorkloadKind::Other), "only the idle notebooks");
    let mut st = state(&f);
    st.set_filter("held-idle".into(), &f);
    let cards: Vec<CardRef> = (0..st.fleet.list.rows.len()).filter_map(|i| st.ref_at(i)).collect();
    assert!(!cards.is_empty() && cards.iter().all(|r| idle.iter().any(|w| w.cards.contains(r))), "{cards:?}");
    assert_eq!(st.workloads.rows.len(), idle.len(), "the workloads view is filtered too");
    // The queue view filters by text as well.
    st.set_filter(String::new(), &f);
    let all = st.queue.list.rows.len();
    let first = f.workloads[st.queue.list.rows[0]].id.clone();
    st.set_filter(first.clone(), &f);
    assert!(st.queue.list.rows.len() < all || all == 1, "{first}");
    assert!(st.queue.list.rows.iter().all(|&i| f.workloads[i].id.contains(&first)));
}

#[test]
fn esc_goes_back_to_the_fleet_and_help_scrolls_without_moving_the_list() {
    let f = fleet();
    let mut st = state(&f);
    st.apply(Intent::ViewQueue, &f);
    st.apply(Intent::Back, &f);
    assert_eq!(st.tab, Tab::Fleet);
    let before = st.fleet.list.selected;
    st.apply(Intent::Help, &f);
    st.apply(Intent::Down, &f);
    st.apply(Intent::Down, &f);
    assert_eq!(st.fleet.list.selected, before, "j/k in help do not move the selection behind it");
    assert_eq!(st.open.help_scroll, 2);
    st.apply(Intent::Top, &f);
    assert_eq!(st.open.help_scroll, 0);
}

#[test]
fn enter_opens_a_workload_and_health_sorts_the_sick_first() {
    let f = fleet();
    let mut st = state(&f);
    st.apply(Intent::ViewQueue, &f);
    st.apply(Intent::Open, &f);
    let id = st.open.workload.clone().unwrap_or_else(|| panic!("nothing opened"));
    assert_eq!(f.workloads[st.queue.list.rows[0]].id, id);
    st.apply(Intent::Back, &f);
    assert!(st.open.workload.is_none() && st.tab == Tab::Queue, "Esc closes the detail first");
    st.apply(Intent::ViewFleet, &f);
    while st.fleet.sort != SortKey::Health {
        st.apply(Intent::Sort, &f);
    }
    let first = st.ref_at(0).and_then(|r| f.card(&r).cloned()).unwrap_or_default();
    assert!(first.health.fault().is_some(), "the lost card leads");
    st.apply(Intent::ReverseSort, &f);
    let last = st.ref_at(st.fleet.list.rows.len() - 1).and_then(|r| f.card(&r).cloned()).unwrap_or_default();
    assert!(last.health.fault().is_some(), "reversed, it is last");
    // The card off the bus and the one with uncorrectable ECC errors under running training.
    assert_eq!(crate::model::Totals::compute(&f).unhealthy, 2);
}

#[test]
fn a_plans_the_selected_advice_through_a_request() {
    let f = fleet();
    let mut st = state(&f);
    let finding = crate::advisor::Finding {
        kind: crate::advisor::Kind::UnhealthyHeld,
        severity: crate::advisor::Severity::High,
        subject: crate::advisor::Subject::Card { card: "gpu-a100-01/0".into() },
        title: "t".into(),
        evidence: Vec::new(),
        gpu_hours_per_day: 24.0,
        cost_per_day: None,
        suggestion: crate::advisor::Suggestion::Action {
            action: crate::actions::Action::Drain { target: "gpu-a100-01/0".into(), evict: false },
            why: "w".into(),
        },
        cards: vec![CardRef::new("gpu-a100-01", 0)],
    };
    st.on_findings(vec![finding]);
    assert!(st.advice.flagged.contains(&CardRef::new("gpu-a100-01", 0)), "its fleet row says advice");
    assert!(matches!(st.apply(Intent::ShowAction, &f), Effect::Redraw), "outside the Advice view: nothing");
    st.apply(Intent::ViewAdvice, &f);
    let e = st.apply(Intent::ShowAction, &f);
    let Effect::Request(crate::ui::dialogs::Request::Plan(a)) = e else { panic!("{e:?}") };
    assert_eq!(a, crate::actions::Action::Drain { target: "gpu-a100-01/0".into(), evict: false });
    let mut ro = UiState::new(true, false, std::time::Duration::from_secs(1800), Utc::now());
    ro.on_fleet(&f);
    ro.on_findings(st.advice.list.rows.clone());
    ro.apply(Intent::ViewAdvice, &f);
    assert_eq!(ro.apply(Intent::ShowAction, &f), Effect::Redraw, "read-only: no request");
}

#[test]
fn fit_answers_in_a_panel_that_esc_closes() {
    let f = fleet();
    let mut st = UiState::new(false, false, std::time::Duration::from_secs(1800), f.taken_at.unwrap_or_default());
    st.command("fit 3g.40gb", &f);
    let Some((title, lines)) = st.advice.panel.clone() else { panic!("no panel: {:?}", st.footer.message) };
    assert_eq!(title, "where it fits: a 3g.40gb instance");
    assert!(!lines.is_empty());
    st.apply(Intent::Back, &f);
    assert!(st.advice.panel.is_none());
    st.command("fit nonsense", &f);
    assert!(st.advice.panel.is_none());
    assert!(st.footer.message.as_deref().is_some_and(|m| m.contains("not a MIG profile")), "{:?}", st.footer.message);
}

#[test]
fn enter_shows_a_finding_in_full_and_esc_closes_it() {
    let f = fleet();
    let mut st = state(&f);
    let cfg = crate::config::Config::default();
    let found = crate::advisor::advise(&f, &crate::advisor::Context::new(&cfg, f.taken_at.unwrap_or_default()));
    let first = found.first().cloned().unwrap_or_else(|| panic!("the demo has findings"));
    st.on_findings(found);
    st.apply(Intent::ViewAdvice, &f);
    st.apply(Intent::Open, &f);
    let Some((title, lines)) = st.advice.panel.clone() else { panic!("no panel") };
    assert!(title.starts_with(first.kind.as_str()), "{title}");
    assert_eq!(lines[0], first.title);
    for e in &first.evidence {
        assert!(lines.contains(&format!("  {e}")), "{e} not in {lines:?}");
    }
    assert!(lines.iter().any(|l| l.starts_with("suggestion: ")), "{lines:?}");
    st.apply(Intent::Back, &f);
    assert!(st.advice.panel.is_none() && st.tab == Tab::Advice, "Esc closes the panel first");
}

#[test]
fn a_sparkline_sample_keeps_hundredths_and_unknown() {
    assert_eq!(std::mem::size_of::<Sample>(), 4);
    let s = Sample::new(Some(42.347), None);
    assert_eq!((s.util(), s.mem_pct()), (Some(42.35), None));
    assert_eq!(Sample::new(Some(0.0), Some(100.0)).mem_pct(), Some(100.0));
    assert_eq!(Sample::new(Some(-3.0), Some(f64::NAN)), Sample::new(Some(0.0), None));
    assert_eq!(Sample::new(Some(1e9), None).util(), Some(655.34), "clamped, never read as unknown");
}

/// The free sort ranks by free capacity (GiB of card memory): an idle H200 comes before an
/// A100 whose seven free 1g instances were seven "units" to its one.
#[test]
fn the_free_sort_ranks_capacity_not_units() {
    let f = fleet();
    let mut st = state(&f);
    while st.fleet.sort != SortKey::Free {
        st.apply(Intent::Sort, &f);
    }
    let free = |r: &Row| match *r {
        Row::Card(ni, ci) => crate::model::capacity::free_gib(&f.nodes[ni], &f.nodes[ni].cards[ci]),
        Row::Node(_) => 0.0,
    };
    let order: Vec<f64> = st.fleet.list.rows.iter().map(free).collect();
    assert!(order.windows(2).all(|w| w[0] >= w[1]), "{order:?}");
    let whole_h200 = f
        .cards()
        .find(|(n, c)| c.model.contains("H200") && !c.mig.enabled && crate::model::capacity::free_units(n, c) > 0);
    if let Some((n, c)) = whole_h200 {
        assert!(crate::model::capacity::free_gib(n, c) > 100.0, "an idle H200 is its whole memory");
    }
    let seven = crate::model::Card {
        model: "NVIDIA A100-SXM4-80GB".into(),
        memory_total_mib: Some(81920),
        mig: crate::model::MigState::from_layout(
            "NVIDIA A100-SXM4-80GB",
            "1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb",
        ),
        ..crate::model::Card::default()
    };
    let idle_h200 = crate::model::Card {
        model: "NVIDIA H200".into(),
        memory_total_mib: Some(143_771),
        ..crate::model::Card::default()
    };
    let node = crate::model::Node::new("n");
    assert_eq!(crate::model::capacity::free_units(&node, &seven), 7);
    assert_eq!(crate::model::capacity::free_units(&node, &idle_h200), 1);
    assert!(crate::model::capacity::free_gib(&node, &idle_h200) > crate::model::capacity::free_gib(&node, &seven));
}

/// In a card's view j/k open the next and the previous card (they moved the list behind it).
#[test]
fn j_and_k_go_from_card_to_card() {
    let f = fleet();
    let mut st = state(&f);
    st.apply(Intent::Open, &f);
    let first = st.open.card.clone();
    assert!(first.is_some());
    st.apply(Intent::Down, &f);
    let second = st.open.card.clone();
    assert!(second.is_some() && second != first, "{second:?}");
    st.apply(Intent::Up, &f);
    assert_eq!(st.open.card, first);
}

/// A footer message goes fifteen seconds after it was first shown; a new one starts anew.
#[test]
fn footer_messages_expire() {
    let f = fleet();
    let mut st = state(&f);
    let t0 = Utc::now();
    st.footer.message = Some("drain gpu-a100-01/0: done".into());
    assert!(!st.expire_message(t0));
    assert!(!st.expire_message(t0 + chrono::Duration::seconds(10)));
    st.footer.message = Some("another".into());
    assert!(!st.expire_message(t0 + chrono::Duration::seconds(14)), "a new message starts anew");
    assert!(!st.expire_message(t0 + chrono::Duration::seconds(20)));
    assert!(st.expire_message(t0 + chrono::Duration::seconds(29)));
    assert_eq!(st.footer.message, None);
}

/// #47 (words): a footer message does not outlive its view ("sorted by free" stayed over the
/// queue); staying on the view keeps it.
#[test]
fn a_footer_message_does_not_outlive_its_view() {
    let f = fleet();
    let mut st = state(&f);
    let _ = st.apply(Intent::Sort, &f);
    assert!(st.footer.message.as_deref().is_some_and(|m| m.starts_with("sorted by")), "{:?}", st.footer.message);
    let _ = st.apply(Intent::ViewFleet, &f);
    assert!(st.footer.message.is_some(), "the same view");
    let _ = st.apply(Intent::ViewQueue, &f);
    assert_eq!(st.footer.message, None);
}

/// A finding of `kind` and `severity` about card `card`, `gpu_hours` a day, suggesting a drain.
fn finding(
    kind: crate::advisor::Kind,
    severity: crate::advisor::Severity,
    card: &str,
    gpu_hours: f64,
) -> crate::advisor::Finding {
    crate::advisor::Finding {
        kind,
        severity,
        subject: crate::advisor::Subject::Card { card: card.into() },
        title: format!("{} {card}", kind.as_str()),
        evidence: vec![format!("about {card}")],
        gpu_hours_per_day: gpu_hours,
        cost_per_day: None,
        suggestion: crate::advisor::Suggestion::Action {
            action: crate::actions::Action::Drain { target: card.into(), evict: false },
            why: "w".into(),
        },
        cards: Vec::new(),
    }
}

/// The Advice view lists the most severe first, then the most GPU-hours (crowding and
/// interference, 0 GPU-hours, were the last rows, pages down); `s` there toggles cost first,
/// keeps the selection on its finding and says so, and the order holds for the next pass.
#[test]
fn advice_is_severity_first_and_s_toggles_cost_first() {
    use crate::advisor::{Kind, Severity};
    let f = fleet();
    let mut st = state(&f);
    let found = vec![
        finding(Kind::MigWaste, Severity::Info, "n/1", 30.0),
        finding(Kind::Crowded, Severity::High, "n/2", 0.0),
        finding(Kind::HeldIdle, Severity::Warn, "n/3", 10.0),
        finding(Kind::UnhealthyHeld, Severity::High, "n/4", 5.0),
    ];
    st.on_findings(found.clone());
    let cards = |st: &UiState| st.advice.list.rows.iter().map(|x| x.subject.text()).collect::<Vec<_>>();
    assert_eq!(cards(&st), ["n/4", "n/2", "n/3", "n/1"], "severity first, then GPU-hours");
    // The header's counts are the list's, and its first rows are the ones counted.
    assert_eq!(st.advice.counts, (2, 1, 1));
    st.apply(Intent::ViewAdvice, &f);
    st.apply(Intent::Down, &f);
    assert_eq!(st.advice.list.rows[st.advice.list.selected].subject.text(), "n/2");
    st.apply(Intent::Sort, &f);
    assert_eq!(cards(&st), ["n/1", "n/3", "n/4", "n/2"], "cost first");
    assert_eq!(
        st.advice.list.rows[st.advice.list.selected].subject.text(),
        "n/2",
        "the selection stays on its finding"
    );
    let m = st.footer.message.clone().unwrap_or_default();
    assert!(m.contains("cost first"), "{m}");
    assert_eq!(st.fleet.sort, SortKey::Node, "the fleet's sort is not touched from the Advice view");
    st.on_findings(found.clone());
    assert_eq!(cards(&st), ["n/1", "n/3", "n/4", "n/2"], "the next pass keeps the order asked for");
    st.apply(Intent::Sort, &f);
    assert_eq!(cards(&st), ["n/4", "n/2", "n/3", "n/1"]);
    let s = crate::ui::keymap::KEYMAP.iter().find(|b| b.intent == Intent::Sort).map(|b| b.description);
    assert!(s.is_some_and(|d| d.contains("cost first")), "the help says it: {s:?}");
}

/// A finding's detail marks itself gone when an advice pass no longer has it, `a` then acts
/// on nothing (it planned the gone finding's action), and leaving the Advice view closes it;
/// while the finding stays, `a` takes its current suggestion.
#[test]
fn a_findings_detail_goes_stale_never() {
    use crate::advisor::{Kind, Severity, Suggestion};
    let f = fleet();
    let mut st = state(&f);
    let a = finding(Kind::UnhealthyHeld, Severity::High, "gpu-a100-01/0", 24.0);
    let b = finding(Kind::UnhealthyHeld, Severity::High, "gpu-a100-01/1", 24.0);
    st.on_findings(vec![a.clone(), b.clone()]);
    st.apply(Intent::ViewAdvice, &f);
    st.apply(Intent::Open, &f);
    assert!(st.advice.panel.as_ref().is_some_and(|(_, l)| l[0] == a.title));
    // The next pass: the same finding, its drain now under way.
    let mut under_way = a.clone();
    under_way.suggestion = Suggestion::InProgress {
        action: crate::actions::Action::Drain { target: "gpu-a100-01/0".into(), evict: false },
        text: "draining gpu-a100-01/0".into(),
    };
    st.on_findings(vec![b.clone(), under_way]);
    assert_eq!(st.apply(Intent::ShowAction, &f), Effect::Redraw, "under way: nothing to plan");
    let m = st.footer.message.clone().unwrap_or_default();
    assert!(m.starts_with("in progress: draining gpu-a100-01/0"), "{m}");
    // Then it goes.
    st.on_findings(vec![b.clone()]);
    let (title, lines) = st.advice.panel.clone().unwrap_or_else(|| panic!("closed or marked, not left as it was"));
    assert!(title.contains("gone") && lines[0].starts_with("this finding is gone"), "{title}: {lines:?}");
    assert_eq!(st.apply(Intent::ShowAction, &f), Effect::Redraw, "a gone finding is not acted on");
    let m = st.footer.message.clone().unwrap_or_default();
    assert!(m.contains("gone"), "{m}");
    // It does not follow to other views.
    st.apply(Intent::ViewFleet, &f);
    assert!(st.advice.panel.is_none(), "a finding's detail closes when its view is left");
    // `:fit`'s answer is not a finding: a pass leaves it.
    st.command("fit 3g.40gb", &f);
    st.on_findings(Vec::new());
    assert!(st.advice.panel.as_ref().is_some_and(|(t, _)| t.starts_with("where it fits")));
}

/// `a` on a finding whose action is already under way says what is under way (it said the
/// finding "suggests nothing tessera can do itself").
#[test]
fn a_on_advice_in_progress_says_so() {
    use crate::advisor::{Kind, Severity, Suggestion};
    let f = fleet();
    let mut st = state(&f);
    let mut x = finding(Kind::PreemptionCandidate, Severity::High, "gpu-a100-01/0", 96.0);
    x.subject = crate::advisor::Subject::Workload { id: "sim:43".into() };
    x.suggestion = Suggestion::InProgress {
        action: crate::actions::Action::Preempt { workload: "sim:40".into(), force: false },
        text: "preempting sim:40: it is checkpointing, then it requeues and sim:43 starts".into(),
    };
    st.on_findings(vec![x]);
    st.apply(Intent::ViewAdvice, &f);
    assert_eq!(st.apply(Intent::ShowAction, &f), Effect::Redraw);
    let m = st.footer.message.clone().unwrap_or_default();
    assert_eq!(
        m,
        "in progress: preempting sim:40: it is checkpointing, then it requeues and sim:43 starts; nothing to do until it lands"
    );
}
