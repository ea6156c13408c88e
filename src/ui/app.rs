//! The owner loop: one task owns the store and the UI state, selects over terminal input,
//! source updates, a clock and signals, drains queued updates before one draw, and draws only
//! when something changed. The terminal is restored on quit, signals and panics.

use std::io::Stdout;
use std::time::Duration;

use chrono::Utc;
use crossterm::event::{
    DisableMouseCapture, EnableMouseCapture, Event, KeyCode, KeyEvent, KeyEventKind, MouseEventKind,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::sync::mpsc;

use super::keymap::route;
use super::state::{Effect, Input, UiState};
use super::theme::Theme;
use crate::commands::CmdError;
use crate::config::Config;
use crate::store::Store;

/// The most often source updates are merged and drawn.
const MERGE_EVERY: Duration = Duration::from_millis(100);

/// Restores the terminal however the loop ends.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = crossterm::execute!(std::io::stdout(), DisableMouseCapture);
        ratatui::restore();
    }
}

pub fn run(cfg: &Config, theme: Theme, ascii: bool) -> Result<(), CmdError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CmdError::Failed(format!("cannot start the runtime: {e}")))?;
    rt.block_on(owner_loop(cfg, theme, ascii))
}

async fn owner_loop(cfg: &Config, theme: Theme, ascii: bool) -> Result<(), CmdError> {
    let (tx, mut updates) = mpsc::channel(64);
    let mut store = Store::new();
    crate::sources::spawn_all(cfg, &mut store, tx).map_err(CmdError::Usage)?;

    let mut terminal = ratatui::init();
    let _restore = Restore;
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = crossterm::execute!(std::io::stdout(), DisableMouseCapture);
        previous(info);
    }));
    let _ = crossterm::execute!(std::io::stdout(), EnableMouseCapture);

    // crossterm's read blocks: a thread forwards terminal events to the loop.
    let (in_tx, mut input) = mpsc::channel::<Event>(256);
    std::thread::spawn(move || {
        while let Ok(ev) = crossterm::event::read() {
            if in_tx.blocking_send(ev).is_err() {
                break;
            }
        }
    });
    let signal = |k| tokio::signal::unix::signal(k).map_err(|e| CmdError::Failed(format!("cannot watch signals: {e}")));
    use tokio::signal::unix::SignalKind;
    let (mut term, mut hup, mut int) =
        (signal(SignalKind::terminate())?, signal(SignalKind::hangup())?, signal(SignalKind::interrupt())?);

    let mut st = UiState::new(cfg.read_only, ascii, cfg.policy.min_runtime, Utc::now());
    st.queue_wait_threshold = cfg.policy.queue_wait_threshold;
    st.on_fleet(store.fleet());
    let mut clock = tokio::time::interval(Duration::from_secs(1));
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut dirty = true;
    let (mut merge_pending, mut merge_at, mut last_merge) =
        (false, tokio::time::Instant::now(), tokio::time::Instant::now() - MERGE_EVERY);
    loop {
        if dirty {
            draw(&mut terminal, &mut st, &store, &theme)?;
            dirty = false;
        }
        tokio::select! {
            Some(ev) = input.recv() => {
                let mut effect = on_event(&mut st, &store, ev);
                // Keys typed faster than frames are handled before the next draw.
                while effect != Effect::Quit && let Ok(ev) = input.try_recv() {
                    effect = merge(effect, on_event(&mut st, &store, ev));
                }
                match effect {
                    Effect::Quit => break,
                    Effect::Redraw => dirty = true,
                    Effect::None => {}
                }
            }
            Some(update) = updates.recv() => {
                store.apply_deferred(update, Utc::now());
                while let Ok(more) = updates.try_recv() {
                    store.apply_deferred(more, Utc::now());
                }
                // Merge at most ten times a second, however many exporters report.
                if !merge_pending {
                    merge_pending = true;
                    merge_at = tokio::time::Instant::now().max(last_merge + MERGE_EVERY);
                }
            }
            _ = tokio::time::sleep_until(merge_at), if merge_pending => {
                store.rebuild();
                st.on_fleet(store.fleet());
                merge_pending = false;
                last_merge = tokio::time::Instant::now();
                dirty = true;
            }
            _ = clock.tick() => {
                st.wall = Utc::now();
                // Stale sources show their age, so they redraw each second; live ones do not.
                dirty |= store.check_staleness(st.wall)
                    || store.fleet().sources.iter().any(|s| !matches!(s.health, crate::model::SourceHealth::Live { .. }));
            }
            _ = term.recv() => break,
            _ = hup.recv() => break,
            _ = int.recv() => break,
        }
    }
    Ok(())
}

fn merge(a: Effect, b: Effect) -> Effect {
    match (a, b) {
        (Effect::Quit, _) | (_, Effect::Quit) => Effect::Quit,
        (Effect::Redraw, _) | (_, Effect::Redraw) => Effect::Redraw,
        _ => Effect::None,
    }
}

fn draw(
    terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    st: &mut UiState,
    store: &Store,
    theme: &Theme,
) -> Result<(), CmdError> {
    let size = terminal.size().map_err(|e| CmdError::Failed(format!("terminal: {e}")))?;
    let vp = super::viewport(ratatui::layout::Rect::new(0, 0, size.width, size.height));
    if vp != st.viewport {
        st.set_viewport(vp);
    }
    terminal
        .draw(|f| super::draw(f, st, store.fleet(), theme, store.simulated()))
        .map_err(|e| CmdError::Failed(format!("cannot draw: {e}")))?;
    Ok(())
}

/// One terminal event: keys through the keymap (or into the filter/command line), mouse
/// clicks and wheel, resizes.
pub fn on_event(st: &mut UiState, store: &Store, ev: Event) -> Effect {
    let fleet = store.fleet();
    match ev {
        Event::Key(k) if k.kind != KeyEventKind::Release => on_key(st, fleet, k),
        Event::Mouse(m) => {
            let body_top = super::HEADER_LINES + 1;
            match m.kind {
                MouseEventKind::Down(_) if m.row >= body_top => st.click(usize::from(m.row - body_top)),
                MouseEventKind::ScrollDown if !st.help && st.open_card.is_none() => st.step(3),
                MouseEventKind::ScrollUp if !st.help && st.open_card.is_none() => st.step(-3),
                _ => return Effect::None,
            }
            Effect::Redraw
        }
        Event::Resize(..) => Effect::Redraw,
        _ => Effect::None,
    }
}

pub fn on_key(st: &mut UiState, fleet: &crate::model::Fleet, k: KeyEvent) -> Effect {
    // Ctrl-C quits from anywhere, typing included: raw mode turns it into a key.
    if k.code == KeyCode::Char('c') && k.modifiers.contains(crossterm::event::KeyModifiers::CONTROL) {
        return Effect::Quit;
    }
    match &mut st.input {
        Input::Normal => route(&k).map_or(Effect::None, |intent| st.apply(intent, fleet)),
        Input::Filter(text) => {
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
        Input::Command(text) => match k.code {
            KeyCode::Esc => {
                st.input = Input::Normal;
                Effect::Redraw
            }
            KeyCode::Enter => {
                let t = std::mem::take(text);
                st.input = Input::Normal;
                st.command(&t, fleet)
            }
            KeyCode::Backspace => {
                text.pop();
                Effect::Redraw
            }
            KeyCode::Char(c) => {
                text.push(c);
                Effect::Redraw
            }
            _ => Effect::None,
        },
    }
}
