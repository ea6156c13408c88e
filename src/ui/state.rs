//! UI state: which view, which row, filter, sort, history, dialogs, findings. The owner loop
//! feeds it fleets and intents; views only read it. `rows.rs` builds the row lists,
//! `intents.rs` says what keys and commands do.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};

use super::filter::Filter;
use super::keymap::Intent;
use crate::model::{CardRef, Fleet, WorkloadState};
pub use advice::Advice;
pub use dialog::Dialog;
pub use fleet::{FleetList, Row, SortKey};
pub use footer::Footer;
pub use history::{HISTORY, History, Sample};
pub use list::List;
pub use queue::QueueList;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Fleet,
    Queue,
    Workloads,
    Sources,
    Advice,
}

impl Tab {
    pub const ALL: [Tab; 5] = [Tab::Fleet, Tab::Queue, Tab::Workloads, Tab::Sources, Tab::Advice];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn title(self) -> &'static str {
        match self {
            Tab::Fleet => "Fleet",
            Tab::Queue => "Queue",
            Tab::Workloads => "Workloads",
            Tab::Sources => "Sources",
            Tab::Advice => "Advice",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Normal,
    Filter(String),
    Command(String),
    /// Replay: the time typed after `g`.
    Goto(String),
}

/// The console's shared state: which view, the terminal, the clocks, the filter line, the
/// run's settings and replay; each view's own state is in its owner (`fleet`, `queue`,
/// `workloads`, `sources`, `advice`), the dialog's in `dialog`, the footer's in `footer`.
/// `$e` on the list of view `$t`, as `$l`.
macro_rules! on_list {
    ($s:expr, $t:expr, $l:ident => $e:expr) => {
        match $t {
            Tab::Fleet => {
                let $l = &mut $s.fleet.list;
                $e
            }
            Tab::Queue => {
                let $l = &mut $s.queue.list;
                $e
            }
            Tab::Workloads => {
                let $l = &mut $s.workloads;
                $e
            }
            Tab::Sources => {
                let $l = &mut $s.sources;
                $e
            }
            Tab::Advice => {
                let $l = &mut $s.advice.list;
                $e
            }
        }
    };
}
#[derive(Debug)]
pub struct UiState {
    pub tab: Tab,
    /// What is open in front of the view: a card, a workload, the help.
    pub open: Opened,
    pub input: Input,
    pub filter: FilterLine,
    pub screen: Screen,
    pub clock: Clock,
    pub settings: Settings,
    /// Each card's sparkline samples.
    pub history: History,
    pub fleet: FleetList,
    pub queue: QueueList,
    /// The workloads view: indexes of active workloads, by place.
    pub workloads: List<usize>,
    /// The sources view: indexes of the fleet's sources.
    pub sources: List<usize>,
    pub advice: Advice,
    pub dialog: Dialog,
    pub footer: Footer,
    /// Replaying a recording: where it stands (`None`: live).
    pub replay: Option<super::replay::Replay>,
}

/// What is open in front of the current view.
#[derive(Debug, Default)]
pub struct Opened {
    pub card: Option<CardRef>,
    /// The workload whose detail is open (Enter in the queue or workloads view).
    pub workload: Option<String>,
    pub help: bool,
    /// First help line shown; keys that move a selection scroll the help while it is open.
    pub help_scroll: usize,
}

/// The filter line as typed and as parsed.
#[derive(Debug, Default)]
pub struct FilterLine {
    pub text: String,
    pub parsed: Filter,
}

/// The terminal.
#[derive(Debug, Default)]
pub struct Screen {
    /// The terminal's size at the last draw: a confirmation is answerable only when what it
    /// asks shows whole at it (0×0 before the first draw: nothing is).
    pub area: ratatui::layout::Rect,
    /// Rows the body shows; set by the loop from the terminal size.
    pub body: usize,
}

/// The clocks.
#[derive(Debug)]
pub struct Clock {
    /// The data's clock (the simulator's, or wall time for real sources).
    pub now: DateTime<Utc>,
    /// Wall-clock time, for source ages.
    pub wall: DateTime<Utc>,
}

/// How this console runs.
#[derive(Debug)]
pub struct Settings {
    pub read_only: bool,
    pub ascii: bool,
    pub min_runtime: std::time::Duration,
    /// Waits longer than this stand out in the queue view (policy `queue_wait_threshold`).
    pub queue_wait_threshold: std::time::Duration,
    /// The console records what it shows (`--record`): the file, for the header.
    pub recording: Option<String>,
}

/// What the loop must do after a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    None,
    Redraw,
    Quit,
    /// Something only the loop can do: plan an action, run a confirmed plan.
    Request(super::dialogs::Request),
    /// A dialog closed (redraw): a request typed ahead of its closing is void.
    Dismissed,
    /// Ctrl-Z: give the terminal back and stop, like any job; redraw when continued.
    Suspend,
}

impl UiState {
    pub fn new(read_only: bool, ascii: bool, min_runtime: std::time::Duration, now: DateTime<Utc>) -> Self {
        Self {
            tab: Tab::Fleet,
            open: Opened::default(),
            input: Input::Normal,
            filter: FilterLine::default(),
            screen: Screen { area: ratatui::layout::Rect::default(), body: 20 },
            clock: Clock { now, wall: now },
            settings: Settings {
                read_only,
                ascii,
                min_runtime,
                queue_wait_threshold: std::time::Duration::from_secs(15 * 60),
                recording: None,
            },
            history: History::default(),
            fleet: FleetList::default(),
            queue: QueueList::default(),
            workloads: List::default(),
            sources: List::default(),
            advice: Advice::default(),
            dialog: Dialog::default(),
            footer: Footer::default(),
            replay: None,
        }
    }

    /// Say `text` in the footer (it goes once shown `MESSAGE_FOR`, or with its view).
    pub fn say(&mut self, text: impl Into<String>) {
        self.footer.message = Some(text.into());
    }

    /// Put a dialog in front (a confirmation, a running action's progress).
    pub fn show_dialog(&mut self, dialog: super::dialogs::Modal) {
        self.dialog.modal = Some(dialog);
    }

    /// Close the dialog in front, if any.
    pub fn close_dialog(&mut self) {
        self.dialog.modal = None;
    }

    /// A footer message goes once shown this long (it stayed for minutes, long after what it
    /// said was over). True when one went.
    pub fn expire_message(&mut self, wall: DateTime<Utc>) -> bool {
        const MESSAGE_FOR: i64 = 15;
        match (&self.footer.message, &self.footer.since) {
            (None, _) => {
                self.footer.since = None;
                false
            }
            (Some(m), Some((seen, at))) if m == seen => {
                if (wall - *at).num_seconds() >= MESSAGE_FOR {
                    self.footer.message = None;
                    self.footer.since = None;
                    return true;
                }
                false
            }
            (Some(m), _) => {
                self.footer.since = Some((m.clone(), wall));
                false
            }
        }
    }

    /// A new fleet arrived: record history, rebuild rows, keep the selection on its card.
    pub fn on_fleet(&mut self, fleet: &Fleet) {
        if let Some(t) = fleet.taken_at {
            self.clock.now = t;
        }
        // History from a source (Prometheus) seeds a card's sparklines once, before its own samples.
        // Card sparklines: the whole-card series (instance series seed workload activity).
        for h in fleet.history.iter().filter(|h| h.gi.is_none()) {
            history::on_node_samples(&mut self.history.by_node, &h.card.node, |cards| {
                let mine = cards.entry(h.card.index).or_default();
                if mine.len() <= 1 {
                    let mem = h.mem_pct.iter().copied().chain(std::iter::repeat(None));
                    let seeded: Vec<Sample> = h.util.iter().zip(mem).map(|(u, m)| Sample::new(*u, m)).collect();
                    let own: Vec<Sample> = mine.drain(..).collect();
                    mine.extend(seeded);
                    mine.extend(own);
                    while mine.len() > HISTORY {
                        mine.pop_front();
                    }
                }
            });
        }
        // One sample per second of data time, however often sources merge.
        let sample = self.history.last_sample.is_none_or(|t| self.clock.now - t >= chrono::Duration::seconds(1));
        if sample {
            self.history.last_sample = Some(self.clock.now);
        }
        for n in fleet.nodes.iter().filter(|_| sample) {
            history::on_node_samples(&mut self.history.by_node, &n.name, |cards| {
                for c in &n.cards {
                    let h = cards.entry(c.index).or_default();
                    let mem_pct = match (c.memory_used_mib, c.memory_total_mib) {
                        (Some(u), Some(t)) if t > 0 => Some(u as f64 * 100.0 / t as f64),
                        _ => None,
                    };
                    h.push_back(Sample::new(c.activity_pct(), mem_pct));
                    if h.len() > HISTORY {
                        h.pop_front();
                    }
                }
            });
        }
        self.fleet.totals = crate::model::Totals::compute(fleet);
        self.sources.rows = (0..fleet.sources.len()).collect();
        self.queue.summary = crate::model::QueueSummary::compute(fleet, self.clock.now);
        self.rebuild(fleet);
    }

    /// The sparkline samples of card `r`, oldest first.
    pub fn samples(&self, r: &CardRef) -> Option<&VecDeque<Sample>> {
        self.history.by_node.get(r.node.as_str())?.get(&r.index)
    }

    /// New findings from the advisor: keep the selection in range.
    /// Drop the sparklines' samples (a replay went back or jumped: they belong elsewhere).
    pub fn forget_history(&mut self) {
        self.history.by_node.clear();
        self.history.last_sample = None;
    }

    /// New findings from the advisor: listed in the order asked for, the selection kept on
    /// its finding, the finding the panel shows shown anew or marked gone.
    pub fn on_findings(&mut self, findings: Vec<crate::advisor::Finding>) {
        self.advice.flagged = findings
            .iter()
            .filter(|f| f.severity >= crate::advisor::Severity::Warn)
            .flat_map(|f| f.cards.iter().cloned())
            .collect();
        self.advice.counts = crate::advisor::counts(&findings);
        self.advice.at = Some(self.clock.now);
        self.list_findings(findings);
        self.show_panel_finding();
    }

    /// `findings` in `advice_order`, the selection kept on its finding where it is still listed.
    fn list_findings(&mut self, mut findings: Vec<crate::advisor::Finding>) {
        let kept = self.advice.list.rows.get(self.advice.list.selected).map(|x| (x.kind, x.subject.clone()));
        crate::advisor::order(&mut findings, self.advice.order);
        self.advice.list.rows = findings;
        if let Some(i) = kept.and_then(|(kind, subject)| self.finding_at(kind, &subject)) {
            self.advice.list.selected = i;
        }
        self.clamp(Tab::Advice);
    }

    /// Where the finding of `kind` about `subject` is listed now.
    pub fn finding_at(&self, kind: crate::advisor::Kind, subject: &crate::advisor::Subject) -> Option<usize> {
        self.advice.list.rows.iter().position(|x| x.kind == kind && &x.subject == subject)
    }

    /// The Advice view's other order (`s` there), the selection kept on its finding.
    pub fn toggle_advice_order(&mut self) {
        self.advice.order = self.advice.order.toggled();
        self.list_findings(self.advice.list.rows.clone());
    }

    /// The panel's finding as the latest pass has it, or, gone from it, said to be gone.
    fn show_panel_finding(&mut self) {
        let Some((kind, subject)) = self.advice.panel_finding.clone() else { return };
        match self.finding_at(kind, &subject) {
            Some(i) => self.advice.panel = Some(intents::finding_panel(&self.advice.list.rows[i])),
            None => {
                if let Some((title, lines)) = self.advice.panel.as_mut()
                    && !lines.first().is_some_and(|l| l.starts_with(GONE))
                {
                    title.push_str(": gone");
                    // What it suggested is no longer advice: nothing to plan.
                    lines.retain(|l| !l.starts_with("  a plans it"));
                    lines.insert(0, format!("{GONE}: the latest advice no longer has it (Esc closes)"));
                }
            }
        }
    }

    /// Asked to quit while an action runs: leave when it ends (a second request leaves now).
    pub fn quit_when_done(&mut self) {
        self.dialog.quit_after = true;
        self.footer.message = Some("an action is running: tessera quits when it ends (Ctrl-C twice leaves now)".into());
    }

    /// An action is executing (its dialog shows progress and no outcome yet).
    pub fn action_running(&self) -> bool {
        self.dialog.auto_busy
            || match &self.dialog.modal {
                Some(super::dialogs::Modal::Running { outcome, .. }) => outcome.is_none(),
                Some(super::dialogs::Modal::GroupRunning { run, .. }) => !run.finished(),
                _ => false,
            }
    }

    pub fn selected_card(&self) -> Option<CardRef> {
        self.ref_at(self.fleet.list.selected)
    }

    /// Rows of data a tab shows: the queue gives part of the body to its demand table.
    pub fn rows_visible(&self, t: Tab) -> usize {
        match t {
            Tab::Queue => self
                .screen
                .body
                .saturating_sub(queue_demand_height(self.screen.body + 1, self.queue.summary.demand.len())),
            // The list gives part of the body to the selected finding and its own first line.
            Tab::Advice => advice::list_rows(self.screen.body + 1, self.advice.projection.is_some()),
            _ => self.screen.body,
        }
        .max(1)
    }

    /// The terminal changed size: keep the selections in view (no rebuild needed).
    pub fn set_viewport(&mut self, rows: usize) {
        self.screen.body = rows;
        for t in Tab::ALL {
            self.clamp(t);
        }
    }

    fn len(&self, t: Tab) -> usize {
        match t {
            Tab::Fleet => self.fleet.list.rows.len(),
            Tab::Queue => self.queue.list.rows.len(),
            Tab::Workloads => self.workloads.rows.len(),
            Tab::Sources => self.sources.rows.len(),
            Tab::Advice => self.advice.list.rows.len(),
        }
    }

    fn clamp(&mut self, t: Tab) {
        let vp = self.rows_visible(t);
        on_list!(self, t, l => l.clamp(vp));
    }

    /// Move the selection by `delta` rows, skipping node headings in the fleet view.
    pub fn step(&mut self, delta: isize) {
        self.step_in(self.tab, delta);
    }

    fn step_in(&mut self, t: Tab, delta: isize) {
        let vp = self.rows_visible(t);
        on_list!(self, t, l => l.step(delta, vp));
    }
}

pub mod action_keys;
pub mod advice;
mod dialog;
mod fleet;
mod footer;
mod history;
mod intents;
mod list;
mod queue;
pub mod replay_keys;
mod rows;

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;

/// How a finding's panel begins once an advice pass no longer has the finding.
pub const GONE: &str = "this finding is gone";

/// Lines the queue view gives its demand table in a body of `body_height` lines.
pub fn queue_demand_height(body_height: usize, demand_rows: usize) -> usize {
    if body_height >= 12 { (demand_rows + 2).min(body_height / 2) } else { 0 }
}
