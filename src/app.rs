//! The console's owner loop: one task owns the engine (store, updates, action runner) and the
//! UI state, selects over terminal input, source updates, action progress, a clock and
//! signals, drains queued updates before one draw, and draws only when something changed.
//! The terminal (`app/terminal.rs`) is restored on quit, signals and panics; how it leaves
//! while an action runs is `app/leave.rs`; the operator's requests are answered in
//! `app/requests.rs`.

use std::time::Duration;

use chrono::Utc;
use tokio::sync::mpsc;

use crate::actions::{Outcome, Progress};
use crate::commands::to_stderr;
use crate::config::Config;
use crate::engine::Engine;
use crate::error::CmdError;
use crate::ui::actions::{self as dialogs, Modal};
use crate::ui::state::{Effect, UiState};
use crate::ui::theme::Theme;

mod leave;
pub mod replay;
mod requests;
mod schedule;
mod terminal;
use leave::{headless, interrupted, quit_signal};
use requests::{on_request, spawn_run};
use schedule::{Auto, Suggestions, advise, due_change, group_event, pump};
pub(crate) use terminal::{draw, keys, open_terminal, signals, suspend};
use terminal::{terminal_area, try_suspend};

/// How often the schedule banner is made again (and when an action starts or ends), on the
/// wall clock and on the data's clock, whichever passes first.
const BANNER_EVERY: Duration = Duration::from_secs(10);

/// Whether the banner made at `made` (wall) for data at `made_data` is due again with data at
/// `data`: ten seconds on either clock, or no data yet. On the data's clock too: at `--speed
/// 600` ten wall seconds are 100 simulated minutes, and the banner named the window before
/// the change for that long.
fn banner_stale(
    made: Option<std::time::Instant>,
    made_data: Option<chrono::DateTime<Utc>>,
    data: Option<chrono::DateTime<Utc>>,
) -> bool {
    let every = chrono::Duration::from_std(BANNER_EVERY).unwrap_or_default();
    made.is_none_or(|t| t.elapsed() >= BANNER_EVERY)
        || made_data.is_none()
        || matches!((made_data, data), (Some(a), Some(b)) if b - a >= every || b < a)
}

/// The most often source updates are merged and drawn: ten times a second, and at most
/// twice a refresh (or once a second, for long refreshes) (64 exporters polled each second, each on its own clock, would otherwise
/// merge and draw the whole fleet ten times a second for data that change once).
const MERGE_EVERY: Duration = Duration::from_millis(100);
/// The advisor waits this many times its last pass before the next, at most ADVICE_GAP_MAX.
const ADVICE_SHARE: u32 = 20;
const ADVICE_GAP_MAX: Duration = Duration::from_secs(10);

/// The console; with `record`, it records what it shows while you watch.
pub fn run(
    cfg: &Config,
    theme: Theme,
    ascii: bool,
    record: Option<crate::record::writer::Settings>,
) -> Result<(), CmdError> {
    let rt = crate::engine::runtime().map_err(CmdError::Failed)?;
    rt.block_on(owner_loop(cfg, theme, ascii, record))
}

/// What a running action reports to the loop.
#[derive(Debug)]
enum ActEvent {
    Progress(Progress),
    Finished(Outcome),
}

async fn owner_loop(
    cfg: &Config,
    theme: Theme,
    ascii: bool,
    record: Option<crate::record::writer::Settings>,
) -> Result<(), CmdError> {
    let Engine { mut store, mut updates, runner, notes } = Engine::start(cfg).map_err(CmdError::Usage)?;
    // Recording while you watch: opened before the terminal is taken, so a refusal (the file
    // exists) is said plainly.
    let mut recording = match record {
        Some(s) => Some(
            crate::record::session::Session::start(s, runner.audit_path().map(std::path::Path::to_path_buf))
                .map_err(CmdError::Failed)?,
        ),
        None => None,
    };
    // The demand by hour is kept for the next run (real sources), at each new sample.
    let mut demand_saved = store.demand().last;
    let mut suggestions = Suggestions::default();
    // When the banner was last made, and whether an action ran then.
    let mut banner_at: Option<std::time::Instant> = None;
    let mut banner_data: Option<chrono::DateTime<Utc>> = None;
    let mut banner_busy = false;
    // Progress and outcomes of running actions come back here; those of unattended schedules
    // on the simulated cluster on their own channel.
    let (act_tx, mut act_rx) = mpsc::unbounded_channel::<ActEvent>();
    let (auto_tx, mut auto_rx) = mpsc::unbounded_channel::<ActEvent>();
    let mut auto = Auto::default();

    let (mut terminal, _restore, mut input) = open_terminal();
    let mut sig = signals()?;

    // The schedules the banner follows: the configured ones, or the simulator's example once
    // the simulator has answered.
    let mut schedules = crate::schedule::demo::effective(cfg, store.simulated()).map(|(s, _)| s);
    let mut schedules_for_sim = store.simulated();
    let mut st = UiState::new(cfg.read_only, ascii, cfg.policy.min_runtime, Utc::now());
    st.queue_wait_threshold = cfg.policy.queue_wait_threshold;
    if !notes.is_empty() {
        st.message = Some(notes.join("; "));
    }
    st.recording = recording.as_ref().and_then(|r| r.recorder().path()).map(|p| p.display().to_string());
    st.on_fleet(store.fleet());
    let mut clock = tokio::time::interval(Duration::from_secs(1));
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut dirty = true;
    // The terminal is gone (a dropped SSH session: a draw failed or its input ended): nothing
    // is drawn any more; an action under way finishes headless and is audited, then tessera
    // leaves. A failed draw never ends a running action.
    let mut lost: Option<String> = None;
    let mut input_open = true;
    let mut finished_headless = false;
    // A quit signal came while headless (the next one leaves at once).
    let mut asked_headless = false;
    // SIGHUP came while an action ran: leave when it ends.
    let mut hung_up = false;
    // The fleet changed since the advisor last ran.
    let mut advice_due = true;
    // The advisor keeps to a twentieth of a core: after a pass that took d, the next waits
    // at least 20 d (a second at 4,096 cards, several at 32,768).
    let mut findings_due = true;
    let mut advised_at: Option<std::time::Instant> = None;
    let mut advice_gap = std::time::Duration::ZERO;
    // Run the advice step below the select (a merge or the clock asked for it).
    let mut advise_now = false;
    let merge_every = MERGE_EVERY.max((cfg.refresh / 2).min(Duration::from_secs(1)));
    let (mut merge_pending, mut merge_at, mut last_merge) =
        (false, tokio::time::Instant::now(), tokio::time::Instant::now() - merge_every);
    // What a quit at once left half-done, said on stderr at the end (exit 1).
    let mut left_undone: Option<String> = None;
    loop {
        if dirty && lost.is_none() {
            if let Err(e) = draw(&mut terminal, &mut st, &store, &theme) {
                lost = Some(e.to_string());
                if !headless(&mut st) {
                    break;
                }
                finished_headless = true;
            }
            dirty = false;
        }
        tokio::select! {
            ev = input.recv(), if input_open => {
                let Some(ev) = ev else {
                    // The input thread ends when the terminal can no longer be read.
                    input_open = false;
                    lost.get_or_insert_with(|| "the terminal's input ended".into());
                    if headless(&mut st) {
                        finished_headless = true;
                        continue;
                    }
                    break;
                };
                match keys(ev, &mut input, &mut st, store.fleet()) {
                    Effect::Quit => {
                        left_undone = interrupted(&st, &runner);
                        auto.interrupted(&runner);
                        break;
                    }
                    Effect::Request(req) => {
                        on_request(&mut st, &store, &runner, &act_tx, req, schedules.as_deref(), cfg);
                        pump(&mut st, &store, &runner, &act_tx);
                        dirty = true;
                    }
                    Effect::Redraw | Effect::Dismissed => {
                        // `x` in a group run: its give-back starts now, not at the next update.
                        pump(&mut st, &store, &runner, &act_tx);
                        dirty = true;
                    }
                    // Never stopped mid-action: a preemption between its checkpoint and its
                    // requeue would wait for a `fg` that may not come.
                    Effect::Suspend => {
                        try_suspend(&mut terminal, &mut st);
                        dirty = true;
                    }
                    Effect::None => {}
                }
            }
            Some(ev) = auto_rx.recv() => {
                if matches!(ev, ActEvent::Finished(_)) {
                    auto.finished(&mut st, ev, store.fleet().taken_at.unwrap_or_else(Utc::now));
                    // Asked to quit while it ran: now.
                    if (st.quit_after_action || hung_up) && !st.action_running() {
                        break;
                    }
                    // The group run waiting for it goes on; else the next unattended action.
                    pump(&mut st, &store, &runner, &act_tx);
                    if let Some(s) = schedules.as_deref().filter(|s| Auto::applies(cfg, &store, s)) {
                        auto.step(&mut st, &store, s, cfg, &runner, &auto_tx);
                    }
                    dirty = true;
                }
            }
            Some(ev) = act_rx.recv() => {
                let finished = matches!(ev, ActEvent::Finished(_));
                if matches!(st.modal, Some(Modal::GroupRunning { .. })) {
                    group_event(&mut st, ev, store.fleet().taken_at.unwrap_or_else(Utc::now));
                    pump(&mut st, &store, &runner, &act_tx);
                    if (st.quit_after_action || hung_up) && !st.action_running() {
                        break;
                    }
                    dirty = true;
                    continue;
                }
                if let Some(m) = &mut st.modal {
                    match ev {
                        ActEvent::Progress(p) => dialogs::on_progress(m, p, Utc::now()),
                        ActEvent::Finished(o) => {
                            // A hidden dialog closes with the verdict in the footer.
                            if st.action_hidden {
                                if let Modal::Running { plan, .. } = m {
                                    st.message = Some(dialogs::verdict(plan, &o));
                                }
                                st.modal = None;
                                st.action_hidden = false;
                            } else {
                                dialogs::on_outcome(m, o);
                            }
                        }
                    }
                }
                if finished && (st.quit_after_action || hung_up) {
                    break;
                }
                // What was acted on is advised on again with the next merge, unpaced.
                advised_at = None;
                dirty = true;
            }
            Some(update) = updates.recv() => {
                let mut changed = store.apply_deferred(update, Utc::now());
                while let Ok(more) = updates.try_recv() {
                    changed |= store.apply_deferred(more, Utc::now());
                }
                // A source live again without new data shows at once; new data with the merge.
                dirty |= store.take_health_changed();
                // Merge at most ten times a second, however many exporters report.
                if changed && !merge_pending {
                    merge_pending = true;
                    merge_at = tokio::time::Instant::now().max(last_merge + merge_every);
                }
            }
            // The merge itself runs below the select, so an update that finds the last merge
            // long enough ago is merged in the same turn, with no timer (and no wake of the
            // timer's thread) for it.
            _ = tokio::time::sleep_until(merge_at), if merge_pending => {}
            _ = clock.tick() => {
                st.wall = Utc::now();
                dirty |= st.expire_message(st.wall);
                // Recording: a frame a second (what is on screen), with the actions audited since.
                if let Some(r) = &mut recording
                    && let Err(e) = r.take(&store, st.wall)
                {
                    st.recording = None;
                    let closed = recording.take().map(crate::record::session::Session::finish);
                    st.message = Some(match closed {
                        Some(Err(c)) => format!("recording stopped: {e} (and it could not be closed: {c})"),
                        _ => format!("recording stopped: {e}"),
                    });
                }
                if let Err(e) = crate::engine::save_demand(&store, &mut demand_saved) {
                    st.message = Some(format!("demand by hour not kept: {e}"));
                    // Tried again at the next sample.
                    demand_saved = store.demand().last.or(Some(Utc::now()));
                }
                advise_now = true;
                if std::mem::take(&mut advice_due) {
                    if store.simulated() != schedules_for_sim {
                        schedules_for_sim = store.simulated();
                        schedules = crate::schedule::demo::effective(cfg, schedules_for_sim).map(|(s, _)| s);
                    }
                    let was = st.banner.clone();
                    // The banner's timelines take ~55 ms over 1,400 covered cards: every ten
                    // seconds, and at once after an action (its minutes count down coarsely).
                    // (Also at once while no source has answered yet: the first data shows it.)
                    let stale = banner_stale(banner_at, banner_data, store.fleet().taken_at);
                    if stale || st.action_running() != banner_busy {
                        st.banner = schedules.as_ref().and_then(|s| due_change(s, cfg, &store));
                        banner_at = Some(std::time::Instant::now());
                        banner_data = store.fleet().taken_at;
                        banner_busy = st.action_running();
                    }
                    let unattended = schedules.as_deref().filter(|s| Auto::applies(cfg, &store, s));
                    if let Some(s) = unattended {
                        auto.step(&mut st, &store, s, cfg, &runner, &auto_tx);
                    }
                    if st.banner.is_some() != was.is_some() {
                        st.set_viewport(crate::ui::viewport_for(terminal_area(&terminal), &st));
                    }
                    // The merge drew the new data already: a frame here only for what this
                    // step changed (one frame a merge, not two a second apart).
                    dirty |= unattended.is_some() || st.banner != was;
                }
                if (st.quit_after_action || hung_up) && matches!(st.modal, Some(Modal::GroupRunning { .. })) {
                    if let Some(Modal::GroupRunning { run, .. }) = &mut st.modal {
                        run.stop("tessera is quitting");
                    }
                    pump(&mut st, &store, &runner, &act_tx);
                    if !st.action_running() {
                        break;
                    }
                }
                // Stale sources show their age, so they redraw each second; live ones do not.
                // A running action's countdown, too.
                dirty |= store.check_staleness(st.wall)
                    || st.action_running()
                    || store.fleet().sources.iter().any(|s| !matches!(s.health, crate::model::SourceHealth::Live { .. }));
            }
            // A signal while an action runs lets it finish (and be audited); a second one leaves.
            // SIGTERM, SIGINT, SIGQUIT: the first lets a running action finish (and be
            // audited), a second leaves at once. Headless, the first is counted afresh (going
            // headless is not a request of the operator's).
            _ = sig.term.recv() => if quit_signal(&mut st, &runner, lost.is_some(), &mut asked_headless, &mut left_undone) { dirty = true } else { auto.interrupted(&runner); break },
            _ = sig.quit.recv() => if quit_signal(&mut st, &runner, lost.is_some(), &mut asked_headless, &mut left_undone) { dirty = true } else { auto.interrupted(&runner); break },
            _ = sig.int.recv() => if quit_signal(&mut st, &runner, lost.is_some(), &mut asked_headless, &mut left_undone) { dirty = true } else { auto.interrupted(&runner); break },
            _ = sig.tstp.recv() => if lost.is_none() { try_suspend(&mut terminal, &mut st); dirty = true },
            // SIGHUP is a terminal going away (tmux and the kernel can each send one): it never
            // abandons a running action; it quits when none runs. The redraw it asks for finds
            // out whether the terminal is still there.
            _ = sig.hup.recv() => if st.action_running() {
                // Not a request of the operator's: a later q or Ctrl-C is still the first.
                hung_up = true;
                st.message = Some("hangup: tessera quits when the action ends".into());
                dirty = true;
            } else {
                auto.interrupted(&runner);
                break
            },
        }
        if merge_pending && tokio::time::Instant::now() >= merge_at {
            store.rebuild();
            st.on_fleet(store.fleet());
            // A group change waiting for a card to empty or for its time looks again.
            pump(&mut st, &store, &runner, &act_tx);
            // The advisor runs below at once, paced by its own cost (ADVICE_SHARE); the
            // banner and the unattended schedule at the next clock tick.
            advice_due = true;
            merge_pending = false;
            last_merge = tokio::time::Instant::now();
            dirty = true;
            advise_now = true;
        }
        // The advisor after a merge at once (one draw shows the new data and what it says of
        // them, not two a second apart), and on the clock for a pass the pacing held back. The
        // banner and the unattended schedule stay on the clock (at most once a second).
        if std::mem::take(&mut advise_now) {
            findings_due |= advice_due;
            if findings_due && advised_at.is_none_or(|t| t.elapsed() >= advice_gap) {
                let began = std::time::Instant::now();
                st.on_findings(advise(cfg, &store, &mut suggestions));
                advice_gap = (began.elapsed() * ADVICE_SHARE).min(ADVICE_GAP_MAX);
                advised_at = Some(began);
                findings_due = false;
                dirty = true;
            }
        }
    }
    // Left at once while a group change ran: say which cards it leaves drained.
    let drained = match &st.modal {
        Some(Modal::GroupRunning { run, .. }) => run.still_drained(),
        _ => Vec::new(),
    };
    let kept = crate::engine::save_demand(&store, &mut demand_saved);
    let audit_note = recording.as_ref().and_then(|r| r.audit_error.clone());
    let recorded = recording.map(crate::record::session::Session::finish);
    drop(_restore);
    match recorded {
        Some(Ok(s)) => to_stderr(&format!(
            "tessera: recorded {} frames and {} actions, {}, in {}",
            s.frames,
            s.actions,
            crate::units::size(s.bytes),
            s.kept().iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        )),
        Some(Err(e)) => to_stderr(&format!("tessera: the recording was not closed cleanly: {e}")),
        None => {}
    }
    if let Some(e) = audit_note {
        to_stderr(&format!("tessera: the audit log could not always be read ({e}): recorded actions may be missing"));
    }
    if let Err(e) = kept {
        to_stderr(&format!("tessera: demand by hour not kept: {e}"));
    }
    if !drained.is_empty() {
        let names: Vec<String> = drained.iter().map(ToString::to_string).collect();
        to_stderr(&format!(
            "tessera: the schedule change was left at once: {} stay drained (tessera undrain CARD gives each back; the audit log has every drain)",
            names.join(", ")
        ));
    }
    if let Some(what) = left_undone {
        return Err(CmdError::Failed(what));
    }
    match lost {
        Some(e) => Err(CmdError::Failed(format!(
            "the terminal was lost ({e}){}",
            if finished_headless {
                "; the action under way ran to its end headless: the audit log has its outcome"
            } else {
                ""
            }
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::banner_stale;

    /// The banner is made again when the data's clock moved ten seconds, not only the wall's:
    /// at 600× it named the window before a change for two simulated hours.
    #[test]
    fn the_banner_follows_the_datas_clock_too() {
        let t0 = chrono::DateTime::parse_from_rfc3339("2026-03-02T07:59:00Z").map(|t| t.to_utc()).unwrap_or_default();
        let just_now = Some(std::time::Instant::now());
        assert!(!banner_stale(just_now, Some(t0), Some(t0 + chrono::Duration::seconds(5))));
        assert!(
            banner_stale(just_now, Some(t0), Some(t0 + chrono::Duration::seconds(600))),
            "a simulated minute: again"
        );
        assert!(banner_stale(just_now, Some(t0), Some(t0 - chrono::Duration::seconds(60))), "a replay jumped back");
        assert!(banner_stale(None, Some(t0), Some(t0)));
        assert!(banner_stale(just_now, None, Some(t0)));
    }
}
