//! Terminal input as pure logic: keys through the keymap (or into the filter and command
//! lines and the action dialogs), mouse clicks and wheel, resizes. Each event returns the
//! `Effect` the loop must carry out; nothing here does IO.

use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, MouseEventKind};

use super::dialogs::Answer;
use super::keymap::{Intent, route, route_for};
use super::state::{Effect, Input, UiState};
use crate::model::Fleet;

/// Two effects of keys handled before one draw, as one: quitting wins; a later request
/// replaces an earlier one; a dialog that closed voids a request typed ahead of it.
pub fn merge(a: Effect, b: Effect) -> Effect {
    match (a, b) {
        (Effect::Quit, _) | (_, Effect::Quit) => Effect::Quit,
        (Effect::Suspend, _) | (_, Effect::Suspend) => Effect::Suspend,
        (_, Effect::Request(r)) => Effect::Request(r),
        (_, Effect::Dismissed) => Effect::Dismissed,
        (Effect::Request(r), _) => Effect::Request(r),
        (Effect::Redraw | Effect::Dismissed, _) | (_, Effect::Redraw) => Effect::Redraw,
        _ => Effect::None,
    }
}

/// One terminal event: keys through the keymap (or into the filter/command line), mouse
/// clicks and wheel, resizes.
pub fn on_event(st: &mut UiState, fleet: &Fleet, ev: Event) -> Effect {
    match ev {
        Event::Key(k) if k.kind != KeyEventKind::Release => on_key(st, fleet, k),
        Event::Mouse(m) => {
            let body_top = super::HEADER_LINES + 1 + super::lines_above(st);
            match m.kind {
                MouseEventKind::Down(_) if m.row >= body_top => st.click(usize::from(m.row - body_top)),
                MouseEventKind::ScrollDown if !st.open.help && st.open.card.is_none() => st.step(3),
                MouseEventKind::ScrollUp if !st.open.help && st.open.card.is_none() => st.step(-3),
                _ => return Effect::None,
            }
            Effect::Redraw
        }
        Event::Resize(..) => Effect::Redraw,
        _ => Effect::None,
    }
}

pub fn on_key(st: &mut UiState, fleet: &Fleet, k: KeyEvent) -> Effect {
    if let Some(e) = control_key(st, &k) {
        return e;
    }
    if let Some(e) = dialog_key(st, &k) {
        return e;
    }
    match &mut st.input {
        Input::Normal => normal_key(st, fleet, &k),
        Input::Filter(_) => filter_key(st, fleet, &k),
        Input::Goto(_) => typed(st, k, |st, t| {
            super::state::replay_keys::goto(st, t);
            Effect::Redraw
        }),
        Input::Command(text) if k.code == KeyCode::Tab => {
            complete(text, fleet);
            Effect::Redraw
        }
        Input::Command(_) => typed(st, k, |st, t| st.command(t, fleet)),
    }
}

/// Ctrl-Z and Ctrl-C, from anywhere, typing and dialogs included (raw mode turns them into
/// keys; the keymap lists them).
fn control_key(st: &mut UiState, k: &KeyEvent) -> Option<Effect> {
    let ctrl = k.modifiers.contains(crossterm::event::KeyModifiers::CONTROL);
    if k.code == KeyCode::Char('z') && ctrl {
        return Some(Effect::Suspend);
    }
    if k.code == KeyCode::Char('c') && ctrl {
        if st.action_running() && !st.dialog.quit_after {
            st.dialog.leave_when_done();
            st.say("an action is running: tessera quits when it ends (Ctrl-C again to leave now)");
            return Some(Effect::Redraw);
        }
        return Some(Effect::Quit);
    }
    None
}

/// A key for the dialog in front, if one shows: it takes every key.
fn dialog_key(st: &mut UiState, k: &KeyEvent) -> Option<Effect> {
    let running = st.action_running();
    let modal = st.dialog.modal.as_mut().filter(|_| !st.dialog.hidden)?;
    // q in a running action's dialog: leave when it ends, as the signals do.
    if k.code == KeyCode::Char('q') && running {
        st.quit_when_done();
        return Some(Effect::Redraw);
    }
    Some(match super::dialogs::on_key(modal, k, st.screen.area) {
        Answer::Stay => Effect::Redraw,
        Answer::Close(message) => {
            st.close_dialog();
            st.say(message);
            // A confirmation typed ahead of the loop must not outlive its dialog.
            Effect::Dismissed
        }
        Answer::Request(r) => Effect::Request(r),
        Answer::Hide => {
            st.dialog.hide();
            st.footer.clear();
            Effect::Redraw
        }
    })
}

/// A key with nothing typed and no dialog: through the keymap to the state.
fn normal_key(st: &mut UiState, fleet: &Fleet, k: &KeyEvent) -> Effect {
    let read_only = st.settings.read_only;
    let replay = st.replay.is_some();
    match route_for(k, read_only, replay) {
        Some(intent) => st.apply(intent, fleet),
        // The action keys do not exist read-only; say so once, not on every key.
        None if read_only && !st.dialog.told_read_only && route(k, false).is_some_and(Intent::is_action) => {
            st.dialog.told_read_only = true;
            st.say(if replay {
                "a replay is read-only: nothing can act on the past"
            } else {
                "read-only: tessera was started without actions (drain, repartition, preempt)"
            });
            Effect::Redraw
        }
        None => Effect::None,
    }
}

/// A key while the filter is typed: it applies at every key; Esc clears it, Enter keeps it.
fn filter_key(st: &mut UiState, fleet: &Fleet, k: &KeyEvent) -> Effect {
    let Input::Filter(text) = &mut st.input else { return Effect::None };
    match k.code {
        KeyCode::Esc => {
            st.input = Input::Normal;
            st.set_filter(String::new(), fleet);
        }
        KeyCode::Enter => st.input = Input::Normal,
        KeyCode::Backspace => {
            text.pop();
            let t = text.clone();
            st.set_filter(t, fleet);
        }
        KeyCode::Char(c) => {
            text.push(c);
            let t = text.clone();
            st.set_filter(t, fleet);
        }
        _ => return Effect::None,
    }
    Effect::Redraw
}

/// Tab in `:node NAME`: the name completed as far as the nodes that begin with it agree (the
/// whole name when one does).
fn complete(text: &mut String, fleet: &Fleet) {
    let Some(start) = text.strip_prefix("node ").map(str::trim_start) else { return };
    let names: Vec<&str> = fleet.nodes.iter().map(|n| n.name.as_str()).filter(|n| n.starts_with(start)).collect();
    let Some(first) = names.first() else { return };
    let mut common = first.len();
    for n in &names[1..] {
        common = first.bytes().zip(n.bytes()).take(common).take_while(|(a, b)| a == b).count();
    }
    // On a character boundary: names are ASCII in practice, but need not be.
    while !first.is_char_boundary(common) {
        common -= 1;
    }
    if common >= start.len() {
        *text = format!("node {}", &first[..common]);
    }
}

/// A line being typed (a `:` command, a replay's `g` time): Esc drops it, Enter hands it to
/// `enter`, Backspace and characters edit it (at most 256 of them).
fn typed(st: &mut UiState, k: KeyEvent, enter: impl FnOnce(&mut UiState, &str) -> Effect) -> Effect {
    let (Input::Command(text) | Input::Goto(text)) = &mut st.input else { return Effect::None };
    match k.code {
        KeyCode::Esc => {
            st.input = Input::Normal;
            Effect::Redraw
        }
        KeyCode::Enter => {
            let t = std::mem::take(text);
            st.input = Input::Normal;
            enter(st, &t)
        }
        KeyCode::Backspace => {
            text.pop();
            Effect::Redraw
        }
        KeyCode::Char(c) if text.chars().count() < 256 => {
            text.push(c);
            Effect::Redraw
        }
        _ => Effect::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::Action;
    use crate::ui::dialogs::Request;

    /// Tab completes `:node` to the longest start the matching nodes share.
    #[test]
    fn tab_completes_node_names() {
        let t = chrono::DateTime::parse_from_rfc3339("2026-03-02T14:00:00Z").map(|t| t.to_utc()).unwrap_or_default();
        let store = crate::engine::simulated_store(42, t);
        let fleet = store.fleet();
        let mut text = "node gpu-h2".to_string();
        complete(&mut text, fleet);
        assert_eq!(text, "node gpu-h200-01");
        let mut text = "node gpu-h1".to_string();
        complete(&mut text, fleet);
        // gpu-h100-01 and the DynamicMIG node gpu-h100-dra-01 (issue 49) share it.
        assert_eq!(text, "node gpu-h100-", "two nodes share it");
        let mut text = "node xyz".to_string();
        complete(&mut text, fleet);
        assert_eq!(text, "node xyz");
    }

    #[test]
    fn merging_keeps_the_last_request_unless_a_dialog_closed_after_it() {
        let r = || Effect::Request(Request::Plan(Action::Drain { target: "n/0".into(), evict: false }));
        assert_eq!(merge(r(), Effect::Redraw), r());
        assert_eq!(merge(r(), Effect::Dismissed), Effect::Dismissed);
        assert_eq!(merge(Effect::Dismissed, r()), r());
        assert_eq!(merge(r(), Effect::Quit), Effect::Quit);
        assert_eq!(merge(Effect::None, Effect::None), Effect::None);
        assert_eq!(merge(Effect::None, Effect::Redraw), Effect::Redraw);
        assert_eq!(merge(Effect::Suspend, Effect::Redraw), Effect::Suspend);
        assert_eq!(merge(Effect::Suspend, Effect::Quit), Effect::Quit);
    }

    #[test]
    fn ctrl_z_suspends_from_the_view_the_filter_line_and_a_dialog() {
        let fleet = Fleet::default();
        let mut st = UiState::new(false, false, std::time::Duration::from_secs(1800), chrono::Utc::now());
        let z = KeyEvent::new(KeyCode::Char('z'), crossterm::event::KeyModifiers::CONTROL);
        assert_eq!(on_key(&mut st, &fleet, z), Effect::Suspend);
        on_key(&mut st, &fleet, KeyEvent::new(KeyCode::Char('/'), crossterm::event::KeyModifiers::NONE));
        assert_eq!(on_key(&mut st, &fleet, z), Effect::Suspend, "typing a filter");
        assert_eq!(on_key(&mut st, &fleet, KeyEvent::from(KeyCode::Char('z'))), Effect::Redraw, "a plain z is typed");
    }
}
