//! The footer: the filter or command being typed, a message, or key hints from the keymap.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::ui::keymap::{bindings_for, label};
use crate::ui::state::{Input, SortKey, Tab, UiState};
use crate::ui::theme::Theme;
use crate::ui::widgets::text::fit;

pub fn hints(read_only: bool, replay: bool) -> String {
    hints_in(read_only, replay, Tab::Fleet)
}

/// The hints for `tab`: the Advice view acts with `a` on the selected finding, where the card
/// and workload keys (`d r p`) act on nothing.
pub fn hints_in(read_only: bool, replay: bool, tab: Tab) -> String {
    use crate::ui::keymap::Intent;
    let card_keys = [Intent::Drain, Intent::Repartition, Intent::Preempt];
    bindings_for(read_only, replay)
        .filter(|b| match tab {
            Tab::Advice => (b.footer && !card_keys.contains(&b.intent)) || b.intent == Intent::ShowAction,
            _ => b.footer,
        })
        .map(|b| {
            let what = if b.intent == Intent::ShowAction { "act" } else { short_in(b.description, replay) };
            format!("{} {what}", label(b, replay))
        })
        .collect::<Vec<_>>()
        .join("  ")
}

/// The first word of a description ("help: every key" -> "help"); the replay's keys by what
/// they do ("replay: pause or play" -> "pause").
fn short_in(d: &str, replay: bool) -> &str {
    let d = if replay { d.strip_prefix("replay: ").unwrap_or(d) } else { d };
    d.split([':', ' ']).next().unwrap_or(d)
}

pub fn draw(f: &mut Frame, area: Rect, st: &UiState, theme: &Theme) {
    if area.height == 0 {
        return;
    }
    let w = usize::from(area.width);
    let line = match &st.input {
        Input::Filter(s) => Line::from(vec![
            Span::styled("/", theme.title()),
            Span::styled(format!("{s}_"), theme.text()),
            Span::styled("  Enter apply, Esc cancel", theme.dim()),
        ]),
        Input::Goto(s) => Line::from(vec![
            Span::styled("go to ", theme.title()),
            Span::styled(format!("{s}_"), theme.text()),
            Span::styled("  03:12, 2026-11-30 03:12, -10m; Enter go, Esc cancel", theme.dim()),
        ]),
        Input::Command(s) => Line::from(vec![
            Span::styled(":", theme.title()),
            Span::styled(format!("{s}_"), theme.text()),
            Span::styled(
                "  node NAME (Tab completes), fit PROFILE|GPUS|WORKLOAD, fleet, queue, workloads, sources, advice, q",
                theme.dim(),
            ),
        ]),
        Input::Normal => {
            let mut status = Vec::new();
            if !st.filter.text.is_empty() {
                let problems = st.filter.parsed.problems();
                if problems.is_empty() {
                    status.push(format!("filter: {}", st.filter.text));
                } else {
                    status.push(format!("filter: {} ({})", st.filter.text, problems.join("; ")));
                }
            }
            // The fleet's sort; the Advice view says its own order on its first line; a message
            // that says the sort just chosen says it once ("sort: free · sorted by free").
            let said = st.footer.message.as_deref().is_some_and(|m| m.starts_with("sorted by "));
            if st.fleet.sort != SortKey::Node && st.tab != Tab::Advice && !said {
                status.push(format!("sort: {}", st.fleet.sort.name()));
            }
            if let Some(line) = st
                .dialog
                .modal
                .as_ref()
                .filter(|_| st.dialog.hidden)
                .and_then(|m| crate::ui::dialogs::progress_line(m, st.clock.wall))
            {
                status.push(line);
            }
            if let Some(m) = &st.footer.message {
                status.push(m.clone());
            }
            let (dot, bar) = if theme.ascii { (" - ", " | ") } else { (" · ", " │ ") };
            let left = status.join(dot);
            let right = hints_in(st.settings.read_only, st.replay.is_some(), st.tab);
            let text = if left.is_empty() { right } else { format!("{left}{bar}{right}") };
            Line::from(Span::styled(fit(&text, w, theme.ascii), theme.dim()))
        }
    };
    f.render_widget(Paragraph::new(line), area);
}
