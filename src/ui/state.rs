//! UI state and the pure key/mouse logic: which view, which row, filter, sort, history.
//! The owner loop feeds it fleets and intents; views only read it.

use std::collections::{HashMap, VecDeque};

use chrono::{DateTime, Utc};

use super::filter::Filter;
use super::keymap::Intent;
use crate::model::capacity::free_units;
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

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub util: Option<f64>,
    pub mem_pct: Option<f64>,
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
    pub message: Option<String>,
    pub history: HashMap<CardRef, VecDeque<Sample>>,
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
    /// The advisor's findings on the latest fleet, most costly first (the loop sets them).
    pub findings: Vec<crate::advisor::Finding>,
    /// Cards some warn or high finding is about: their fleet rows say `advice`.
    pub flagged: std::collections::HashSet<CardRef>,
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
            quit_after_action: false,
            action_hidden: false,
            told_read_only: false,
            source_count: 0,
            findings: Vec::new(),
            flagged: std::collections::HashSet::new(),
        }
    }

    /// A new fleet arrived: record history, rebuild rows, keep the selection on its card.
    pub fn on_fleet(&mut self, fleet: &Fleet) {
        if let Some(t) = fleet.taken_at {
            self.now = t;
        }
        // History from a source (Prometheus) seeds a card's sparklines once, before its own samples.
        for h in &fleet.history {
            let mine = self.history.entry(h.card.clone()).or_default();
            if mine.len() <= 1 {
                let mem = h.mem_pct.iter().copied().chain(std::iter::repeat(None));
                let seeded: Vec<Sample> =
                    h.util.iter().zip(mem).map(|(u, m)| Sample { util: *u, mem_pct: m }).collect();
                let own: Vec<Sample> = mine.drain(..).collect();
                mine.extend(seeded);
                mine.extend(own);
                while mine.len() > HISTORY {
                    mine.pop_front();
                }
            }
        }
        // One sample per second of data time, however often sources merge.
        let sample = self.last_sample.is_none_or(|t| self.now - t >= chrono::Duration::seconds(1));
        if sample {
            self.last_sample = Some(self.now);
        }
        for (n, c) in fleet.cards().filter(|_| sample) {
            let h = self.history.entry(CardRef::new(n.name.clone(), c.index)).or_default();
            let mem_pct = match (c.memory_used_mib, c.memory_total_mib) {
                (Some(u), Some(t)) if t > 0 => Some(u as f64 * 100.0 / t as f64),
                _ => None,
            };
            h.push_back(Sample { util: c.activity_pct(), mem_pct });
            if h.len() > HISTORY {
                h.pop_front();
            }
        }
        self.totals = crate::model::Totals::compute(fleet);
        self.source_count = fleet.sources.len();
        self.queue = crate::model::QueueSummary::compute(fleet, self.now);
        self.rebuild(fleet);
    }

    /// New findings from the advisor: keep the selection in range.
    pub fn on_findings(&mut self, findings: Vec<crate::advisor::Finding>) {
        self.flagged = findings
            .iter()
            .filter(|f| f.severity >= crate::advisor::Severity::Warn)
            .flat_map(|f| f.cards.iter().cloned())
            .collect();
        self.findings = findings;
        self.clamp(Tab::Advice);
    }

    /// Asked to quit while an action runs: leave when it ends (a second request leaves now).
    pub fn quit_when_done(&mut self) {
        self.quit_after_action = true;
        self.message = Some("an action is running: tessera quits when it ends (Ctrl-C twice leaves now)".into());
    }

    /// An action is executing (its dialog shows progress and no outcome yet).
    pub fn action_running(&self) -> bool {
        matches!(&self.modal, Some(super::actions::Modal::Running { outcome: None, .. }))
    }

    pub fn selected_card(&self) -> Option<CardRef> {
        self.ref_at(self.selected[0])
    }

    /// Rebuild the row lists from the fleet, the filter and the sort.
    pub fn rebuild(&mut self, fleet: &Fleet) {
        let keep = self.ref_at(self.selected[0]);
        let mut cards: Vec<(usize, usize)> = Vec::new();
        for (ni, n) in fleet.nodes.iter().enumerate() {
            for (ci, c) in n.cards.iter().enumerate() {
                if self.filter.is_empty() || self.filter.matches(fleet, n, c) {
                    cards.push((ni, ci));
                }
            }
        }
        self.rows.clear();
        if self.sort == SortKey::Node {
            let mut last = None;
            for (ni, ci) in cards {
                if last != Some(ni) {
                    self.rows.push(Row::Node(ni));
                    last = Some(ni);
                }
                self.rows.push(Row::Card(ni, ci));
            }
        } else {
            let key = |&(ni, ci): &(usize, usize)| -> f64 {
                let c = &fleet.nodes[ni].cards[ci];
                match self.sort {
                    SortKey::Util => c.activity_pct().unwrap_or(-1.0),
                    SortKey::Memory => c.memory_used_mib.map_or(-1.0, |m| m as f64),
                    SortKey::Temp => c.temperature_c.unwrap_or(-1.0),
                    SortKey::Power => c.power_w.unwrap_or(-1.0),
                    SortKey::Free => f64::from(free_units(&fleet.nodes[ni], c)),
                    SortKey::Health => f64::from(u8::from(c.health.fault().is_some()) * 2 + u8::from(c.draining)),
                    SortKey::Node => 0.0,
                }
            };
            let mut keyed: Vec<(f64, (usize, usize))> = cards.into_iter().map(|c| (key(&c), c)).collect();
            // Largest first (htop's habit); reversed, smallest first. Ties keep fleet order.
            let reverse = self.sort_reverse;
            keyed.sort_by(|a, b| {
                let by = if reverse { a.0.total_cmp(&b.0) } else { b.0.total_cmp(&a.0) };
                by.then(a.1.cmp(&b.1))
            });
            self.rows.extend(keyed.into_iter().map(|(_, (n, c))| Row::Card(n, c)));
        }
        let shown = |i: &usize| self.filter.is_empty() || self.filter.matches_workload(fleet, &fleet.workloads[*i]);
        let mut pending: Vec<usize> = (0..fleet.workloads.len())
            .filter(|&i| fleet.workloads[i].state == WorkloadState::Pending)
            .filter(shown)
            .collect();
        pending.sort_by_key(|&i| {
            let w = &fleet.workloads[i];
            (std::cmp::Reverse(w.priority), w.submitted_at, i)
        });
        self.queue_rows = pending;
        let mut active: Vec<usize> =
            (0..fleet.workloads.len()).filter(|&i| fleet.workloads[i].state.is_active()).filter(shown).collect();
        active.sort_by(|&a, &b| {
            let (wa, wb) = (&fleet.workloads[a], &fleet.workloads[b]);
            (&wa.node, wa.cards.first()).cmp(&(&wb.node, wb.cards.first())).then(a.cmp(&b))
        });
        self.workload_rows = active;
        if let Some(r) = keep
            && let Some(pos) = self.rows.iter().position(|row| match row {
                Row::Card(ni, ci) => {
                    fleet.nodes[*ni].name == r.node
                        && fleet.nodes[*ni].cards.get(*ci).is_some_and(|c| c.index == r.index)
                }
                Row::Node(_) => false,
            })
        {
            self.selected[0] = pos;
        }
        for t in Tab::ALL {
            self.clamp(t);
        }
        if matches!(self.rows.get(self.selected[0]), Some(Row::Node(_))) {
            self.step_in(Tab::Fleet, 1);
        }
        self.built_from =
            fleet.nodes.iter().map(|n| (n.name.clone(), n.cards.iter().map(|c| c.index).collect())).collect();
    }

    /// The card on fleet row `row`, by identity.
    fn ref_at(&self, row: usize) -> Option<CardRef> {
        let Row::Card(ni, ci) = *self.rows.get(row)? else { return None };
        let (name, cards) = self.built_from.get(ni)?;
        Some(CardRef::new(name.clone(), *cards.get(ci)?))
    }

    /// Rows of data a tab shows: the queue gives part of the body to its demand table.
    pub fn rows_visible(&self, t: Tab) -> usize {
        match t {
            Tab::Queue => self.viewport.saturating_sub(queue_demand_height(self.viewport + 1, self.queue.demand.len())),
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

    /// Apply an intent from the keymap.
    pub fn apply(&mut self, intent: Intent, fleet: &Fleet) -> Effect {
        let page = self.viewport.max(1) as isize;
        if self.help {
            // The help is in front: moving keys scroll it, not the list behind it.
            let by: isize = match intent {
                Intent::Up => -1,
                Intent::Down => 1,
                Intent::PageUp => -page,
                Intent::PageDown => page,
                Intent::Top => isize::MIN / 2,
                Intent::Bottom => isize::MAX / 2,
                _ => 0,
            };
            if by != 0 {
                // The box shows the body's rows plus one (see views/help.rs).
                let last = super::views::help::line_count(self.read_only).saturating_sub(self.viewport + 1);
                self.help_scroll = self.help_scroll.saturating_add_signed(by).min(last);
                return Effect::Redraw;
            }
        }
        match intent {
            Intent::Quit if self.action_running() => self.quit_when_done(),
            Intent::Quit => return Effect::Quit,
            Intent::ShowAction => {
                if self.action_hidden {
                    self.action_hidden = false;
                } else if self.tab == Tab::Advice {
                    // The selected finding's suggestion, through the same plan and confirmation.
                    match self.findings.get(self.selected[4]).and_then(|f| f.suggestion.action()) {
                        Some(action) if !self.read_only && !self.action_running() => {
                            return Effect::Request(super::actions::Request::Plan(action.clone()));
                        }
                        Some(_) if self.read_only => self.message = Some("read-only: actions are off".into()),
                        Some(_) => self.message = Some("an action is running: start the next when it ends".into()),
                        None => self.message = Some("this finding suggests nothing tessera can do itself".into()),
                    }
                } else {
                    self.message = Some("no action is running (a acts on advice in the Advice view, 5)".into());
                }
            }
            Intent::Help => {
                self.help = !self.help;
                self.help_scroll = 0;
            }
            Intent::Back => {
                if self.help {
                    self.help = false;
                } else if self.open_card.is_some() {
                    self.open_card = None;
                } else if self.open_workload.is_some() {
                    self.open_workload = None;
                } else if !self.filter_text.is_empty() {
                    self.set_filter(String::new(), fleet);
                } else if self.tab != Tab::Fleet {
                    self.switch(Tab::Fleet);
                } else {
                    self.message = None;
                }
            }
            Intent::Filter => self.input = Input::Filter(self.filter_text.clone()),
            Intent::Command => self.input = Input::Command(String::new()),
            Intent::Up => self.step(-1),
            Intent::Down => self.step(1),
            Intent::PageUp => self.step(-page),
            Intent::PageDown => self.step(page),
            Intent::Top => self.step(-(self.len(self.tab) as isize)),
            Intent::Bottom => self.step(self.len(self.tab) as isize),
            Intent::Open => {
                let row =
                    |rows: &[usize], i: usize| rows.get(i).and_then(|&w| fleet.workloads.get(w)).map(|w| w.id.clone());
                match self.tab {
                    Tab::Fleet => self.open_card = self.selected_card(),
                    Tab::Queue => self.open_workload = row(&self.queue_rows, self.selected[1]),
                    Tab::Workloads => self.open_workload = row(&self.workload_rows, self.selected[2]),
                    Tab::Sources | Tab::Advice => {}
                }
            }
            Intent::NextView => self.switch(Tab::ALL[(self.tab.index() + 1) % Tab::ALL.len()]),
            Intent::ViewFleet => self.switch(Tab::Fleet),
            Intent::ViewQueue => self.switch(Tab::Queue),
            Intent::ViewWorkloads => self.switch(Tab::Workloads),
            Intent::ViewSources => self.switch(Tab::Sources),
            Intent::ViewAdvice => self.switch(Tab::Advice),
            Intent::Sort => {
                self.sort = self.sort.next();
                self.message = Some(format!("sorted by {}", self.sort.name()));
                self.rebuild(fleet);
            }
            Intent::ReverseSort => {
                self.sort_reverse = !self.sort_reverse;
                let way = if self.sort_reverse { "smallest first" } else { "largest first" };
                self.message = Some(format!("sorted by {}, {way}", self.sort.name()));
                self.rebuild(fleet);
            }
            Intent::Drain | Intent::Undrain | Intent::Repartition | Intent::Preempt | Intent::ForcePreempt => {
                if let Some(r) = super::actions::on_intent(self, intent, fleet) {
                    return Effect::Request(r);
                }
            }
        }
        Effect::Redraw
    }

    fn switch(&mut self, t: Tab) {
        self.tab = t;
        self.open_card = None;
        self.open_workload = None;
        self.help = false;
    }

    pub fn set_filter(&mut self, text: String, fleet: &Fleet) {
        self.filter = Filter::parse(&text);
        self.filter_text = text;
        for i in 0..3 {
            self.selected[i] = 0;
            self.offset[i] = 0;
        }
        self.rebuild(fleet);
        self.step(0);
    }

    /// Run a `:` command. Unknown commands say so in the message line.
    pub fn command(&mut self, text: &str, fleet: &Fleet) -> Effect {
        let mut words = text.split_whitespace();
        match (words.next(), words.next()) {
            (Some("q" | "quit"), _) => return Effect::Quit,
            (Some("fleet"), _) => self.switch(Tab::Fleet),
            (Some("queue"), _) => self.switch(Tab::Queue),
            (Some("workloads" | "wl"), _) => self.switch(Tab::Workloads),
            (Some("sources" | "src"), _) => self.switch(Tab::Sources),
            (Some("advice" | "advise"), _) => self.switch(Tab::Advice),
            (Some("node"), Some(name)) => {
                self.switch(Tab::Fleet);
                if !self.filter_text.is_empty() {
                    self.set_filter(String::new(), fleet);
                }
                let pos = self.rows.iter().position(|r| match r {
                    Row::Card(ni, _) => fleet.nodes[*ni].name == name,
                    Row::Node(_) => false,
                });
                match pos {
                    Some(p) => {
                        self.selected[0] = p;
                        // Show the node heading too.
                        self.offset[0] = p.saturating_sub(1);
                        self.clamp(Tab::Fleet);
                    }
                    None => self.message = Some(format!("no node named {name}")),
                }
            }
            (Some(other), _) => {
                self.message = Some(format!("unknown command :{other} (try :node NAME, :queue, :sources, :q)"))
            }
            (None, _) => {}
        }
        Effect::Redraw
    }

    /// A click on body row `y` (0 = first data row) selects it.
    pub fn click(&mut self, y: usize) {
        if y >= self.rows_visible(self.tab) || self.help || self.open_card.is_some() {
            return;
        }
        let i = self.tab.index();
        let target = self.offset[i] + y;
        if target < self.len(self.tab) && !matches!(self.rows.get(target), Some(Row::Node(_)) if self.tab == Tab::Fleet)
        {
            self.selected[i] = target;
            self.clamp(self.tab);
        }
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;

/// Lines the queue view gives its demand table in a body of `body_height` lines.
pub fn queue_demand_height(body_height: usize, demand_rows: usize) -> usize {
    if body_height >= 12 { (demand_rows + 2).min(body_height / 2) } else { 0 }
}
