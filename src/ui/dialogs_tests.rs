use super::*;
use crate::actions::Env;
use crate::actions::run::Runner;
use crate::actions::{Action, Plan};
use crate::store::Store;
use crate::ui::input::on_key;
use crate::ui::state::Effect;
use crate::ui::state::UiState;
use chrono::{DateTime, TimeZone, Utc};
use crossterm::event::KeyModifiers;
use proptest::prelude::*;

fn clock() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 14, 30, 0).single().unwrap_or_default()
}

fn store() -> Store {
    crate::engine::simulated_store(42, clock())
}

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

/// The loop's handling of requests, without IO: plans open confirmations; an execution is
/// recorded (that is where the executor would run) and finishes at once.
fn serve(st: &mut UiState, store: &Store, effect: Effect, executed: &mut Vec<Plan>) {
    match effect {
        Effect::Request(Request::Plan(action)) => {
            let runner = Runner::new(&crate::config::Config::default(), Env::default()).with_audit(None);
            match runner.propose(&action, store.fleet()) {
                Ok(p) => st.dialog.modal = Some(confirm(p)),
                Err(e) => st.footer.message = Some(e.to_string()),
            }
        }
        Effect::Request(Request::Execute(p)) => {
            executed.push((*p).clone());
            st.dialog.modal = Some(running(p));
        }
        _ => {}
    }
}

/// Press `keys` in order, serving each effect and drawing a frame after each, as the loop
/// does.
fn press(st: &mut UiState, store: &Store, keys: &[KeyCode], executed: &mut Vec<Plan>) {
    for &k in keys {
        let e = on_key(st, store.fleet(), key(k));
        serve(st, store, e, executed);
        drawn_now(st);
    }
}

/// The loop drew a frame.
fn drawn_now(st: &mut UiState) {
    let screen = st.screen.area;
    if let Some(m) = st.dialog.modal.as_mut() {
        drawn(m, screen);
    }
}

fn ui() -> UiState {
    let mut st = UiState::new(false, false, std::time::Duration::from_secs(1800), clock());
    // As drawn on a 160x48 terminal: every plan here shows whole.
    st.screen.area = ratatui::layout::Rect::new(0, 0, 160, 48);
    st
}

#[test]
fn drain_confirmed_with_y_executes_once() {
    let store = store();
    let mut st = ui();
    st.on_fleet(store.fleet());
    let mut executed = Vec::new();
    press(&mut st, &store, &[KeyCode::Char('d'), KeyCode::Char('y')], &mut executed);
    assert_eq!(executed.len(), 1);
    assert_eq!(executed[0].action, Action::Drain { target: "gpu-a100-01/0".into(), evict: false });
}

/// A bare Enter is not a yes: drain and undrain (and a forced undrain's first question) ask for
/// `y`, as the CLI's y/N does; Enter used to confirm them.
#[test]
fn a_bare_enter_does_not_confirm_a_drain_or_an_undrain() {
    let store = store();
    let mut st = ui();
    st.on_fleet(store.fleet());
    let mut executed = Vec::new();
    press(&mut st, &store, &[KeyCode::Char('d'), KeyCode::Enter], &mut executed);
    assert!(executed.is_empty(), "Enter drained the card");
    assert!(matches!(st.dialog.modal, Some(Modal::Confirm { .. })), "still asking");
    let Some((sheet, _)) = st.dialog.modal.as_ref().and_then(confirmation) else { panic!("a confirmation") };
    let question = sheet.question.map(|(q, _)| q).unwrap_or_default();
    assert_eq!(question, "y to confirm, n or Esc to cancel");
    press(&mut st, &store, &[KeyCode::Char('y')], &mut executed);
    assert_eq!(executed.len(), 1);
}

/// At 20x5 the dialog cannot show the plan: y, Enter and a typed name do nothing; Esc cancels.
/// (The old dialog executed on y with the plan hidden.)
#[test]
fn a_confirmation_that_cannot_be_seen_accepts_only_esc() {
    let store = store();
    let mut st = ui();
    st.screen.area = ratatui::layout::Rect::new(0, 0, 20, 5);
    st.on_fleet(store.fleet());
    let mut executed = Vec::new();
    press(&mut st, &store, &[KeyCode::Char('d'), KeyCode::Char('y'), KeyCode::Enter], &mut executed);
    assert!(executed.is_empty(), "nothing runs from a dialog that does not fit");
    assert!(matches!(st.dialog.modal, Some(Modal::Confirm { .. })), "still asking");
    // What it shows says why.
    let Some((sheet, scroll)) = st.dialog.modal.as_ref().and_then(confirmation) else { panic!("a confirmation") };
    let shown = crate::ui::sheet::show(&sheet, st.screen.area, scroll);
    assert!(!shown.legible);
    assert!(shown.rows.iter().map(|r| r.0.as_str()).collect::<String>().contains("enlarge"), "{:?}", shown.rows);
    // Enlarged, the same dialog confirms.
    st.screen.area = ratatui::layout::Rect::new(0, 0, 80, 24);
    // The resize redraws: y counts once the dialog was drawn whole.
    drawn_now(&mut st);
    press(&mut st, &store, &[KeyCode::Char('y')], &mut executed);
    assert_eq!(executed.len(), 1);

    // A destructive plan: the typed name is not even taken while it cannot show.
    let mut st = ui();
    st.screen.area = ratatui::layout::Rect::new(0, 0, 30, 6);
    st.on_fleet(store.fleet());
    let mut p = executed[0].clone();
    p.destructive = true;
    st.dialog.modal = Some(confirm(p.clone()));
    let keys: Vec<KeyCode> = p.target.chars().map(KeyCode::Char).chain([KeyCode::Enter]).collect();
    let mut none = Vec::new();
    press(&mut st, &store, &keys, &mut none);
    assert!(none.is_empty());
    assert!(matches!(&st.dialog.modal, Some(Modal::Confirm { typed, .. }) if typed.is_empty()));
    press(&mut st, &store, &[KeyCode::Esc], &mut none);
    assert!(st.dialog.modal.is_none() && none.is_empty());
    assert!(
        st.footer.message.as_deref().is_some_and(|m| m.ends_with("cancelled: nothing done")),
        "{:?}",
        st.footer.message
    );
}

/// A console at 80x24 on the store's fleet.
fn at_80x24(store: &Store) -> UiState {
    let mut st = ui();
    st.screen.area = ratatui::layout::Rect::new(0, 0, 80, 24);
    st.on_fleet(store.fleet());
    st
}

/// The selected card's drain plan with its step repeated to `steps` (the dialog closed).
fn drain_plan(st: &mut UiState, store: &Store, steps: usize) -> Plan {
    press(st, store, &[KeyCode::Char('d')], &mut Vec::new());
    let Some(Modal::Confirm { plan, .. }) = st.dialog.modal.take() else { panic!("a confirmation") };
    let mut p = plan.as_ref().clone();
    p.steps = (0..steps).map(|_| p.steps[0].clone()).collect();
    p
}

/// A plan longer than the dialog (an NVML repartition of seven instances has 22 steps) scrolls;
/// it confirms only once every step has been on screen.
#[test]
fn a_long_plan_confirms_only_after_every_step_was_shown() {
    let store = store();
    let (mut st, mut executed) = (at_80x24(&store), Vec::new());
    st.dialog.modal = Some(confirm(drain_plan(&mut st, &store, 22)));
    press(&mut st, &store, &[KeyCode::Char('y'), KeyCode::Enter], &mut executed);
    assert!(executed.is_empty(), "the last steps were never shown");
    let mut downs = 0;
    while executed.is_empty() {
        press(&mut st, &store, &[KeyCode::PageDown, KeyCode::Char('y')], &mut executed);
        downs += 1;
        assert!(downs < 12, "PgDn reaches the end");
    }
    assert!(downs >= 2, "22 steps take three pages at 80x24 ({downs})");
    assert_eq!(executed[0].steps.len(), 22);
}

/// Keys typed ahead of the screen (PgDn PgDn y in one batch, no frame between) cannot read a
/// long plan for the operator: only drawn frames count.
#[test]
fn keys_typed_ahead_do_not_read_the_plan() {
    let store = store();
    let (mut st, mut executed) = (at_80x24(&store), Vec::new());
    st.dialog.modal = Some(confirm(drain_plan(&mut st, &store, 22)));
    drawn_now(&mut st);
    for k in [KeyCode::PageDown, KeyCode::PageDown, KeyCode::PageDown, KeyCode::Char('y')] {
        let e = on_key(&mut st, store.fleet(), key(k));
        serve(&mut st, &store, e, &mut executed);
    }
    assert!(executed.is_empty(), "pages never drawn were counted as read");
    drawn_now(&mut st);
    press(&mut st, &store, &[KeyCode::PageUp, KeyCode::PageUp, KeyCode::Char('y')], &mut executed);
    assert!(executed.is_empty(), "the pages between were never drawn either");
}

/// A second question (forcing a preemption) counts only once drawn: the name, Enter and y in
/// one batch do not answer a question never shown.
#[test]
fn a_second_question_must_be_drawn_before_it_is_answered() {
    let store = store();
    let (mut st, mut executed) = (at_80x24(&store), Vec::new());
    let mut p = drain_plan(&mut st, &store, 1);
    p.destructive = true;
    p.second_confirmation = Some("it has not run its minimum: go on anyway?".into());
    st.dialog.modal = Some(confirm(p.clone()));
    drawn_now(&mut st);
    let batch: Vec<KeyCode> = p.target.chars().map(KeyCode::Char).chain([KeyCode::Enter, KeyCode::Char('y')]).collect();
    for k in batch {
        let e = on_key(&mut st, store.fleet(), key(k));
        serve(&mut st, &store, e, &mut executed);
    }
    assert!(executed.is_empty(), "the second question was never on screen");
    assert!(matches!(st.dialog.modal, Some(Modal::Confirm { second: true, .. })));
    drawn_now(&mut st);
    press(&mut st, &store, &[KeyCode::Char('y')], &mut executed);
    assert_eq!(executed.len(), 1);
}

#[test]
fn cancel_leaves_everything_unchanged() {
    let store = store();
    let mut st = ui();
    st.on_fleet(store.fleet());
    let before = store.fleet().nodes.clone();
    let mut executed = Vec::new();
    press(&mut st, &store, &[KeyCode::Char('d'), KeyCode::Esc], &mut executed);
    assert!(executed.is_empty());
    assert!(st.dialog.modal.is_none());
    assert_eq!(st.footer.message.as_deref(), Some("drain gpu-a100-01/0 cancelled: nothing done"));
    assert_eq!(store.fleet().nodes, before);
}

#[test]
fn destructive_actions_need_the_typed_name() {
    let store = store();
    let mut st = ui();
    st.on_fleet(store.fleet());
    let mut executed = Vec::new();
    // Repartition the selected card: open the picker, take the first layout, plan it.
    press(&mut st, &store, &[KeyCode::Char('r'), KeyCode::Enter], &mut executed);
    let Some(Modal::Confirm { plan, .. }) = st.dialog.modal.clone() else {
        panic!("no confirmation: {:?}", st.footer.message)
    };
    // The selected card is busy: the guards refuse, so nothing can confirm it.
    assert!(!plan.allowed(), "{:?}", plan.blockers);
    press(&mut st, &store, &[KeyCode::Char('y'), KeyCode::Enter], &mut executed);
    assert!(executed.is_empty());

    // The refusal offers the drain that makes the card idle.
    st.dialog.modal = Some(confirm(plan.as_ref().clone()));
    let e = on_key(&mut st, store.fleet(), key(KeyCode::Char('d')));
    serve(&mut st, &store, e, &mut executed);
    let Some(Modal::Confirm { plan: drain, .. }) = st.dialog.modal.clone() else { panic!("no drain offered") };
    assert_eq!(drain.action, Action::Drain { target: plan.target.clone(), evict: false });
    assert!(executed.is_empty(), "offering is not executing");

    // An allowed destructive plan: typing anything else and Enter does not confirm.
    let mut p = plan.as_ref().clone();
    p.blockers.clear();
    st.dialog.modal = Some(confirm(p.clone()));
    drawn_now(&mut st);
    for c in "wrong".chars() {
        on_key(&mut st, store.fleet(), key(KeyCode::Char(c)));
    }
    let e = on_key(&mut st, store.fleet(), key(KeyCode::Enter));
    serve(&mut st, &store, e, &mut executed);
    assert!(executed.is_empty());
    st.dialog.modal = Some(confirm(p.clone()));
    drawn_now(&mut st);
    for c in p.target.chars() {
        on_key(&mut st, store.fleet(), key(KeyCode::Char(c)));
    }
    let e = on_key(&mut st, store.fleet(), key(KeyCode::Enter));
    serve(&mut st, &store, e, &mut executed);
    assert_eq!(executed.len(), 1);
}

#[test]
fn read_only_has_no_action_keys() {
    let store = store();
    let mut st = UiState::new(true, false, std::time::Duration::from_secs(1800), clock());
    st.on_fleet(store.fleet());
    let mut executed = Vec::new();
    for k in ['d', 'u', 'r', 'p', 'P', 'y'] {
        let e = on_key(&mut st, store.fleet(), key(KeyCode::Char(k)));
        serve(&mut st, &store, e, &mut executed);
    }
    assert!(st.dialog.modal.is_none() && executed.is_empty());
}

fn keys() -> impl Strategy<Value = Vec<KeyCode>> {
    let one = prop_oneof![
        Just(KeyCode::Char('d')),
        Just(KeyCode::Char('u')),
        Just(KeyCode::Char('r')),
        Just(KeyCode::Char('p')),
        Just(KeyCode::Char('P')),
        Just(KeyCode::Char('y')),
        Just(KeyCode::Char('n')),
        Just(KeyCode::Char('j')),
        Just(KeyCode::Char('k')),
        Just(KeyCode::Char('1')),
        Just(KeyCode::Char('3')),
        Just(KeyCode::Char('g')),
        Just(KeyCode::Enter),
        Just(KeyCode::Esc),
        Just(KeyCode::Backspace),
        Just(KeyCode::PageDown),
        Just(KeyCode::Down),
        Just(KeyCode::Tab),
    ];
    proptest::collection::vec(one, 0..60)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever keys arrive, an execution only follows the confirming key of an allowed plan's
    /// confirmation, with the name typed for a destructive one and the second answer given.
    #[test]
    fn no_execution_without_the_confirm_step(seq in keys(), w in 0u16..120, h in 0u16..40) {
        let store = store();
        let mut st = ui();
        st.screen.area = ratatui::layout::Rect::new(0, 0, w, h);
        st.on_fleet(store.fleet());
        let mut executed = Vec::new();
        for k in seq {
            let before = st.dialog.modal.clone();
            let n = executed.len();
            let e = on_key(&mut st, store.fleet(), key(k));
            serve(&mut st, &store, e, &mut executed);
            // The loop draws after each batch; a batch here is one key.
            drawn_now(&mut st);
            if executed.len() > n {
                let Some(Modal::Confirm { plan, typed, second, .. }) = before.clone() else {
                    panic!("executed without a confirmation on screen")
                };
                prop_assert!(plan.allowed());
                prop_assert_eq!(&*plan, &executed[n]);
                // The question showed whole and the plan had all been on screen.
                let (sheet, scroll) = before.as_ref().and_then(confirmation).unwrap_or_default();
                prop_assert!(scroll.answerable(&sheet, st.screen.area), "executed from a dialog not seen at {w}x{h}");
                if plan.second_confirmation.is_some() {
                    prop_assert!(second && k == KeyCode::Char('y'));
                } else if plan.destructive {
                    prop_assert!(k == KeyCode::Enter && typed == plan.target);
                } else {
                    prop_assert!(matches!(k, KeyCode::Char('y') | KeyCode::Enter));
                }
            }
        }
    }
}

#[test]
fn a_refusal_closes_as_refused_and_read_only_says_so_once() {
    let store = store();
    let mut st = ui();
    st.on_fleet(store.fleet());
    let mut executed = Vec::new();
    // The selected card is busy: repartition is refused; Esc says refused, not cancelled.
    press(&mut st, &store, &[KeyCode::Char('r'), KeyCode::Enter, KeyCode::Esc], &mut executed);
    assert!(
        st.footer.message.as_deref().is_some_and(|m| m.ends_with("refused: nothing done")),
        "{:?}",
        st.footer.message
    );

    let mut ro = UiState::new(true, false, std::time::Duration::from_secs(1800), clock());
    ro.on_fleet(store.fleet());
    assert_eq!(on_key(&mut ro, store.fleet(), key(KeyCode::Char('d'))), Effect::Redraw);
    assert!(ro.footer.message.as_deref().is_some_and(|m| m.starts_with("read-only")));
    ro.footer.message = None;
    assert_eq!(on_key(&mut ro, store.fleet(), key(KeyCode::Char('r'))), Effect::None, "once is enough");
    assert!(ro.footer.message.is_none());
}

#[test]
fn an_unhealthy_card_is_undrained_only_forced_and_asked_twice() {
    let store = store();
    let mut st = ui();
    st.on_fleet(store.fleet());
    let mut executed = Vec::new();
    // The simulated cluster's XID 79 card.
    let dead = store
        .fleet()
        .cards()
        .find(|(_, c)| c.health.last_xid == Some(79))
        .map(|(n, c)| format!("{}/{}", n.name, c.index));
    let dead = dead.unwrap_or_else(|| panic!("no XID 79 card"));
    let e = Effect::Request(Request::Plan(Action::Undrain { target: dead.clone(), force: false }));
    serve(&mut st, &store, e, &mut executed);
    let Some(Modal::Confirm { plan, .. }) = st.dialog.modal.clone() else { panic!("no confirmation") };
    assert!(!plan.allowed() && offers_force(&plan), "{:?}", plan.blockers);
    press(&mut st, &store, &[KeyCode::Char('y'), KeyCode::Enter], &mut executed);
    assert!(executed.is_empty(), "a refused undrain cannot be confirmed");
    // f plans it forced; y, then the second y, runs it.
    press(&mut st, &store, &[KeyCode::Char('f'), KeyCode::Char('y')], &mut executed);
    assert!(executed.is_empty(), "the second question is not answered yet");
    let e = on_key(&mut st, store.fleet(), key(KeyCode::Char('y')));
    serve(&mut st, &store, e, &mut executed);
    assert_eq!(executed.len(), 1);
    assert_eq!(executed[0].action, Action::Undrain { target: dead, force: true });
}

#[test]
fn a_running_action_can_be_hidden_and_followed_in_the_footer() {
    let store = store();
    let mut st = ui();
    st.on_fleet(store.fleet());
    let mut executed = Vec::new();
    press(&mut st, &store, &[KeyCode::Char('d'), KeyCode::Char('y')], &mut executed);
    assert!(st.action_running());
    if let Some(m) = &mut st.dialog.modal {
        on_progress(m, Progress::Started { step: 0, wait_s: Some(45) }, clock());
    }
    // Esc hides the dialog; the keys browse again; q does not abandon the action.
    assert_eq!(on_key(&mut st, store.fleet(), key(KeyCode::Esc)), Effect::Redraw);
    assert!(st.dialog.hidden && st.action_running());
    let before = st.fleet.list.selected;
    on_key(&mut st, store.fleet(), key(KeyCode::Char('j')));
    assert_ne!(st.fleet.list.selected, before, "the list moves while the action runs");
    let line = st.dialog.modal.as_ref().and_then(|m| progress_line(m, clock() + chrono::Duration::seconds(12)));
    assert!(line.as_deref().is_some_and(|l| l.contains("step 1/1") && l.contains("33 s left")), "{line:?}");
    assert_eq!(on_key(&mut st, store.fleet(), key(KeyCode::Char('q'))), Effect::Redraw);
    assert!(st.dialog.quit_after, "q waits for the action");
    on_key(&mut st, store.fleet(), key(KeyCode::Char('a')));
    assert!(!st.dialog.hidden, "a shows it again");
}

#[test]
fn no_second_action_while_one_runs_hidden() {
    let store = store();
    let mut st = ui();
    st.on_fleet(store.fleet());
    let mut executed = Vec::new();
    press(&mut st, &store, &[KeyCode::Char('d'), KeyCode::Char('y'), KeyCode::Esc], &mut executed);
    assert!(st.dialog.hidden && st.action_running());
    for k in [KeyCode::Char('j'), KeyCode::Char('d'), KeyCode::Char('u'), KeyCode::Char('r')] {
        let e = on_key(&mut st, store.fleet(), key(k));
        assert!(!matches!(e, Effect::Request(_)), "{k:?} asked for an action while one runs");
    }
    assert!(matches!(st.dialog.modal, Some(Modal::Running { .. })), "the running action keeps its dialog");
    assert_eq!(executed.len(), 1);
}

/// #47 (words): a destructive plan's typed name that is not the target's says it does not
/// match at the Enter (it was silent), until the next key; the right name then confirms.
#[test]
fn a_wrong_typed_name_says_it_does_not_match() {
    let store = store();
    let mut st = ui();
    st.screen.area = ratatui::layout::Rect::new(0, 0, 120, 40);
    st.on_fleet(store.fleet());
    let mut executed = Vec::new();
    press(&mut st, &store, &[KeyCode::Char('d')], &mut executed);
    let Some(Modal::Confirm { plan, .. }) = st.dialog.modal.clone() else { panic!("a confirmation") };
    let mut p = (*plan).clone();
    p.destructive = true;
    st.dialog.modal = Some(confirm(p.clone()));
    drawn_now(&mut st);
    press(&mut st, &store, &[KeyCode::Char('x'), KeyCode::Enter], &mut executed);
    assert!(executed.is_empty());
    let Some((sheet, _)) = st.dialog.modal.as_ref().and_then(confirmation) else { panic!("still asking") };
    let q = sheet.question.map(|q| q.0).unwrap_or_default();
    assert!(q.starts_with(&format!("\"x\" does not match {}", p.target)), "{q}");
    press(&mut st, &store, &[KeyCode::Backspace], &mut executed);
    let keys: Vec<KeyCode> = p.target.chars().map(KeyCode::Char).chain([KeyCode::Enter]).collect();
    press(&mut st, &store, &keys, &mut executed);
    assert_eq!(executed.len(), 1, "the right name confirms");
}
