//! The action dialogs drawn over the view: the repartition picker (current and chosen layout
//! as MIG bars), the confirmation rendered from the plan, and the progress of a running action.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use crate::model::{Card, Fleet};
use crate::ui::dialogs::{Modal, StepState};
use crate::ui::sheet::Tone;
use crate::ui::theme::Theme;
use crate::ui::widgets::mig_bar::mig_bar;
use crate::ui::widgets::text::fit;

pub fn draw(f: &mut Frame, area: Rect, modal: &Modal, fleet: &Fleet, theme: &Theme) {
    let r = crate::ui::sheet::frame(area);
    let (w, h) = (r.width, r.height);
    let inner = usize::from(w.saturating_sub(2));
    let (title, lines) = match modal {
        // Confirmations: the sheet the keys go by (every row whole, wrapped already).
        Modal::Confirm { .. } | Modal::Group { .. } => {
            let Some((sheet, scroll)) = crate::ui::dialogs::confirmation(modal) else { return };
            let shown = crate::ui::sheet::show(&sheet, area, scroll);
            let title = if matches!(modal, Modal::Group { .. }) { " schedule change " } else { " confirm " };
            (title, shown.rows.into_iter().map(|(t, tone)| row(t, tone, theme)).collect())
        }
        Modal::GroupRunning { .. } => super::group::lines(modal, theme, usize::from(h.saturating_sub(2)), inner),
        Modal::Picker { card, choices, selected, current } => {
            (" repartition ", picker_lines(card, choices, *selected, current, fleet, theme, (inner, h)))
        }
        Modal::Running { plan, status, outcome } => {
            (" running ", running_lines(plan, status, outcome.as_ref(), theme, (inner, h)))
        }
    };
    // A confirmation or a running action is as tall as what it says (a 5-line plan is no
    // 30-row box over the view); the picker keeps its room for the list.
    let r = if matches!(modal, Modal::Confirm { .. } | Modal::Group { .. } | Modal::Running { .. }) {
        let want = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX).min(r.height);
        Rect { y: area.y + (area.height - want) / 2, height: want, ..r }
    } else {
        r
    };
    let borders = if theme.ascii { Borders::NONE } else { Borders::ALL };
    let block = Block::new().borders(borders).border_style(theme.border()).title(Span::styled(title, theme.title()));
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: false }), r);
}

/// The repartition picker: the card's layout now and the chosen one as MIG bars, a warning
/// when work holds it, and the choices with what each would start. `(inner, h)`: the box's
/// inner width and its height.
fn picker_lines(
    card: &crate::model::CardRef,
    choices: &[crate::ui::dialogs::Choice],
    selected: usize,
    current: &str,
    fleet: &Fleet,
    theme: &Theme,
    (inner, h): (usize, u16),
) -> Vec<Line<'static>> {
    let c = fleet.card(card);
    let mut lines = Vec::new();
    let model = c.map_or("?", |c| c.model.as_str());
    lines.push(Line::from(Span::styled(format!("{card}  {model}"), theme.title())));
    if let Some(c) = c {
        lines.push(bar_line("now   ", c, inner, theme, fleet));
        if let Some(choice) = choices.get(selected) {
            let chosen = Card {
                mig: crate::model::MigState::from_layout(&c.model, &choice.layout),
                workloads: Vec::new(),
                ..c.clone()
            };
            lines.push(bar_line("chosen", &chosen, inner, theme, fleet));
        }
        let holders = c.holders().count();
        if holders > 0 {
            lines.push(Line::from(Span::styled(
                format!(
                    "{} this card now: drain it and let them finish first",
                    crate::units::count(holders as u64, "workload holds", "workloads hold")
                ),
                theme.fg(theme.c.warning),
            )));
        }
    }
    lines.push(Line::from(Span::styled(format!("current: {current}"), theme.dim())));
    lines.push(Line::from(Span::styled(
        "fits = queued workloads this card would start with the layout (one each)",
        theme.dim(),
    )));
    let room = usize::from(h).saturating_sub(lines.len() + 3);
    let start = selected.saturating_sub(room.saturating_sub(1));
    for (i, ch) in choices.iter().enumerate().skip(start).take(room) {
        let mark = if i == selected { "> " } else { "  " };
        let now = if ch.current { "  (current)" } else { "" };
        let text = fit(&format!("{mark}{:<40} fits {}{now}", ch.layout, ch.fits), inner, theme.ascii);
        let style = if i == selected { theme.selection() } else { theme.text() };
        lines.push(Line::from(Span::styled(text, style)));
    }
    lines.push(Line::from(Span::styled("j/k choose  Enter plan it  Esc cancel", theme.dim())));
    lines
}

/// A running action: each step's state (the running one kept in view) and, once ended, the
/// outcome. `(inner, h)`: the box's inner width and its height.
fn running_lines(
    plan: &crate::actions::Plan,
    status: &[StepState],
    outcome: Option<&crate::actions::Outcome>,
    theme: &Theme,
    (inner, h): (usize, u16),
) -> Vec<Line<'static>> {
    let mut lines = vec![Line::from(Span::styled(plan.summary.clone(), theme.title()))];
    // Long plans scroll with the work: the step running now stays in view.
    let room = usize::from(h).saturating_sub(6) / 2;
    let current = status.iter().position(|s| matches!(s, StepState::Waiting | StepState::Running { .. }));
    let skip = current.unwrap_or(status.len()).saturating_sub(room.saturating_sub(1));
    if skip > 0 {
        lines.push(Line::from(Span::styled(format!("... {skip} steps done above"), theme.dim())));
    }
    for (s, st) in plan.steps.iter().zip(status).skip(skip).take(room.max(1)) {
        let (mark, style, msg) = match st {
            StepState::Waiting => ("  ", theme.dim(), String::new()),
            StepState::Running { .. } => ("..", theme.text(), String::new()),
            StepState::Done(m) => ("ok", theme.fg(theme.c.util_low), m.clone()),
            StepState::Failed(m) => ("!!", theme.fg(theme.c.danger), m.clone()),
        };
        lines.push(Line::from(Span::styled(fit(&format!("{mark} {}", s.what), inner, theme.ascii), style)));
        if !msg.is_empty() {
            lines.push(Line::from(Span::styled(fit(&format!("     {msg}"), inner, theme.ascii), theme.dim())));
        }
    }
    if let Some(o) = outcome {
        let (text, style) = if o.ok {
            ("done: every step done".to_string(), theme.fg(theme.c.util_low))
        } else {
            (format!("FAILED: {}", o.reached), theme.fg(theme.c.danger))
        };
        lines.push(Line::from(Span::styled(text, style.add_modifier(Modifier::BOLD))));
        lines.push(Line::from(Span::styled("Enter or Esc closes", theme.dim())));
    }
    lines
}

fn bar_line(label: &str, card: &Card, width: usize, theme: &Theme, fleet: &Fleet) -> Line<'static> {
    let name = |id: &str| crate::ui::holder_name(fleet, id);
    let bar_w = u16::try_from(width.saturating_sub(label.len() + 1)).unwrap_or(0);
    let mut spans = vec![Span::styled(format!("{label} "), theme.dim())];
    spans.extend(mig_bar(card, bar_w, theme, &name).spans);
    Line::from(spans)
}

/// One row of a sheet in the theme's style (ASCII mode: plain arrows and dots).
pub fn row(text: String, tone: Tone, theme: &Theme) -> Line<'static> {
    let text = if theme.ascii { text.replace('→', ">").replace('·', "-") } else { text };
    let style = match tone {
        Tone::Title => theme.title(),
        Tone::Text => theme.text(),
        Tone::Dim => theme.dim(),
        Tone::Warning => theme.fg(theme.c.warning),
        Tone::Danger => theme.fg(theme.c.danger),
        Tone::Ask => theme.title().add_modifier(Modifier::BOLD),
        Tone::AskDanger => theme.fg(theme.c.danger).add_modifier(Modifier::BOLD),
        Tone::AskWarning => theme.fg(theme.c.warning).add_modifier(Modifier::BOLD),
    };
    Line::from(Span::styled(text, style))
}
