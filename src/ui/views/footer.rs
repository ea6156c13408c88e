//! The footer: the filter or command being typed, a message, or key hints from the keymap.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::ui::keymap::bindings;
use crate::ui::state::{Input, SortKey, UiState};
use crate::ui::theme::Theme;
use crate::ui::widgets::text::fit;

pub fn hints(read_only: bool) -> String {
    bindings(read_only)
        .filter(|b| b.footer)
        .map(|b| format!("{} {}", b.label, short(b.description)))
        .collect::<Vec<_>>()
        .join("  ")
}

/// The first word of a description ("help: every key" -> "help").
fn short(d: &str) -> &str {
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
        Input::Command(s) => Line::from(vec![
            Span::styled(":", theme.title()),
            Span::styled(format!("{s}_"), theme.text()),
            Span::styled("  node NAME, fleet, queue, workloads, sources, q", theme.dim()),
        ]),
        Input::Normal => {
            let mut status = Vec::new();
            if !st.filter_text.is_empty() {
                status.push(format!("filter: {}", st.filter_text));
            }
            if st.sort != SortKey::Node {
                status.push(format!("sort: {}", st.sort.name()));
            }
            if let Some(line) = st
                .modal
                .as_ref()
                .filter(|_| st.action_hidden)
                .and_then(|m| crate::ui::actions::progress_line(m, st.wall))
            {
                status.push(line);
            }
            if let Some(m) = &st.message {
                status.push(m.clone());
            }
            let (dot, bar) = if theme.ascii { (" - ", " | ") } else { (" · ", " │ ") };
            let left = status.join(dot);
            let right = hints(st.read_only);
            let text = if left.is_empty() { right } else { format!("{left}{bar}{right}") };
            Line::from(Span::styled(fit(&text, w, theme.ascii), theme.dim()))
        }
    };
    f.render_widget(Paragraph::new(line), area);
}
