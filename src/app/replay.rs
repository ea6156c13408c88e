//! The console on a recording: one loop over keys, a playback clock and signals; the frame
//! for the moment shown is decoded here and shown through the same state and views as live
//! data. Read-only: there is no runner, and no action key exists.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::schedule::{Suggestions, advise};
use super::{draw, keys, open_terminal, signals};
use crate::config::Config;
use crate::error::CmdError;
use crate::record::reader::Player;
use crate::store::Store;
use crate::ui::replay::Replay;
use crate::ui::state::{Effect, UiState};
use crate::ui::theme::Theme;

/// How often playback moves the moment.
const PLAY_EVERY: Duration = Duration::from_millis(100);
/// The most often the advisor runs while playing (on a jump or a step: at once).
const ADVISE_EVERY: Duration = Duration::from_secs(1);

/// What to replay and how.
pub struct Replaying {
    pub player: Player,
    /// Start here (else at the beginning).
    pub from: Option<DateTime<Utc>>,
    pub speed: f64,
    /// What the header's line names: the file, or "Prometheus history".
    pub what: String,
}

pub fn run(cfg: &Config, theme: Theme, ascii: bool, r: Replaying) -> Result<(), CmdError> {
    let rt = crate::engine::runtime()?;
    rt.block_on(replay_loop(cfg, theme, ascii, r))
}

/// The replay state for a recording: its frames' times, actions and outages.
pub fn state(player: &Player, speed: f64, what: String) -> Replay {
    let rec = &player.rec;
    let mut r = Replay::new(rec.frames().iter().map(|f| f.at()).collect(), speed, what);
    r.actions = rec.actions().iter().map(|a| (a.at, a.summary())).collect();
    r.outages = rec.outages();
    r
}

/// Decode and show the frame for the moment `st.replay` stands at, if it is not the one shown.
/// Returns true when the fleet changed. A frame that cannot be decoded shows as that moment
/// unknown (every source unavailable, no cards), never as the last good one's numbers.
fn show(
    player: &mut Player,
    store: &mut Store,
    st: &mut UiState,
    shown: &mut Option<usize>,
    suggestions: &mut Suggestions,
) -> bool {
    let Some(r) = st.replay.as_mut() else { return false };
    let Some(i) = r.frame() else { return false };
    if *shown == Some(i) {
        // A jump within the frame shown changes nothing.
        r.jumped = false;
        return false;
    }
    let at = r.shown_at();
    if std::mem::take(&mut r.jumped) {
        st.forget_history();
        suggestions.forget();
    }
    *shown = Some(i);
    match player.frame(i) {
        Ok(f) => {
            store.show_recorded(f.fleet.clone(), f.simulated, f.demand.clone());
            st.set_wall(f.at);
        }
        Err(e) => {
            let why = format!("this moment's frame cannot be read: {e}");
            let mut fleet = crate::model::Fleet { taken_at: Some(at), ..crate::model::Fleet::default() };
            fleet.sources = store.fleet().sources.clone();
            // None decoded yet: the sources the recording names, so none looks like an
            // empty cluster.
            if fleet.sources.is_empty() {
                let mut names: Vec<String> = player.rec.headers().flat_map(|h| h.sources.clone()).collect();
                names.dedup();
                fleet.sources = names.iter().map(|n| recorded_source(n, at)).collect();
            }
            for s in &mut fleet.sources {
                s.health = crate::model::SourceHealth::Unavailable { reason: why.clone() };
            }
            store.show_recorded(fleet, store.simulated(), None);
            st.set_wall(at);
            st.forget_history();
            st.say(why);
        }
    }
    st.on_fleet(store.fleet());
    true
}

/// A source the recording's header names, for a moment none of its frames can tell about.
fn recorded_source(name: &str, at: DateTime<Utc>) -> crate::model::SourceStatus {
    use crate::model::SourceKind;
    let kind = match name {
        "sim" => SourceKind::Simulated,
        "nvml" => SourceKind::Nvml,
        "slurm" => SourceKind::Slurm,
        "kubernetes" => SourceKind::Kubernetes,
        "prometheus" => SourceKind::Prometheus,
        _ => SourceKind::Scrape,
    };
    crate::model::SourceStatus::live(name, kind, at)
}

/// The UI state of a replay: read-only, at the moment shown; the footer says the keys, or
/// what damage of the recording was skipped.
fn replay_state(cfg: &Config, ascii: bool, replay: Replay, problems: &[String]) -> UiState {
    let mut st = UiState::new(true, ascii, cfg.policy.min_runtime, replay.pos);
    st.set_queue_wait_threshold(cfg.policy.queue_wait_threshold);
    st.set_replay(replay);
    if let Some(r) = &st.replay {
        st.say(format!("replaying {}: space pauses, g jumps to a time, ? lists the keys", r.what));
    }
    if let Some(first) = problems.first() {
        let more = if problems.len() > 1 { format!(" (and {} more)", problems.len() - 1) } else { String::new() };
        st.say(format!("recording damaged, skipped: {first}{more}"));
    }
    st
}

/// The console on a recording: the player, the frame shown, the advice of it, and whether
/// the screen needs drawing. One method per event the loop serves.
struct ReplayConsole<'c> {
    cfg: &'c Config,
    player: Player,
    store: Store,
    st: UiState,
    /// The frame on screen.
    shown: Option<usize>,
    suggestions: Suggestions,
    /// When the advisor last ran, and the frame the findings on screen are of.
    advised: std::time::Instant,
    advice_for: Option<usize>,
    dirty: bool,
}

impl<'c> ReplayConsole<'c> {
    /// The replay at its first moment (or `from`), shown and advised.
    fn open(cfg: &'c Config, ascii: bool, r: Replaying) -> Self {
        let Replaying { player, from, speed, what } = r;
        let mut replay = state(&player, speed, what);
        if let Some(t) = from {
            replay.go(t);
            replay.jumped = false;
        }
        let problems = player.rec.problems.clone();
        let st = replay_state(cfg, ascii, replay, &problems);
        let mut c = Self {
            cfg,
            player,
            store: Store::new(),
            st,
            shown: None,
            suggestions: Suggestions::default(),
            advised: std::time::Instant::now(),
            advice_for: None,
            dirty: true,
        };
        c.show();
        c.advise();
        c
    }

    /// Decode and show the frame for the moment the replay stands at; true when it changed.
    fn show(&mut self) -> bool {
        show(&mut self.player, &mut self.store, &mut self.st, &mut self.shown, &mut self.suggestions)
    }

    /// The advice of the frame shown, now.
    fn advise(&mut self) {
        self.st.on_findings(advise(self.cfg, &self.store, &mut self.suggestions));
        (self.advised, self.advice_for) = (std::time::Instant::now(), self.shown);
    }

    /// A key: false when it quits. A step or a jump shows the advice of that moment at once.
    fn on_input(
        &mut self,
        ev: crossterm::event::Event,
        input: &mut tokio::sync::mpsc::Receiver<crossterm::event::Event>,
        terminal: &mut ratatui::Terminal<ratatui::backend::CrosstermBackend<std::io::Stdout>>,
    ) -> bool {
        match keys(ev, input, &mut self.st, self.store.fleet()) {
            Effect::Quit => return false,
            Effect::Suspend => super::suspend(terminal),
            // No action key exists in a replay; a request cannot come, but if one did it
            // would be refused here.
            Effect::Request(_) => self.st.say("a replay is read-only: nothing can act on the past"),
            Effect::Redraw | Effect::Dismissed | Effect::None => {}
        }
        if self.show() && self.advice_for != self.shown {
            self.advise();
        }
        self.dirty = true;
        true
    }

    /// Playback's tick, `real` after the last: the moment moves; while playing, the advisor
    /// runs at most once a second, a paused moment's at once.
    fn on_tick(&mut self, real: Duration) {
        let playing = self.st.replay.as_ref().is_some_and(|r| !r.paused);
        if let Some(r) = self.st.replay.as_mut() {
            r.advance(real);
        }
        self.dirty |= self.show();
        if self.advice_for != self.shown && (self.advised.elapsed() >= ADVISE_EVERY || !playing) {
            self.advise();
            self.dirty = true;
        }
        // The header's clock moves while playing.
        self.dirty |= playing;
    }
}

async fn replay_loop(cfg: &Config, theme: Theme, ascii: bool, r: Replaying) -> Result<(), CmdError> {
    let mut c = ReplayConsole::open(cfg, ascii, r);
    let (mut terminal, _restore, mut input) = open_terminal();
    let mut sig = signals()?;
    let mut tick = tokio::time::interval(PLAY_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_tick = std::time::Instant::now();
    loop {
        if std::mem::take(&mut c.dirty) {
            draw(&mut terminal, &mut c.st, &c.store, &theme)?;
        }
        tokio::select! {
            Some(ev) = input.recv() => {
                if !c.on_input(ev, &mut input, &mut terminal) {
                    break;
                }
            }
            _ = tick.tick() => {
                let real = last_tick.elapsed();
                last_tick = std::time::Instant::now();
                c.on_tick(real);
            }
            _ = sig.term.recv() => break,
            _ = sig.hup.recv() => break,
            _ = sig.int.recv() => break,
            _ = sig.quit.recv() => break,
            _ = sig.tstp.recv() => { super::suspend(&mut terminal); c.dirty = true }
        }
    }
    Ok(())
}
