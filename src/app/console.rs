//! The console object: what the console's one task owns (the store, the runner, the UI state,
//! the terminal, the recording, the schedules it follows), what it waits on (terminal input,
//! source updates, action progress, a clock, signals), and one set of flags saying what is
//! due (a draw, a merge, the schedule step, the advisor). `run` waits for the next event,
//! hands it to the one method that serves it, then merges, advises and draws if that made
//! them due; `leave` restores the terminal and says what the session left behind.

use std::io::Stdout;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use crossterm::event::Event;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::sync::mpsc;

use super::leave::{headless, interrupted, quit_signal};
use super::requests::on_request;
use super::schedule::{Auto, Suggestions, advise, due_change, group_event, pump};
use super::terminal::{Restore, Signals, terminal_area, try_suspend};
use super::{ActEvent, draw, keys, open_terminal, signals};
use crate::actions::run::Runner;
use crate::config::Config;
use crate::engine::Engine;
use crate::error::CmdError;
use crate::model::schedule::Schedule;
use crate::out::to_stderr;
use crate::record::session::Session;
use crate::sources::SourceUpdate;
use crate::store::Store;
use crate::ui::dialogs::{self as dialogs, Modal};
use crate::ui::state::{Effect, UiState};
use crate::ui::theme::Theme;

/// How often the schedule banner is made again (and when an action starts or ends), on the
/// wall clock and on the data's clock, whichever passes first.
const BANNER_EVERY: Duration = Duration::from_secs(10);

/// Whether the banner made at `made` (wall) for data at `made_data` is due again with data at
/// `data`: ten seconds on either clock, or no data yet. On the data's clock too: at `--speed
/// 600` ten wall seconds are 100 simulated minutes, and the banner named the window before
/// the change for that long.
fn banner_stale(made: Option<Instant>, made_data: Option<DateTime<Utc>>, data: Option<DateTime<Utc>>) -> bool {
    let every = chrono::Duration::from_std(BANNER_EVERY).unwrap_or_default();
    made.is_none_or(|t| t.elapsed() >= BANNER_EVERY)
        || made_data.is_none()
        || matches!((made_data, data), (Some(a), Some(b)) if b - a >= every || b < a)
}

/// The most often source updates are merged and drawn: ten times a second, and at most
/// twice a refresh (or once a second, for long refreshes): 64 exporters answering over a
/// second would otherwise merge and draw the whole fleet ten times a second for data that
/// change once. A merge due just before the clock's tick waits for it ([`CLOCK_LAG_MAX`]).
const MERGE_EVERY: Duration = Duration::from_millis(100);
/// The console's clock ticks each second, this long after the sources' polls (a quarter of
/// the refresh at most): the answers that come within it are merged at the tick and drawn
/// with it, one draw a second, not one for the clock and one for the data.
const CLOCK_LAG_MAX: Duration = Duration::from_millis(250);
const TICK: Duration = Duration::from_secs(1);
/// The advisor waits this many times its last pass before the next, at most ADVICE_GAP_MAX.
const ADVICE_SHARE: u32 = 20;
const ADVICE_GAP_MAX: Duration = Duration::from_secs(10);
/// The Advice view's projection (a simulation of the next 24 hours) runs at most this often.
const PROJECT_EVERY: Duration = Duration::from_secs(60);
/// ... and waits this many times its last run's time before the next, even for a new plan:
/// at most a fiftieth of a core (a sampled day of 32,768 cards takes most of a second).
const PROJECT_SHARE: u32 = 50;

type Projected = Option<crate::simulate::projection::Projection>;

/// The console: everything its one task owns, from the start to the end.
pub(super) struct Console<'a> {
    cfg: &'a Config,
    theme: Theme,
    store: Store,
    runner: Runner,
    st: UiState,
    terminal: Terminal<CrosstermBackend<Stdout>>,
    /// Restores the terminal when dropped: on leaving, before anything is said on stderr.
    restore: Restore,
    inbox: Inbox,
    /// Where the operator's running action reports, and an unattended schedule's.
    act_tx: mpsc::UnboundedSender<ActEvent>,
    auto_tx: mpsc::UnboundedSender<ActEvent>,
    /// Recording while you watch.
    recording: Option<Session>,
    /// The demand by hour is kept for the next run (real sources), at each new sample: the
    /// sample last kept.
    demand_saved: Option<DateTime<Utc>>,
    suggestions: Suggestions,
    /// The schedules the banner follows: the configured ones, or the simulator's example once
    /// the simulator has answered (`schedules_for_sim` says which store they were chosen for).
    schedules: Option<Vec<Schedule>>,
    schedules_for_sim: bool,
    banner: BannerMade,
    auto: Auto,
    due: Due,
    pacing: Pacing,
    leaving: Leaving,
    projecting: Projecting,
}

/// The Advice view's projection, simulated off the loop on a blocking thread.
#[derive(Default)]
struct Projecting {
    task: Option<tokio::task::JoinHandle<Projected>>,
    /// When the last one began.
    at: Option<Instant>,
    /// How long the last one took: the next waits PROJECT_SHARE times that, even for a new
    /// plan (at scale the plan changes at nearly every pass).
    took: Duration,
}

/// The projection under way, when it ends (never, while none is); `None`: the task failed.
async fn projected(task: &mut Option<tokio::task::JoinHandle<Projected>>) -> Option<Projected> {
    match task.as_mut() {
        Some(t) => t.await.ok(),
        None => std::future::pending().await,
    }
}

/// What the console waits on.
struct Inbox {
    /// Terminal events, forwarded by the input thread.
    input: mpsc::Receiver<Event>,
    /// False once the input thread ended (the terminal can no longer be read).
    input_open: bool,
    updates: mpsc::Receiver<SourceUpdate>,
    /// Progress and outcomes of running actions come back here; those of unattended schedules
    /// on the simulated cluster on their own channel.
    actions: mpsc::UnboundedReceiver<ActEvent>,
    unattended: mpsc::UnboundedReceiver<ActEvent>,
    /// Each second (ticks missed while busy are skipped).
    clock: tokio::time::Interval,
    signals: Signals,
}

/// What is due: the events set these flags, and the loop does each and clears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Due {
    /// Something shown changed: draw before waiting again.
    draw: bool,
    /// An update changed the data: merge at `Pacing::merge_at`.
    merge: bool,
    /// A merge since the clock last ran the schedule step (the schedules, the banner and the
    /// unattended schedules): at the next tick, at most once a second.
    schedules: bool,
    /// A merge the advisor has not seen yet (its pacing held it back).
    findings: bool,
    /// The advisor's step after this event (a merge or the clock asked for it).
    advise: bool,
}

impl Due {
    /// At the start: a first frame, the schedule step and the advisor.
    const START: Self = Self { draw: true, merge: false, schedules: true, findings: true, advise: false };
}

/// How often merges and the advisor may run.
struct Pacing {
    /// The least time between two merges (MERGE_EVERY, or up to half a refresh).
    merge_every: Duration,
    /// When the pending merge runs, and when the last one ran.
    merge_at: tokio::time::Instant,
    last_merge: tokio::time::Instant,
    /// The advisor keeps to a twentieth of a core: after a pass that took d, the next waits
    /// at least 20 d (a second at 4,096 cards, several at 32,768).
    advised_at: Option<Instant>,
    advice_gap: Duration,
    /// The clock ticks at `clock_at + k s`, `window` after the sources' polls (on the run's
    /// epoch) where the refresh divides a second or is whole seconds (at 1.5 s, every other
    /// poll): a merge due within `window` before a tick waits for it.
    clock_at: tokio::time::Instant,
    window: Duration,
}

impl Pacing {
    fn new(refresh: Duration, epoch: tokio::time::Instant) -> Self {
        let merge_every = MERGE_EVERY.max((refresh / 2).min(Duration::from_secs(1)));
        let now = tokio::time::Instant::now();
        let window = (refresh / 4).min(CLOCK_LAG_MAX);
        Self {
            merge_every,
            merge_at: now,
            last_merge: now - merge_every,
            advised_at: None,
            advice_gap: Duration::ZERO,
            clock_at: epoch + window,
            window,
        }
    }

    /// When a merge that may run from `at` on runs: with the clock's next tick when that is
    /// at most `window` away (the tick merges it: [`Pacing::at_tick`]; the timer, a window
    /// later, only if the tick is late), else at `at`.
    fn merge_time(&self, at: tokio::time::Instant) -> tokio::time::Instant {
        let just_before = at.checked_sub(Duration::from_nanos(1)).unwrap_or(at);
        let tick = crate::sources::scrape::next_tick(self.clock_at, TICK, just_before);
        if tick.saturating_duration_since(at) <= self.window { tick + self.window } else { at }
    }

    /// The clock ticked: a merge waiting for it (or due within a window) runs now, up to a
    /// window sooner than `merge_every` after the last (at a 100 ms refresh, 75 ms apart).
    fn at_tick(&mut self, now: tokio::time::Instant) {
        if self.merge_at <= now + self.window {
            self.merge_at = self.merge_at.min(now);
        }
    }
}

/// When the banner was last made, on the wall clock and the data's, and whether an action
/// ran then.
#[derive(Default)]
struct BannerMade {
    at: Option<Instant>,
    data: Option<DateTime<Utc>>,
    busy: bool,
}

/// How the console is leaving, and what it says when it has.
#[derive(Default)]
struct Leaving {
    /// The terminal is gone (a dropped SSH session: a draw failed or its input ended): nothing
    /// is drawn any more; an action under way finishes headless and is audited, then tessera
    /// leaves. A failed draw never ends a running action.
    lost: Option<String>,
    /// An action was under way when the terminal was lost: it ran on headless.
    finished_headless: bool,
    /// A quit signal came while headless (the next one leaves at once).
    asked_headless: bool,
    /// SIGHUP came while an action ran: leave when it ends.
    hung_up: bool,
    /// What a quit at once left half-done, said on stderr at the end (exit 1).
    left_undone: Option<String>,
}

impl Leaving {
    /// How the console ended: an error when a quit at once left something half-done or the
    /// terminal was lost.
    fn verdict(self) -> Result<(), CmdError> {
        if let Some(what) = self.left_undone {
            return Err(CmdError::Failed(what));
        }
        match self.lost {
            Some(e) => Err(CmdError::Failed(format!(
                "the terminal was lost ({e}){}",
                if self.finished_headless {
                    "; the action under way ran to its end headless: the audit log has its outcome"
                } else {
                    ""
                }
            ))),
            None => Ok(()),
        }
    }
}

impl<'a> Console<'a> {
    /// The engine started, the recording opened, the terminal taken.
    pub(super) fn open(
        cfg: &'a Config,
        theme: Theme,
        ascii: bool,
        record: Option<crate::record::writer::Settings>,
    ) -> Result<Self, CmdError> {
        let Engine { store, updates, runner, mut notes, epoch } = Engine::start(cfg)?;
        // Actions left half-done (an intent with no outcome): said at the start; acting on
        // their target again asks first.
        notes.extend(
            runner
                .left_open()
                .iter()
                .map(|o| format!("left half-done, from the audit log: {o}; check {} before acting on it", o.subject)),
        );
        // Recording while you watch: opened before the terminal is taken, so a refusal (the file
        // exists) is said plainly.
        let recording = match record {
            Some(s) => Some(
                Session::start(s, runner.audit_path().map(std::path::Path::to_path_buf)).map_err(CmdError::failed)?,
            ),
            None => None,
        };
        let (act_tx, actions) = mpsc::unbounded_channel::<ActEvent>();
        let (auto_tx, unattended) = mpsc::unbounded_channel::<ActEvent>();
        let (terminal, restore, input) = open_terminal();
        let signals = signals()?;
        let st = ui_state(cfg, ascii, &notes, recording.as_ref(), &store);
        let pacing = Pacing::new(cfg.refresh, epoch);
        let mut clock = tokio::time::interval_at(pacing.clock_at, TICK);
        clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        Ok(Self {
            cfg,
            theme,
            demand_saved: store.demand().last,
            schedules: crate::schedule::demo::effective(cfg, store.simulated()).map(|(s, _)| s),
            schedules_for_sim: store.simulated(),
            store,
            runner,
            st,
            terminal,
            restore,
            inbox: Inbox { input, input_open: true, updates, actions, unattended, clock, signals },
            act_tx,
            auto_tx,
            recording,
            suggestions: Suggestions::default(),
            banner: BannerMade::default(),
            auto: Auto::default(),
            due: Due::START,
            pacing,
            leaving: Leaving::default(),
            projecting: Projecting::default(),
        })
    }

    /// Serve the console until it ends: draw if due, wait for the next event and serve it,
    /// then merge and advise if that made them due.
    pub(super) async fn run(mut self) -> Result<(), CmdError> {
        loop {
            if self.draw_if_due() == Then::Leave {
                break;
            }
            match self.next_event().await {
                Then::Leave => break,
                Then::Next => continue,
                Then::Go => {}
            }
            self.merge_if_due();
            self.advise_if_due();
        }
        self.leave()
    }

    /// Wait for the next event and serve it.
    async fn next_event(&mut self) -> Then {
        tokio::select! {
            ev = self.inbox.input.recv(), if self.inbox.input_open => self.on_input(ev),
            Some(ev) = self.inbox.unattended.recv() => self.on_unattended(ev),
            Some(ev) = self.inbox.actions.recv() => self.on_action_progress(ev),
            Some(update) = self.inbox.updates.recv() => self.on_update(update),
            // The merge itself runs below the select, so an update that finds the last merge
            // long enough ago is merged in the same turn, with no timer (and no wake of the
            // timer's thread) for it.
            _ = tokio::time::sleep_until(self.pacing.merge_at), if self.due.merge => Then::Go,
            _ = self.inbox.clock.tick() => self.on_tick(),
            p = projected(&mut self.projecting.task), if self.projecting.task.is_some() => self.on_projection(p),
            // SIGTERM, SIGINT, SIGQUIT: the first lets a running action finish (and be
            // audited), a second leaves at once. Headless, the first is counted afresh (going
            // headless is not a request of the operator's).
            _ = self.inbox.signals.term.recv() => self.on_quit_signal(),
            _ = self.inbox.signals.quit.recv() => self.on_quit_signal(),
            _ = self.inbox.signals.int.recv() => self.on_quit_signal(),
            _ = self.inbox.signals.tstp.recv() => self.on_stop_signal(),
            _ = self.inbox.signals.hup.recv() => self.on_hangup(),
        }
    }

    /// Draw if something changed, unless the terminal is lost; a failed draw loses it (and
    /// leaves, unless an action runs: it finishes headless).
    fn draw_if_due(&mut self) -> Then {
        if self.due.draw && self.leaving.lost.is_none() {
            if let Err(e) = draw(&mut self.terminal, &mut self.st, &self.store, &self.theme) {
                self.leaving.lost = Some(e.to_string());
                if !headless(&mut self.st) {
                    return Then::Leave;
                }
                self.leaving.finished_headless = true;
            }
            self.due.draw = false;
        }
        Then::Go
    }

    /// Terminal input: the keys typed, as one effect, performed.
    fn on_input(&mut self, ev: Option<Event>) -> Then {
        let Some(ev) = ev else { return self.input_ended() };
        match keys(ev, &mut self.inbox.input, &mut self.st, self.store.fleet()) {
            Effect::Quit => {
                self.leaving.left_undone = interrupted(&self.st, &self.runner);
                self.auto.interrupted(&self.runner);
                return Then::Leave;
            }
            Effect::Request(req) => {
                on_request(
                    &mut self.st,
                    &self.store,
                    &self.runner,
                    &self.act_tx,
                    req,
                    self.schedules.as_deref(),
                    self.cfg,
                );
                self.pump();
                self.due.draw = true;
            }
            Effect::Redraw | Effect::Dismissed => {
                // `x` in a group run: its give-back starts now, not at the next update.
                self.pump();
                self.due.draw = true;
            }
            // Never stopped mid-action: a preemption between its checkpoint and its
            // requeue would wait for a `fg` that may not come.
            Effect::Suspend => {
                try_suspend(&mut self.terminal, &mut self.st);
                self.due.draw = true;
            }
            Effect::None => {}
        }
        Then::Go
    }

    /// The input thread ends when the terminal can no longer be read: the terminal is lost.
    fn input_ended(&mut self) -> Then {
        self.inbox.input_open = false;
        self.leaving.lost.get_or_insert_with(|| "the terminal's input ended".into());
        if headless(&mut self.st) {
            self.leaving.finished_headless = true;
            return Then::Next;
        }
        Then::Leave
    }

    /// An unattended schedule's action reported; when it ended, what waited for it goes on.
    fn on_unattended(&mut self, ev: ActEvent) -> Then {
        if !matches!(ev, ActEvent::Finished(_)) {
            return Then::Go;
        }
        self.auto.finished(&mut self.st, ev, self.store.fleet().taken_at.unwrap_or_else(Utc::now));
        // Asked to quit while it ran: now.
        if self.quitting() && !self.st.action_running() {
            return Then::Leave;
        }
        // The group run waiting for it goes on; else the next unattended action.
        self.pump();
        self.step_unattended();
        self.due.draw = true;
        Then::Go
    }

    /// The operator's action reported its progress, or how it ended.
    fn on_action_progress(&mut self, ev: ActEvent) -> Then {
        if matches!(self.st.dialog.modal, Some(Modal::GroupRunning { .. })) {
            return self.on_group_progress(ev);
        }
        let finished = matches!(ev, ActEvent::Finished(_));
        if let Some(m) = &mut self.st.dialog.modal {
            match ev {
                ActEvent::Progress(p) => dialogs::on_progress(m, p, Utc::now()),
                ActEvent::Finished(o) => {
                    // A hidden dialog closes with the verdict in the footer.
                    if self.st.dialog.hidden {
                        let verdict = match m {
                            Modal::Running { plan, .. } => Some(dialogs::verdict(plan, &o)),
                            _ => None,
                        };
                        self.st.close_hidden_dialog(verdict);
                    } else {
                        dialogs::on_outcome(m, o);
                    }
                }
            }
        }
        if finished && self.quitting() {
            return Then::Leave;
        }
        // What was acted on is advised on again with the next merge, unpaced.
        self.pacing.advised_at = None;
        self.due.draw = true;
        Then::Go
    }

    /// An action of a running group change reported: the run goes on (or ends).
    fn on_group_progress(&mut self, ev: ActEvent) -> Then {
        group_event(&mut self.st, ev, self.store.fleet().taken_at.unwrap_or_else(Utc::now));
        self.pump();
        if self.quitting() && !self.st.action_running() {
            return Then::Leave;
        }
        self.due.draw = true;
        Then::Next
    }

    /// A source update, and every one queued behind it, applied; merged when the pacing allows.
    fn on_update(&mut self, update: SourceUpdate) -> Then {
        let mut changed = self.store.apply_deferred(update, Utc::now());
        while let Ok(more) = self.inbox.updates.try_recv() {
            changed |= self.store.apply_deferred(more, Utc::now());
        }
        // A source live again without new data shows at once; new data with the merge.
        self.due.draw |= self.store.take_health_changed();
        // Merge at most ten times a second, however many exporters report.
        if changed && !self.due.merge {
            self.due.merge = true;
            let at = tokio::time::Instant::now().max(self.pacing.last_merge + self.pacing.merge_every);
            self.pacing.merge_at = self.pacing.merge_time(at);
        }
        Then::Go
    }

    /// The clock, each second: the footer's message expires, a frame is recorded, the demand
    /// kept; after a merge the schedules' step; a quit waiting for a group change stops it;
    /// what ages on screen is drawn again.
    fn on_tick(&mut self) -> Then {
        // A merge waiting for this tick runs first: the frame recorded, the demand kept and
        // the schedules' step below see the poll's answers, not the last second's.
        if self.due.merge {
            self.pacing.at_tick(tokio::time::Instant::now());
            self.merge_if_due();
        }
        self.st.set_wall(Utc::now());
        self.due.draw |= self.st.expire_message(self.st.clock.wall);
        self.record_frame();
        self.keep_demand();
        self.due.advise = true;
        if std::mem::take(&mut self.due.schedules) {
            self.schedule_step();
        }
        if self.stop_group_to_quit() == Then::Leave {
            return Then::Leave;
        }
        // Stale sources show their age, so they redraw each second; live ones do not.
        // A running action's countdown, too.
        self.due.draw |= self.store.check_staleness(self.st.clock.wall)
            || self.st.action_running()
            || self.store.fleet().sources.iter().any(|s| !matches!(s.health, crate::model::SourceHealth::Live { .. }));
        Then::Go
    }

    /// Recording: a frame a second (what is on screen), with the actions audited since.
    fn record_frame(&mut self) {
        if let Some(r) = &mut self.recording
            && let Err(e) = r.take(&self.store, self.st.clock.wall)
        {
            self.st.set_recording(None);
            let closed = self.recording.take().map(Session::finish);
            self.st.say(match closed {
                Some(Err(c)) => format!("recording stopped: {e} (and it could not be closed: {c})"),
                _ => format!("recording stopped: {e}"),
            });
        }
    }

    /// The demand by hour kept for the next run, at each new sample.
    fn keep_demand(&mut self) {
        if let Err(e) = crate::engine::save_demand(&self.store, &mut self.demand_saved) {
            self.st.say(format!("demand by hour not kept: {e}"));
            // Tried again at the next sample.
            self.demand_saved = self.store.demand().last.or(Some(Utc::now()));
        }
    }

    /// After a merge, on the clock: the schedules the banner follows, the banner, and the
    /// unattended schedules' next step.
    fn schedule_step(&mut self) {
        if self.store.simulated() != self.schedules_for_sim {
            self.schedules_for_sim = self.store.simulated();
            self.schedules = crate::schedule::demo::effective(self.cfg, self.schedules_for_sim).map(|(s, _)| s);
        }
        let was = self.st.advice.banner.clone();
        self.banner_if_stale();
        let unattended = self.step_unattended();
        if self.st.advice.banner.is_some() != was.is_some() {
            self.st.set_viewport(crate::ui::viewport_for(terminal_area(&self.terminal), &self.st));
        }
        // The merge drew the new data already: a frame here only for what this
        // step changed (one frame a merge, not two a second apart).
        self.due.draw |= unattended || self.st.advice.banner != was;
    }

    /// The banner's timelines take ~55 ms over 1,400 covered cards: made again every ten
    /// seconds, and at once after an action (its minutes count down coarsely). (Also at once
    /// while no source has answered yet: the first data shows it.)
    fn banner_if_stale(&mut self) {
        let stale = banner_stale(self.banner.at, self.banner.data, self.store.fleet().taken_at);
        if stale || self.st.action_running() != self.banner.busy {
            self.st.set_banner(self.schedules.as_ref().and_then(|s| due_change(s, self.cfg, &self.store)));
            self.banner.at = Some(Instant::now());
            self.banner.data = self.store.fleet().taken_at;
            self.banner.busy = self.st.action_running();
        }
    }

    /// The unattended schedules' next step, when the console applies them (true).
    fn step_unattended(&mut self) -> bool {
        let Some(s) = self.schedules.as_deref().filter(|s| Auto::applies(self.cfg, &self.store, s)) else {
            return false;
        };
        self.auto.step(&mut self.st, &self.store, s, self.cfg, &self.runner, &self.auto_tx);
        true
    }

    /// Quitting while a group change runs: it stops after its current card, and the console
    /// leaves once no action runs.
    fn stop_group_to_quit(&mut self) -> Then {
        if !self.quitting() {
            return Then::Go;
        }
        let Some(Modal::GroupRunning { run, .. }) = &mut self.st.dialog.modal else { return Then::Go };
        run.stop("tessera is quitting");
        self.pump();
        if self.st.action_running() { Then::Go } else { Then::Leave }
    }

    /// A quit signal: a running action finishes first (and is audited); a second leaves.
    fn on_quit_signal(&mut self) -> Then {
        if quit_signal(
            &mut self.st,
            &self.runner,
            self.leaving.lost.is_some(),
            &mut self.leaving.asked_headless,
            &mut self.leaving.left_undone,
        ) {
            self.due.draw = true;
            return Then::Go;
        }
        self.auto.interrupted(&self.runner);
        Then::Leave
    }

    /// SIGTSTP: suspended like Ctrl-Z (not while an action runs, nor without a terminal).
    fn on_stop_signal(&mut self) -> Then {
        if self.leaving.lost.is_none() {
            try_suspend(&mut self.terminal, &mut self.st);
            self.due.draw = true;
        }
        Then::Go
    }

    /// SIGHUP is a terminal going away (tmux and the kernel can each send one): it never
    /// abandons a running action; it quits when none runs. The redraw it asks for finds out
    /// whether the terminal is still there.
    fn on_hangup(&mut self) -> Then {
        if !self.st.action_running() {
            self.auto.interrupted(&self.runner);
            return Then::Leave;
        }
        // Not a request of the operator's: a later q or Ctrl-C is still the first.
        self.leaving.hung_up = true;
        self.st.say("hangup: tessera quits when the action ends");
        self.due.draw = true;
        Then::Go
    }

    /// Merge the applied updates into one fleet, when one is pending and the pacing allows.
    fn merge_if_due(&mut self) {
        if !self.due.merge || tokio::time::Instant::now() < self.pacing.merge_at {
            return;
        }
        self.store.rebuild();
        self.st.on_fleet(self.store.fleet());
        // A group change waiting for a card to empty or for its time looks again.
        self.pump();
        self.pacing.last_merge = tokio::time::Instant::now();
        // Merged, so drawn; the advisor runs below at once, paced by its own cost
        // (ADVICE_SHARE); the banner and the unattended schedule at the next clock tick.
        self.due = Due { draw: true, merge: false, schedules: true, findings: true, advise: true };
    }

    /// The advisor after a merge at once (one draw shows the new data and what it says of
    /// them, not two a second apart), and on the clock for a pass the pacing held back. The
    /// banner and the unattended schedule stay on the clock (at most once a second).
    fn advise_if_due(&mut self) {
        if !std::mem::take(&mut self.due.advise) {
            return;
        }
        if self.due.findings && self.pacing.advised_at.is_none_or(|t| t.elapsed() >= self.pacing.advice_gap) {
            let began = Instant::now();
            self.st.on_findings(advise(self.cfg, &self.store, &mut self.suggestions));
            self.pacing.advice_gap = (began.elapsed() * ADVICE_SHARE).min(ADVICE_GAP_MAX);
            self.pacing.advised_at = Some(began);
            self.due.findings = false;
            self.due.draw = true;
            self.project_if_due();
        }
    }

    /// After advice, once a minute, or at once when the advice's plan changed: simulate the
    /// next 24 hours of measured demand as is and following the plan's layout changes, on a
    /// blocking thread (never on the loop).
    /// At once when the advice's plan is not the one the last projection followed, but never
    /// sooner than PROJECT_SHARE times the last one's time after it began.
    fn project_if_due(&mut self) {
        let plan = crate::advisor::followed(&self.st.advice.list.rows);
        let same = self.st.advice.projection.as_ref().is_some_and(|p| p.followed == plan);
        let gap = self.projecting.took * PROJECT_SHARE;
        let wait = if same { gap.max(PROJECT_EVERY) } else { gap };
        if self.projecting.task.is_some() || self.projecting.at.is_some_and(|t| t.elapsed() < wait) {
            return;
        }
        // What the projection reads, its nodes: not the history, workloads, events and indexes
        // a whole clone copies (at 32,768 cards, at the start, the history alone is 70 MB).
        let whole = self.store.fleet();
        let fleet = crate::model::Fleet { taken_at: whole.taken_at, nodes: whole.nodes.clone(), ..Default::default() };
        let demand = self.store.demand().clone();
        let now = fleet.taken_at.unwrap_or_else(Utc::now);
        let min_runtime_s = self.cfg.policy.min_runtime.as_secs() as i64;
        self.projecting.at = Some(Instant::now());
        self.projecting.task = Some(tokio::task::spawn_blocking(move || {
            crate::simulate::projection::project(&fleet, &demand, now, min_runtime_s, &plan)
        }));
    }

    /// The projection came back: the Advice view shows it.
    fn on_projection(&mut self, p: Option<Projected>) -> Then {
        self.projecting.task = None;
        self.projecting.took = self.projecting.at.map_or(Duration::ZERO, |t| t.elapsed());
        // A failed simulation waits its minute like any other: it is not retried at once.
        let Some(p) = p else { return Then::Go };
        if p.is_none() {
            // Nothing to project yet (no demand measured, no fleet): try with the next advice.
            self.projecting.at = None;
        }
        if p.is_some() || self.st.advice.projection.is_some() {
            self.st.set_projection(p);
            self.due.draw = true;
        }
        Then::Go
    }

    /// Drive a running group change (see `schedule::pump`).
    fn pump(&mut self) {
        pump(&mut self.st, &self.store, &self.runner, &self.act_tx);
    }

    /// Asked to quit (once, or by a hangup) while an action runs: leave when it ends.
    fn quitting(&self) -> bool {
        self.st.dialog.quit_after || self.leaving.hung_up
    }

    /// Leave: the terminal restored, then what was recorded, kept or left half-done said on
    /// stderr; an error when a quit at once left something half-done or the terminal was lost.
    fn leave(mut self) -> Result<(), CmdError> {
        // Left at once while a group change ran: say which cards it leaves drained.
        let drained = match &self.st.dialog.modal {
            Some(Modal::GroupRunning { run, .. }) => run.still_drained(),
            _ => Vec::new(),
        };
        let kept = crate::engine::save_demand(&self.store, &mut self.demand_saved);
        let audit_note = self.recording.as_mut().and_then(|r| r.audit_error.take());
        let recorded = self.recording.take().map(Session::finish);
        drop(self.restore);
        say_recorded(recorded, audit_note);
        if let Err(e) = kept {
            to_stderr(&format!("tessera: demand by hour not kept: {e}"));
        }
        say_drained(&drained);
        self.leaving.verdict()
    }
}

/// What the loop does once an event was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Merge and advise if due, then draw if due and wait for the next event.
    Go,
    /// Draw if due and wait for the next event (a due merge waits a turn).
    Next,
    /// Leave the console.
    Leave,
}

/// The UI state at the start: the policy's thresholds, what starting noted, the recording's
/// file, the first fleet.
fn ui_state(cfg: &Config, ascii: bool, notes: &[String], recording: Option<&Session>, store: &Store) -> UiState {
    let mut st = UiState::new(cfg.read_only, ascii, cfg.policy.min_runtime, Utc::now());
    st.set_queue_wait_threshold(cfg.policy.queue_wait_threshold);
    if !notes.is_empty() {
        st.say(notes.join("; "));
    }
    st.set_recording(recording.and_then(|r| r.recorder().path()).map(|p| p.display().to_string()));
    st.on_fleet(store.fleet());
    st
}

/// What the recording kept, on stderr (and whether the audit log could always be read).
fn say_recorded(
    recorded: Option<Result<crate::record::writer::Summary, crate::record::writer::WriteError>>,
    audit_note: Option<crate::record::tail::TailError>,
) {
    match recorded {
        Some(Ok(s)) => to_stderr(&format!(
            "tessera: recorded {} and {}, {}, in {}",
            crate::units::count(s.frames, "frame", "frames"),
            crate::units::count(s.actions, "action", "actions"),
            crate::units::size(s.bytes),
            s.kept().iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        )),
        Some(Err(e)) => to_stderr(&format!("tessera: the recording was not closed cleanly: {e}")),
        None => {}
    }
    if let Some(e) = audit_note {
        to_stderr(&format!("tessera: the audit log could not always be read ({e}): recorded actions may be missing"));
    }
}

/// The cards a group change left at once leaves drained, on stderr.
fn say_drained(drained: &[crate::model::CardRef]) {
    if !drained.is_empty() {
        let names: Vec<String> = drained.iter().map(ToString::to_string).collect();
        to_stderr(&format!(
            "tessera: the schedule change was left at once: {} stay drained (tessera undrain CARD gives each back; the audit log has every drain)",
            names.join(", ")
        ));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Pacing, banner_stale};

    /// Answers of one poll that come within the window are merged at the clock's tick, which
    /// draws once for the data and the clock; later ones merge at once, as before.
    #[test]
    fn a_polls_answers_merge_with_the_clocks_tick() {
        let epoch = tokio::time::Instant::now();
        let ms = |n: u64| epoch + Duration::from_millis(n);
        let mut p = Pacing::new(Duration::from_secs(1), epoch);
        assert_eq!((p.clock_at, p.window), (ms(250), Duration::from_millis(250)));
        // Answers 30 ms after the poll: merged with the tick at 250 ms (the timer a window
        // later is the fallback), not at once and again for the clock.
        assert_eq!(p.merge_time(ms(30)), ms(500));
        p.merge_at = p.merge_time(ms(30));
        p.at_tick(ms(250));
        assert_eq!(p.merge_at, ms(250));
        // On the tick itself: the same.
        assert_eq!(p.merge_time(ms(1250)), ms(1500));
        // A slow exporter, 400 ms after the poll: the next tick is 850 ms away: at once.
        assert_eq!(p.merge_time(ms(1400)), ms(1400));
        // A merge paced for later than a window after the tick is not pulled in by it.
        p.merge_at = ms(2600);
        p.at_tick(ms(2250));
        assert_eq!(p.merge_at, ms(2600));
        // A short refresh has a short window: four merges a second, one with the tick.
        let q = Pacing::new(Duration::from_millis(200), epoch);
        assert_eq!((q.clock_at, q.window), (ms(50), Duration::from_millis(50)));
        assert_eq!(q.merge_time(ms(1010)), ms(1100));
        assert_eq!(q.merge_time(ms(1210)), ms(1210));
    }

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
