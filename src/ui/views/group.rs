//! The schedule banner above the view, and the group change's dialogs: the plan for every card
//! with the confirmation question, then the run card by card with the action under way.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::schedule::group::{CardState, GroupRun};
use crate::ui::dialogs::{Modal, StepState};
use crate::ui::state::UiState;
use crate::ui::theme::Theme;
use crate::ui::widgets::text::fit;

/// The banner line: the due change, and the key that reviews it.
pub fn banner(f: &mut Frame, area: Rect, st: &UiState, theme: &Theme) {
    let Some(b) = &st.advice.banner else { return };
    let key = if st.settings.read_only { "" } else { " · m reviews the plan" };
    let dot = if theme.ascii { " - " } else { " · " };
    let text = format!(" {}{key} ", b.text(st.clock.now)).replace(" · ", dot);
    let style = theme.fg(theme.c.warning).add_modifier(Modifier::BOLD | Modifier::REVERSED);
    let w = usize::from(area.width);
    let line = format!("{:<w$}", fit(&text, w, theme.ascii));
    f.render_widget(Paragraph::new(Line::from(Span::styled(line, style))), area);
}

/// The dialog's title and lines for a group modal, `rows` high and `width` wide inside.
pub fn lines(modal: &Modal, theme: &Theme, rows: usize, width: usize) -> (&'static str, Vec<Line<'static>>) {
    match modal {
        Modal::GroupRunning { run, current } => {
            (" schedule change running ", run_lines(run, current, theme, rows, width))
        }
        _ => (" ", Vec::new()),
    }
}

fn run_lines(
    run: &GroupRun,
    current: &Option<(Box<crate::actions::Plan>, Vec<StepState>)>,
    theme: &Theme,
    rows: usize,
    width: usize,
) -> Vec<Line<'static>> {
    let fit = |s: &str| fit(s, width, theme.ascii);
    let mut lines = vec![Line::from(Span::styled(fit(&run.summary()), theme.title()))];
    let at = run.at_card().cloned();
    // Rows for cards: the rest goes to the action under way, its last result and the keys.
    let room = rows.saturating_sub(6);
    let pos = at.as_ref().and_then(|a| run.plan.cards.iter().position(|c| c.card == *a)).unwrap_or(0);
    let skip = pos.saturating_sub(room.saturating_sub(1) / 2).min(run.plan.cards.len().saturating_sub(room));
    for (c, s) in run.plan.cards.iter().zip(&run.state).skip(skip).take(room) {
        let here = at.as_ref() == Some(&c.card) && !run.finished();
        let (mark, style) = match s {
            CardState::Changed => ("ok", theme.fg(theme.c.util_low)),
            CardState::Failed(_) => ("!!", theme.fg(theme.c.danger)),
            CardState::Left(_) => ("--", theme.fg(theme.c.warning)),
            _ if here => ("..", theme.text()),
            _ => ("  ", theme.dim()),
        };
        let waits = run.waiting.as_ref().filter(|_| here).map(|w| format!(" · {w}")).unwrap_or_default();
        lines.push(Line::from(Span::styled(
            fit(&format!("{mark} {:<16} {}{waits}", c.card.to_string(), s.text())),
            style,
        )));
    }
    if let Some((plan, status)) = current {
        let i = status.iter().position(|s| matches!(s, StepState::Running { .. })).unwrap_or(0);
        let what = plan.steps.get(i).map_or("", |s| s.what.as_str());
        lines.push(Line::from(Span::styled(
            fit(&format!("now: step {}/{} {what} · {}", i + 1, status.len(), plan.summary)),
            theme.text(),
        )));
    }
    if let Some(last) = run.log.last() {
        lines.push(Line::from(Span::styled(fit(&format!("last: {last}")), theme.dim())));
    }
    let keys = if run.finished() {
        "Enter or Esc closes (every action is in the audit log)"
    } else {
        "x stops after the action under way (gives back its drains) · Esc hides (a shows it again)"
    };
    lines.push(Line::from(Span::styled(fit(keys), theme.dim().add_modifier(Modifier::BOLD))));
    lines
}
