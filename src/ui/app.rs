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
use crate::actions::execute::{self, Env, Outcome, Progress};
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
    let rt = crate::commands::runtime()?;
    rt.block_on(owner_loop(cfg, theme, ascii))
}

async fn owner_loop(cfg: &Config, theme: Theme, ascii: bool) -> Result<(), CmdError> {
    let (tx, mut updates) = mpsc::channel(64);
    let mut store = Store::new();
    let handles = crate::sources::spawn_all(cfg, &mut store, tx).map_err(CmdError::Usage)?;
    let env = Env {
        read_only: cfg.read_only,
        sim: handles.sim.clone(),
        nvml_lib: cfg.sources.nvml.clone().flatten(),
        command_timeout: cfg.slurm.timeout,
        kubernetes: crate::sources::kubernetes_settings(cfg),
    };
    // Progress and outcomes of running actions come back here.
    let (act_tx, mut act_rx) = mpsc::unbounded_channel::<ActEvent>();

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
                    Effect::Quit => {
                        interrupted(&st);
                        break;
                    }
                    Effect::Redraw => dirty = true,
                    Effect::None => {}
                }
                if let Some(req) = st.request.take() {
                    on_request(&mut st, &store, cfg, &env, &act_tx, req);
                    dirty = true;
                }
            }
            Some(ev) = act_rx.recv() => {
                let finished = matches!(ev, ActEvent::Finished(_));
                if let Some(m) = &mut st.modal {
                    match ev {
                        ActEvent::Progress(p) => super::actions::on_progress(m, p),
                        ActEvent::Finished(o) => super::actions::on_outcome(m, o),
                    }
                }
                if finished && st.quit_after_action {
                    break;
                }
                dirty = true;
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
            // A signal while an action runs lets it finish (and be audited); a second one leaves.
            _ = term.recv() => if wait_for_action(&mut st) { dirty = true } else { break },
            _ = hup.recv() => if wait_for_action(&mut st) { dirty = true } else { break },
            _ = int.recv() => if wait_for_action(&mut st) { dirty = true } else { break },
        }
    }
    Ok(())
}

/// Asked to quit while an action runs: the first time, let it finish (true); the second, go.
fn wait_for_action(st: &mut UiState) -> bool {
    if st.action_running() && !st.quit_after_action {
        st.quit_after_action = true;
        st.message = Some("an action is running: tessera quits when it ends (again to leave now)".into());
        return true;
    }
    interrupted(st);
    false
}

/// Leaving while an action runs: say in the audit log where it stood.
fn interrupted(st: &UiState) {
    use crate::actions::audit;
    if let (Some(super::actions::Modal::Running { plan, status, outcome: None }), Some(path)) =
        (&st.modal, audit::default_path())
    {
        let steps: Vec<String> = status.iter().map(|s| format!("{s:?}")).collect();
        let _ = audit::append(&path, &audit::interrupted(plan, &steps));
    }
}

/// What a running action reports to the loop.
#[derive(Debug)]
enum ActEvent {
    Progress(Progress),
    Finished(Outcome),
}

/// Plan an action (opening its confirmation) or execute a confirmed plan: audit the intent,
/// run it on a task that streams progress back, audit the outcome.
fn on_request(
    st: &mut UiState,
    store: &Store,
    cfg: &Config,
    env: &Env,
    tx: &mpsc::UnboundedSender<ActEvent>,
    req: super::actions::Request,
) {
    use crate::actions::{Action, audit, plan};
    let audit_path = audit::default_path();
    match req {
        super::actions::Request::Plan(action) => {
            let force = matches!(action, Action::Preempt { force: true, .. });
            let mut opts = plan::Options::new(cfg, force, Utc::now());
            opts.previous_mode = previous_mode(&action, audit_path.as_deref());
            match plan::plan(&action, store.fleet(), &opts) {
                Ok(p) => {
                    if !p.allowed()
                        && let Some(path) = &audit_path
                    {
                        let _ = audit::append(path, &audit::refused(&p));
                    }
                    st.modal = Some(super::actions::confirm(p));
                }
                Err(e) => {
                    st.modal = None;
                    st.message = Some(format!("{}: {e}", action.verb()));
                }
            }
        }
        super::actions::Request::Execute(plan) => {
            // The cluster may have moved while the operator typed: plan again and run only
            // what was confirmed.
            let mut opts =
                plan::Options::new(cfg, matches!(plan.action, Action::Preempt { force: true, .. }), Utc::now());
            opts.previous_mode = previous_mode(&plan.action, audit_path.as_deref());
            match plan::plan(&plan.action, store.fleet(), &opts) {
                Ok(now) if now.steps == plan.steps && now.blockers == plan.blockers => {}
                Ok(now) => {
                    st.message = Some("the cluster changed since the plan was shown: confirm the new plan".into());
                    st.modal = Some(super::actions::confirm(now));
                    return;
                }
                Err(e) => {
                    st.modal = None;
                    st.message = Some(format!("{}: {e}", plan.action.verb()));
                    return;
                }
            }
            // No audit, no action.
            let logged = audit_path
                .ok_or_else(|| "no audit log path (set XDG_STATE_HOME or HOME)".to_string())
                .and_then(|path| audit::append(&path, &audit::intent(&plan)).map(|()| path));
            let path = match logged {
                Ok(p) => p,
                Err(e) => {
                    st.modal = None;
                    st.message = Some(format!("{} not started: {e}", plan.action.verb()));
                    return;
                }
            };
            st.modal = Some(super::actions::running(plan.clone()));
            let (env, tx) = (env.clone(), tx.clone());
            tokio::spawn(async move {
                let (ptx, mut prx) = mpsc::unbounded_channel();
                let forward = {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        while let Some(p) = prx.recv().await {
                            let _ = tx.send(ActEvent::Progress(p));
                        }
                    })
                };
                let mut outcome = execute::execute(&plan, &env, Some(ptx)).await;
                let _ = forward.await;
                if let Err(e) = audit::append(&path, &audit::outcome(&plan, &outcome)) {
                    outcome.reached = format!("{} (and the audit outcome could not be written: {e})", outcome.reached);
                }
                let _ = tx.send(ActEvent::Finished(outcome));
            });
        }
    }
}

/// For an undrain of a card: the compute mode it had before tessera drained it.
fn previous_mode(
    action: &crate::actions::Action,
    audit: Option<&std::path::Path>,
) -> Option<crate::model::ComputeMode> {
    use crate::actions::{Action, Target};
    match (action, audit) {
        (Action::Undrain { target }, Some(path)) => match Target::parse(target) {
            Target::Card(r) => crate::actions::audit::previous_compute_mode(path, &r.to_string()),
            _ => None,
        },
        _ => None,
    }
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
        if st.action_running() && !st.quit_after_action {
            st.quit_after_action = true;
            st.message = Some("an action is running: tessera quits when it ends (Ctrl-C again to leave now)".into());
            return Effect::Redraw;
        }
        return Effect::Quit;
    }
    if let Some(modal) = &mut st.modal {
        match super::actions::on_key(modal, &k) {
            super::actions::Answer::Stay => {}
            super::actions::Answer::Close(message) => {
                st.modal = None;
                // A confirmation typed ahead of the loop must not outlive its dialog.
                st.request = None;
                st.message = Some(message);
            }
            super::actions::Answer::Request(r) => st.request = Some(r),
        }
        return Effect::Redraw;
    }
    let read_only = st.read_only;
    match &mut st.input {
        Input::Normal => route(&k, read_only).map_or(Effect::None, |intent| st.apply(intent, fleet)),
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
