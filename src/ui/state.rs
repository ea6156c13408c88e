//! UI state: which view, which row, filter, sort, history, dialogs, findings. The owner loop
//! feeds it fleets and intents; views only read it. `rows.rs` builds the row lists,
//! `intents.rs` says what keys and commands do.

use std::collections::{HashMap, VecDeque};

use chrono::{DateTime, Utc};

use super::filter::Filter;
use super::keymap::Intent;
use crate::model::{CardRef, Fleet, WorkloadState};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Node,
    Util,
    Memory,
    Temp,
    Power,
    Free,
    /// Unhealthy cards first (lost, fatal XID, uncorrectable ECC), then drained ones.
    Health,
}

impl SortKey {
    pub fn next(self) -> Self {
        match self {
            Self::Node => Self::Util,
            Self::Util => Self::Memory,
            Self::Memory => Self::Temp,
            Self::Temp => Self::Power,
            Self::Power => Self::Free,
            Self::Free => Self::Health,
            Self::Health => Self::Node,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Node => "node",
            Self::Util => "util",
            Self::Memory => "memory",
            Self::Temp => "temp",
            Self::Power => "power",
            Self::Free => "free",
            Self::Health => "health",
        }
    }
}

/// A fleet table row: a node heading (node index) or a card (node index, card index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    Node(usize),
    Card(usize, usize),
}

/// Recent samples per card for the card view's sparklines.
pub const HISTORY: usize = 120;

/// One second of a card's sparklines: utilisation and memory in use, in hundredths of a
/// percent, in 4 bytes (32,768 cards keep `HISTORY` each: two `Option<f64>` made 130 MB).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    util: u16,
    mem_pct: u16,
}

/// `f` on a node's cards' samples, found by name without copying it (once per node per
/// second): the name is copied only for a node seen the first time.
fn on_node_samples(
    history: &mut HashMap<String, HashMap<u32, VecDeque<Sample>>>,
    node: &str,
    f: impl FnOnce(&mut HashMap<u32, VecDeque<Sample>>),
) {
    if let Some(cards) = history.get_mut(node) {
        return f(cards);
    }
    f(history.entry(node.to_string()).or_default());
}

/// Unknown, in a sample.
const NO_PCT: u16 = u16::MAX;

fn pct_cell(v: Option<f64>) -> u16 {
    match v {
        Some(v) if v.is_finite() => (v * 100.0).round().clamp(0.0, f64::from(NO_PCT - 1)) as u16,
        _ => NO_PCT,
    }
}

fn pct_of(c: u16) -> Option<f64> {
    (c != NO_PCT).then(|| f64::from(c) / 100.0)
}

impl Sample {
    /// Percentages beyond 655.34 are kept as 655.34; not a number is unknown.
    pub fn new(util: Option<f64>, mem_pct: Option<f64>) -> Self {
        Self { util: pct_cell(util), mem_pct: pct_cell(mem_pct) }
    }

    pub fn util(&self) -> Option<f64> {
        pct_of(self.util)
    }

    pub fn mem_pct(&self) -> Option<f64> {
        pct_of(self.mem_pct)
    }
}

#[derive(Debug)]
pub struct UiState {
    pub tab: Tab,
    pub open_card: Option<CardRef>,
    pub help: bool,
    /// First help line shown; keys that move a selection scroll the help while it is open.
    pub help_scroll: usize,
    pub input: Input,
    pub filter_text: String,
    pub filter: Filter,
    pub sort: SortKey,
    /// The sort runs the other way (`S`).
    pub sort_reverse: bool,
    /// The workload whose detail is open (Enter in the queue or workloads view).
    pub open_workload: Option<String>,
    pub rows: Vec<Row>,
    pub queue_rows: Vec<usize>,
    pub workload_rows: Vec<usize>,
    pub selected: [usize; 5],
    pub offset: [usize; 5],
    /// Node names and card indexes of the fleet the rows were built from, so the selection
    /// can be found again by identity in the next fleet, whatever its order.
    built_from: Vec<(String, Vec<u32>)>,
    /// Rows the body shows; set by the loop from the terminal size.
    pub viewport: usize,
    /// The terminal's size at the last draw: a confirmation is answerable only when what it
    /// asks shows whole at it (0×0 before the first draw: nothing is).
    pub screen: ratatui::layout::Rect,
    pub message: Option<String>,
    /// The message shown and since when (wall clock): it goes after `MESSAGE_FOR`.
    pub message_since: Option<(String, DateTime<Utc>)>,
    /// Each card's sparkline samples, by node name then card index: sampled every second, so
    /// looked up by the node's name without building a `CardRef` per card (see `samples`).
    history: HashMap<String, HashMap<u32, VecDeque<Sample>>>,
    pub read_only: bool,
    pub ascii: bool,
    pub min_runtime: std::time::Duration,
    /// Waits longer than this stand out in the queue view (policy `queue_wait_threshold`).
    pub queue_wait_threshold: std::time::Duration,
    /// The data's clock (the simulator's, or wall time for real sources).
    pub now: DateTime<Utc>,
    /// Wall-clock time, for source ages.
    pub wall: DateTime<Utc>,
    /// Data time of the last sparkline sample.
    last_sample: Option<DateTime<Utc>>,
    /// Header figures and the queue summary, computed once per fleet update, not per frame.
    pub totals: crate::model::Totals,
    pub queue: crate::model::QueueSummary,
    /// The action dialog on screen, if any: it takes every key until it closes.
    pub modal: Option<super::actions::Modal>,
    /// Quit was asked while an action ran: leave when it ends.
    pub quit_after_action: bool,
    /// The running action's dialog is hidden: keys browse, the footer shows its progress.
    pub action_hidden: bool,
    /// An action key was pressed read-only and the footer said why nothing happens.
    pub told_read_only: bool,
    /// Sources in the fleet, for the sources view's selection.
    pub source_count: usize,
    /// The advisor's findings in `advice_order` (the loop sets them, on a recent fleet: the
    /// advisor is paced by its own cost, every second at 4,096 cards, up to ten at 32,768).
    pub findings: Vec<crate::advisor::Finding>,
    /// The Advice view's order: the most severe first, or the most costly (`s` there).
    pub advice_order: crate::advisor::Order,
    /// A text panel in front of the view until Esc (title, lines): the answer of `:fit`, or a
    /// finding in full (Enter in the Advice view).
    pub panel: Option<(String, Vec<String>)>,
    /// The finding the panel shows, by kind and subject: each advice pass shows it anew, or
    /// marks it gone, and `a` acts on it only while the latest pass has it.
    pub panel_finding: Option<(crate::advisor::Kind, crate::advisor::Subject)>,
    /// Findings by severity (high, warn, info), counted once per update for the header.
    pub advice_counts: (usize, usize, usize),
    /// The data's clock when the findings were made (the advisor is paced: at 600× a pass can
    /// be an hour of simulated time old).
    pub findings_at: Option<DateTime<Utc>>,
    /// Cards some warn or high finding is about: their fleet rows say `advice`.
    pub flagged: std::collections::HashSet<CardRef>,
    /// What the next 24 hours of measured demand would do as is and with the advice's
    /// layout changes (a simulation the loop runs off the render path; `None` until then).
    pub projection: Option<crate::simulate::projection::Projection>,
    /// A schedule change due now or within its lead (the loop sets it with the advice).
    pub banner: Option<crate::schedule::group::Banner>,
    /// An unattended schedule's action runs (the console applies them on the simulated
    /// cluster): the operator's own actions wait for it, as it waits for theirs.
    pub auto_busy: bool,
    /// Replaying a recording: where it stands (`None`: live).
    pub replay: Option<super::replay::Replay>,
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
    Request(super::actions::Request),
    /// A dialog closed (redraw): a request typed ahead of its closing is void.
    Dismissed,
    /// Ctrl-Z: give the terminal back and stop, like any job; redraw when continued.
    Suspend,
}

impl UiState {
    pub fn new(read_only: bool, ascii: bool, min_runtime: std::time::Duration, now: DateTime<Utc>) -> Self {
        Self {
            tab: Tab::Fleet,
            open_card: None,
            help: false,
            help_scroll: 0,
            input: Input::Normal,
            filter_text: String::new(),
            filter: Filter::default(),
            sort: SortKey::Node,
            sort_reverse: false,
            open_workload: None,
            rows: Vec::new(),
            queue_rows: Vec::new(),
            workload_rows: Vec::new(),
            selected: [0; 5],
            offset: [0; 5],
            built_from: Vec::new(),
            viewport: 20,
            message: None,
            message_since: None,
            history: HashMap::new(),
            read_only,
            ascii,
            min_runtime,
            queue_wait_threshold: std::time::Duration::from_secs(15 * 60),
            now,
            wall: now,
            last_sample: None,
            totals: crate::model::Totals::default(),
            queue: crate::model::QueueSummary::default(),
            modal: None,
            screen: ratatui::layout::Rect::default(),
            panel: None,
            panel_finding: None,
            quit_after_action: false,
            action_hidden: false,
            told_read_only: false,
            source_count: 0,
            findings: Vec::new(),
            advice_order: crate::advisor::Order::default(),
            flagged: std::collections::HashSet::new(),
            banner: None,
            auto_busy: false,
            replay: None,
            recording: None,
            advice_counts: (0, 0, 0),
            findings_at: None,
            projection: None,
        }
    }

    /// Say `text` in the footer (it goes once shown `MESSAGE_FOR`, or with its view).
    pub fn say(&mut self, text: impl Into<String>) {
        self.message = Some(text.into());
    }

    /// Put a dialog in front (a confirmation, a running action's progress).
    pub fn show_dialog(&mut self, dialog: super::actions::Modal) {
        self.modal = Some(dialog);
    }

    /// Close the dialog in front, if any.
    pub fn close_dialog(&mut self) {
        self.modal = None;
    }

    /// A footer message goes once shown this long (it stayed for minutes, long after what it
    /// said was over). True when one went.
    pub fn expire_message(&mut self, wall: DateTime<Utc>) -> bool {
        const MESSAGE_FOR: i64 = 15;
        match (&self.message, &self.message_since) {
            (None, _) => {
                self.message_since = None;
                false
            }
            (Some(m), Some((seen, at))) if m == seen => {
                if (wall - *at).num_seconds() >= MESSAGE_FOR {
                    self.message = None;
                    self.message_since = None;
                    return true;
                }
                false
            }
            (Some(m), _) => {
                self.message_since = Some((m.clone(), wall));
                false
            }
        }
    }

    /// A new fleet arrived: record history, rebuild rows, keep the selection on its card.
    pub fn on_fleet(&mut self, fleet: &Fleet) {
        if let Some(t) = fleet.taken_at {
            self.now = t;
        }
        // History from a source (Prometheus) seeds a card's sparklines once, before its own samples.
        // Card sparklines: the whole-card series (instance series seed workload activity).
        for h in fleet.history.iter().filter(|h| h.gi.is_none()) {
            on_node_samples(&mut self.history, &h.card.node, |cards| {
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
        let sample = self.last_sample.is_none_or(|t| self.now - t >= chrono::Duration::seconds(1));
        if sample {
            self.last_sample = Some(self.now);
        }
        for n in fleet.nodes.iter().filter(|_| sample) {
            on_node_samples(&mut self.history, &n.name, |cards| {
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
        self.totals = crate::model::Totals::compute(fleet);
        self.source_count = fleet.sources.len();
        self.queue = crate::model::QueueSummary::compute(fleet, self.now);
        self.rebuild(fleet);
    }

    /// The sparkline samples of card `r`, oldest first.
    pub fn samples(&self, r: &CardRef) -> Option<&VecDeque<Sample>> {
        self.history.get(r.node.as_str())?.get(&r.index)
    }

    /// New findings from the advisor: keep the selection in range.
    /// Drop the sparklines' samples (a replay went back or jumped: they belong elsewhere).
    pub fn forget_history(&mut self) {
        self.history.clear();
        self.last_sample = None;
    }

    /// New findings from the advisor: listed in the order asked for, the selection kept on
    /// its finding, the finding the panel shows shown anew or marked gone.
    pub fn on_findings(&mut self, findings: Vec<crate::advisor::Finding>) {
        self.flagged = findings
            .iter()
            .filter(|f| f.severity >= crate::advisor::Severity::Warn)
            .flat_map(|f| f.cards.iter().cloned())
            .collect();
        self.advice_counts = crate::advisor::counts(&findings);
        self.findings_at = Some(self.now);
        self.list_findings(findings);
        self.show_panel_finding();
    }

    /// `findings` in `advice_order`, the selection kept on its finding where it is still listed.
    fn list_findings(&mut self, mut findings: Vec<crate::advisor::Finding>) {
        let kept = self.findings.get(self.selected[4]).map(|x| (x.kind, x.subject.clone()));
        crate::advisor::order(&mut findings, self.advice_order);
        self.findings = findings;
        if let Some(i) = kept.and_then(|(kind, subject)| self.finding_at(kind, &subject)) {
            self.selected[4] = i;
        }
        self.clamp(Tab::Advice);
    }

    /// Where the finding of `kind` about `subject` is listed now.
    pub fn finding_at(&self, kind: crate::advisor::Kind, subject: &crate::advisor::Subject) -> Option<usize> {
        self.findings.iter().position(|x| x.kind == kind && &x.subject == subject)
    }

    /// The Advice view's other order (`s` there), the selection kept on its finding.
    pub fn toggle_advice_order(&mut self) {
        self.advice_order = self.advice_order.toggled();
        self.list_findings(self.findings.clone());
    }

    /// The panel's finding as the latest pass has it, or, gone from it, said to be gone.
    fn show_panel_finding(&mut self) {
        let Some((kind, subject)) = self.panel_finding.clone() else { return };
        match self.finding_at(kind, &subject) {
            Some(i) => self.panel = Some(intents::finding_panel(&self.findings[i])),
            None => {
                if let Some((title, lines)) = self.panel.as_mut()
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
        self.quit_after_action = true;
        self.message = Some("an action is running: tessera quits when it ends (Ctrl-C twice leaves now)".into());
    }

    /// An action is executing (its dialog shows progress and no outcome yet).
    pub fn action_running(&self) -> bool {
        self.auto_busy
            || match &self.modal {
                Some(super::actions::Modal::Running { outcome, .. }) => outcome.is_none(),
                Some(super::actions::Modal::GroupRunning { run, .. }) => !run.finished(),
                _ => false,
            }
    }

    pub fn selected_card(&self) -> Option<CardRef> {
        self.ref_at(self.selected[0])
    }

    /// Rows of data a tab shows: the queue gives part of the body to its demand table.
    pub fn rows_visible(&self, t: Tab) -> usize {
        match t {
            Tab::Queue => self.viewport.saturating_sub(queue_demand_height(self.viewport + 1, self.queue.demand.len())),
            // The list gives part of the body to the selected finding and its own first line.
            Tab::Advice => crate::ui::views::advice::list_rows(self.viewport + 1, self.projection.is_some()),
            _ => self.viewport,
        }
        .max(1)
    }

    /// The terminal changed size: keep the selections in view (no rebuild needed).
    pub fn set_viewport(&mut self, rows: usize) {
        self.viewport = rows;
        for t in Tab::ALL {
            self.clamp(t);
        }
    }

    fn len(&self, t: Tab) -> usize {
        match t {
            Tab::Fleet => self.rows.len(),
            Tab::Queue => self.queue_rows.len(),
            Tab::Workloads => self.workload_rows.len(),
            Tab::Sources => self.source_count,
            Tab::Advice => self.findings.len(),
        }
    }

    fn clamp(&mut self, t: Tab) {
        let i = t.index();
        let len = self.len(t);
        self.selected[i] = self.selected[i].min(len.saturating_sub(1));
        let vp = self.rows_visible(t);
        // A card right under its node heading shows the heading too.
        let top = match (t, self.selected[i].checked_sub(1)) {
            (Tab::Fleet, Some(above)) if matches!(self.rows.get(above), Some(Row::Node(_))) && vp > 1 => above,
            _ => self.selected[i],
        };
        if top < self.offset[i] {
            self.offset[i] = top;
        } else if self.selected[i] >= self.offset[i] + vp {
            self.offset[i] = self.selected[i] + 1 - vp;
        }
        self.offset[i] = self.offset[i].min(len.saturating_sub(vp));
    }

    /// Move the selection by `delta` rows, skipping node headings in the fleet view.
    pub fn step(&mut self, delta: isize) {
        self.step_in(self.tab, delta);
    }

    fn step_in(&mut self, t: Tab, delta: isize) {
        let i = t.index();
        let len = self.len(t);
        if len == 0 {
            return;
        }
        let mut pos = (self.selected[i] as isize + delta).clamp(0, len as isize - 1) as usize;
        if t == Tab::Fleet {
            let dir = if delta < 0 { -1 } else { 1 };
            while matches!(self.rows.get(pos), Some(Row::Node(_))) {
                let next = pos as isize + dir;
                if next < 0 || next >= len as isize {
                    // Nothing beyond: turn around.
                    pos = (pos as isize - dir).clamp(0, len as isize - 1) as usize;
                    if matches!(self.rows.get(pos), Some(Row::Node(_))) && len > 1 {
                        pos = (pos as isize - dir).clamp(0, len as isize - 1) as usize;
                    }
                    break;
                }
                pos = next as usize;
            }
        }
        self.selected[i] = pos;
        self.clamp(t);
    }
}

mod intents;
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
