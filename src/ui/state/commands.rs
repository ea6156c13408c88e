//! What `:` commands do to the console's state: views by name, `:node` to find a node's
//! cards, `:fit` to ask where a shape or a workload would fit.

use super::*;

impl UiState {
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
            (Some("node"), Some(name)) => self.go_to_node(name, fleet),
            (Some("fit"), _) => self.fit(text.trim_start().strip_prefix("fit").unwrap_or_default().trim(), fleet),
            (Some(other), _) => {
                self.footer.message =
                    Some(format!("unknown command :{other} (try :node NAME, :fit 3g.40gb|4|WORKLOAD, :queue, :q)"))
            }
            (None, _) => {}
        }
        Effect::Redraw
    }

    /// `:node NAME`: the fleet view, unfiltered, at the node's first card with its heading.
    fn go_to_node(&mut self, name: &str, fleet: &Fleet) {
        let Some(name) = self.node_named(name, fleet) else { return };
        self.switch(Tab::Fleet);
        if !self.filter.text.is_empty() {
            self.set_filter(String::new(), fleet);
        }
        let pos = self.fleet.list.rows.iter().position(|r| match r {
            Row::Card(ni, _) => fleet.nodes[*ni].name == name,
            Row::Node(_) => false,
        });
        match pos {
            Some(p) => {
                self.fleet.list.selected = p;
                // Show the node heading too.
                self.fleet.list.offset = p.saturating_sub(1);
                self.clamp(Tab::Fleet);
            }
            None => self.footer.message = Some(format!("no node named {name}")),
        }
    }

    /// The node `name` names: the whole name, else the one node it begins; else say why not.
    fn node_named<'f>(&mut self, name: &str, fleet: &'f Fleet) -> Option<&'f str> {
        if let Some(n) = fleet.nodes.iter().find(|n| n.name == name) {
            return Some(n.name.as_str());
        }
        let starting: Vec<&str> = fleet.nodes.iter().map(|n| n.name.as_str()).filter(|n| n.starts_with(name)).collect();
        match starting.as_slice() {
            [one] => return Some(one),
            [] => self.footer.message = Some(format!("no node named {name}")),
            many => {
                let shown: Vec<&str> = many.iter().take(4).copied().collect();
                let more = if many.len() > 4 { ", ..." } else { "" };
                self.footer.message = Some(format!(
                    "{name} begins {} ({}{more}): type more of the name",
                    crate::units::count(many.len() as u64, "node", "nodes"),
                    shown.join(", ")
                ));
            }
        }
        None
    }

    /// `:fit QUERY`: where a shape, a count of cards or a workload would fit, in the panel.
    fn fit(&mut self, query: &str, fleet: &Fleet) {
        match crate::advisor::fit::answer(fleet, query, self.clock.now, self.settings.min_runtime) {
            Ok(a) => {
                // A running workload has its place: say so, then where another like it
                // would fit (it was answered as if it waited).
                let running = fleet
                    .workload(query)
                    .or_else(|| fleet.workloads.iter().find(|w| w.name == query))
                    .filter(|w| w.state == crate::model::WorkloadState::Running);
                let title = match running {
                    Some(w) => {
                        let on: Vec<String> = w.cards.iter().map(ToString::to_string).collect();
                        let on = if on.is_empty() { "its cards".to_string() } else { on.join(", ") };
                        format!("{} runs on {on} now; where another {} would fit", w.id, a.wants)
                    }
                    None => format!("where it fits: {}", a.wants),
                };
                self.advice.panel = Some((title, crate::advisor::fit::lines(&a)));
                self.advice.panel_finding = None;
            }
            Err(e) => self.footer.message = Some(e.to_string()),
        }
    }
}
