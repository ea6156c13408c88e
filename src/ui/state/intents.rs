//! What keys and `:` commands do to the UI state: the keymap's intents, the filter, the
//! command line and mouse clicks. Pure: effects the loop must perform come back as `Effect`.

use super::*;
use crate::advisor::Suggestion;

impl UiState {
    /// Apply an intent from the keymap: each kind of key to its handler.
    pub fn apply(&mut self, intent: Intent, fleet: &Fleet) -> Effect {
        if let Some(e) = self.scroll_help(intent) {
            return e;
        }
        match intent {
            Intent::Quit | Intent::Suspend => return self.leave(intent),
            Intent::ShowAction => return self.show_action().unwrap_or(Effect::Redraw),
            Intent::Help | Intent::Filter | Intent::Command => self.begin(intent),
            Intent::Back => self.back(fleet),
            Intent::Up | Intent::Down | Intent::PageUp | Intent::PageDown | Intent::Top | Intent::Bottom => {
                self.navigate(intent)
            }
            Intent::Open => self.open(fleet),
            Intent::NextView => self.switch(Tab::ALL[(self.tab.index() + 1) % Tab::ALL.len()]),
            Intent::ViewFleet
            | Intent::ViewQueue
            | Intent::ViewWorkloads
            | Intent::ViewSources
            | Intent::ViewAdvice => self.switch(view_of(intent)),
            Intent::Sort | Intent::ReverseSort => self.sort_by(intent, fleet),
            Intent::ScheduleChange => return self.schedule_change(),
            Intent::ReplayPause
            | Intent::ReplayBack
            | Intent::ReplayForward
            | Intent::ReplaySlower
            | Intent::ReplayFaster
            | Intent::ReplayGoto => return super::replay_keys::apply(self, intent),
            Intent::Drain
            | Intent::DrainEvict
            | Intent::Undrain
            | Intent::Repartition
            | Intent::Preempt
            | Intent::ForcePreempt => {
                return super::action_keys::on_intent(self, intent, fleet).map_or(Effect::Redraw, Effect::Request);
            }
        }
        Effect::Redraw
    }

    /// Quit (once an action running ends) or suspend.
    fn leave(&mut self, intent: Intent) -> Effect {
        match intent {
            Intent::Quit if self.action_running() => self.quit_when_done(),
            Intent::Quit => return Effect::Quit,
            _ => return Effect::Suspend,
        }
        Effect::Redraw
    }

    /// The help toggled, or a line to type opened: the filter (as it stands) or a command.
    fn begin(&mut self, intent: Intent) {
        match intent {
            Intent::Help => {
                self.open.help = !self.open.help;
                self.open.help_scroll = 0;
            }
            Intent::Filter => self.input = Input::Filter(self.filter.text.clone()),
            _ => self.input = Input::Command(String::new()),
        }
    }

    /// A moving key: the selection moves in the view (in a card's view j/k go to the
    /// previous and next card).
    fn navigate(&mut self, intent: Intent) {
        let page = self.screen.body.max(1) as isize;
        let all = self.len(self.tab) as isize;
        let by = match intent {
            Intent::Up => -1,
            Intent::Down => 1,
            Intent::PageUp => -page,
            Intent::PageDown => page,
            Intent::Top => -all,
            _ => all,
        };
        if self.open.card.is_some() && self.tab == Tab::Fleet && matches!(intent, Intent::Up | Intent::Down) {
            self.step(by);
            self.open.card = self.selected_card();
        } else {
            self.step(by);
        }
    }

    /// The banner's key: plan the schedule change that is due, unless an action runs.
    fn schedule_change(&mut self) -> Effect {
        match &self.advice.banner {
            _ if self.action_running() => self.say("an action is running: start the next when it ends"),
            Some(b) => return Effect::Request(crate::ui::dialogs::Request::PlanGroup(b.schedule.clone())),
            None => self.say("no schedule change is due (tessera schedule shows the timeline)"),
        }
        Effect::Redraw
    }

    /// With the help in front, moving keys scroll it, not the list behind it.
    fn scroll_help(&mut self, intent: Intent) -> Option<Effect> {
        let page = self.screen.body.max(1) as isize;
        if self.open.help {
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
                // The box shows the screen's rows less three (see views/help.rs), its lines
                // wrapped to the screen's width; before a frame is drawn, the body's rows plus one.
                let room = match self.screen.area.height {
                    0 => self.screen.body + 1,
                    h => usize::from(h.saturating_sub(3)).max(1),
                };
                let last = crate::ui::views::help::line_count(
                    self.settings.read_only,
                    self.replay.is_some(),
                    self.screen.area.width,
                )
                .saturating_sub(room);
                self.open.help_scroll = self.open.help_scroll.saturating_add_signed(by).min(last);
                return Some(Effect::Redraw);
            }
        }
        None
    }

    /// `a`: the shown or selected finding's suggestion, planned (in the Advice view); else say
    /// why nothing is done.
    fn show_action(&mut self) -> Option<Effect> {
        if self.dialog.hidden {
            self.dialog.hidden = false;
        } else if self.tab == Tab::Advice {
            // The shown or selected finding's suggestion as the latest advice pass has
            // it, through the same plan and confirmation; a finding no longer listed is
            // not acted on.
            let shown = match (&self.advice.panel, &self.advice.panel_finding) {
                (Some(_), Some((kind, subject))) => Some(self.finding_at(*kind, subject)),
                // Another panel (`:fit`'s answer) suggests nothing.
                (Some(_), None) => Some(None),
                (None, _) => None,
            };
            let gone = shown == Some(None) && self.advice.panel_finding.is_some();
            let at = shown.unwrap_or(Some(self.advice.list.selected));
            let suggestion = at.and_then(|i| self.advice.list.rows.get(i)).map(|x| x.suggestion.clone());
            match suggestion {
                // A replay shows what was advised then; nothing is acted on from it.
                _ if self.replay.is_some() => {
                    self.footer.message =
                        Some("a replay is read-only: it shows what was advised then (act in the live console)".into())
                }
                _ if gone => {
                    self.footer.message = Some(format!("{GONE}: the latest advice no longer has it, nothing to act on"))
                }
                Some(Suggestion::Action { action, .. }) if !self.settings.read_only && !self.action_running() => {
                    return Some(Effect::Request(crate::ui::dialogs::Request::Plan(action)));
                }
                Some(Suggestion::Action { .. }) if self.settings.read_only => {
                    self.footer.message = Some("read-only: actions are off".into())
                }
                Some(Suggestion::Action { .. }) => {
                    self.footer.message = Some("an action is running: start the next when it ends".into())
                }
                Some(Suggestion::InProgress { text, .. }) => {
                    self.footer.message = Some(format!("in progress: {text}; nothing to do until it lands"))
                }
                Some(Suggestion::Words { .. }) | None => {
                    self.footer.message = Some("this finding suggests nothing tessera can do itself".into())
                }
            }
        } else {
            self.footer.message = Some("no action is running (a acts on advice in the Advice view, 5)".into());
        }
        None
    }

    /// `Esc`: close what is in front, else clear the filter, else go back to the fleet.
    fn back(&mut self, fleet: &Fleet) {
        if self.open.help {
            self.open.help = false;
        } else if self.advice.panel.is_some() {
            self.advice.panel = None;
            self.advice.panel_finding = None;
        } else if self.open.card.is_some() {
            self.open.card = None;
        } else if self.open.workload.is_some() {
            self.open.workload = None;
        } else if !self.filter.text.is_empty() {
            self.set_filter(String::new(), fleet);
        } else if self.tab != Tab::Fleet {
            self.switch(Tab::Fleet);
        } else {
            self.footer.message = None;
        }
    }

    /// `Enter`: open the selected row (a card, a workload, a finding's detail).
    fn open(&mut self, fleet: &Fleet) {
        let row = |rows: &[usize], i: usize| rows.get(i).and_then(|&w| fleet.workloads.get(w)).map(|w| w.id.clone());
        match self.tab {
            Tab::Fleet => self.open.card = self.selected_card(),
            Tab::Queue => self.open.workload = row(&self.queue.list.rows, self.queue.list.selected),
            Tab::Workloads => self.open.workload = row(&self.workloads.rows, self.workloads.selected),
            Tab::Advice => {
                if let Some(x) = self.advice.list.rows.get(self.advice.list.selected) {
                    self.advice.panel = Some(advice::finding_panel(x));
                    self.advice.panel_finding = Some((x.kind, x.subject.clone()));
                }
            }
            Tab::Sources => {}
        }
    }

    /// `s` and `S`: the next sort or the reverse order; in the Advice view, severity or cost.
    fn sort_by(&mut self, intent: Intent, fleet: &Fleet) {
        match intent {
            // In the Advice view: the most severe first, or the most costly.
            Intent::Sort | Intent::ReverseSort if self.tab == Tab::Advice => {
                self.toggle_advice_order();
                let other = self.advice.order.toggled().as_str();
                self.footer.message = Some(format!("advice: {} (s: {other})", self.advice.order.as_str()));
            }
            Intent::Sort => {
                self.fleet.sort = self.fleet.sort.next();
                self.footer.message = Some(format!("sorted by {}", self.fleet.sort.name()));
                self.rebuild(fleet);
            }
            Intent::ReverseSort => {
                self.fleet.reverse = !self.fleet.reverse;
                let way = if self.fleet.reverse { "smallest first" } else { "largest first" };
                self.footer.message = Some(format!("sorted by {}, {way}", self.fleet.sort.name()));
                self.rebuild(fleet);
            }
            _ => {}
        }
    }

    pub(super) fn switch(&mut self, t: Tab) {
        // A finding's detail belongs to the Advice view: it does not stay over another.
        if t != Tab::Advice && self.advice.panel_finding.take().is_some() {
            self.advice.panel = None;
        }
        // A message says something about the view it was given in ("sorted by free", a
        // filter's problem): it does not follow the operator to another.
        if t != self.tab {
            self.footer.message = None;
        }
        self.tab = t;
        self.open.card = None;
        self.open.workload = None;
        self.open.help = false;
    }

    pub fn set_filter(&mut self, text: String, fleet: &Fleet) {
        self.filter.parsed = Filter::parse(&text);
        self.filter.text = text;
        for t in [Tab::Fleet, Tab::Queue, Tab::Workloads] {
            on_list!(self, t, l => {
                l.selected = 0;
                l.offset = 0;
            });
        }
        self.rebuild(fleet);
        self.step(0);
    }

    /// A click on body row `y` (0 = first data row) selects it.
    pub fn click(&mut self, y: usize) {
        if y >= self.rows_visible(self.tab) || self.open.help || self.open.card.is_some() {
            return;
        }
        let vp = self.rows_visible(self.tab);
        on_list!(self, self.tab, l => l.click(y, vp));
    }
}

/// The view a view key goes to.
fn view_of(intent: Intent) -> Tab {
    match intent {
        Intent::ViewQueue => Tab::Queue,
        Intent::ViewWorkloads => Tab::Workloads,
        Intent::ViewSources => Tab::Sources,
        Intent::ViewAdvice => Tab::Advice,
        _ => Tab::Fleet,
    }
}
