//! The action dialogs drawn over the view: the repartition picker (current and chosen layout
//! as MIG bars), the confirmation rendered from the plan, and the progress of a running action.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use crate::model::{Card, Fleet};
use crate::ui::actions::{Modal, StepState};
use crate::ui::theme::Theme;
use crate::ui::widgets::mig_bar::mig_bar;
use crate::ui::widgets::text::fit;

pub fn draw(f: &mut Frame, area: Rect, modal: &Modal, fleet: &Fleet, theme: &Theme) {
    let w = area.width.saturating_sub(4).min(100);
    let h = area.height.saturating_sub(2).min(30);
    let r = Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h };
    let inner = usize::from(w.saturating_sub(2));
    let (title, lines) = match modal {
        Modal::Group { .. } | Modal::GroupRunning { .. } => {
            super::group::lines(modal, theme, usize::from(h.saturating_sub(2)), inner)
        }
        Modal::Picker { card, choices, selected, current } => {
            let c = fleet.card(card);
            let mut lines = Vec::new();
            let model = c.map_or("?", |c| c.model.as_str());
            lines.push(Line::from(Span::styled(format!("{card}  {model}"), theme.title())));
            if let Some(c) = c {
                lines.push(bar_line("now   ", c, inner, theme, fleet));
                if let Some(choice) = choices.get(*selected) {
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
                        format!("{holders} workloads hold this card now: drain it and let them finish first"),
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
                let mark = if i == *selected { "> " } else { "  " };
                let now = if ch.current { "  (current)" } else { "" };
                let text = fit(&format!("{mark}{:<40} fits {}{now}", ch.layout, ch.fits), inner, theme.ascii);
                let style = if i == *selected { theme.selection() } else { theme.text() };
                lines.push(Line::from(Span::styled(text, style)));
            }
            lines.push(Line::from(Span::styled("j/k choose  Enter plan it  Esc cancel", theme.dim())));
            (" repartition ", lines)
        }
        Modal::Confirm { plan, typed, second } => {
            // Borders, the blank line and the prompt always show; the steps give way.
            let mut lines = plan_lines(plan, theme, usize::from(h).saturating_sub(4));
            lines.push(Line::default());
            let prompt = if !plan.allowed() && crate::ui::actions::offers_drain(plan) {
                "refused by the guards above: d drains the card first (then wait, then repartition), Esc closes"
                    .to_string()
            } else if !plan.allowed() && crate::ui::actions::offers_force(plan) {
                "refused by the guards above: f forces it (asks again), Esc closes".to_string()
            } else if !plan.allowed() {
                "refused by the guards above: Esc closes".to_string()
            } else if *second {
                format!("{}  y/n", plan.second_confirmation.clone().unwrap_or_default())
            } else if plan.destructive {
                format!("type {} and Enter to confirm (Esc cancels): {typed}", plan.target)
            } else {
                "y or Enter to confirm, n or Esc to cancel".into()
            };
            let style = if plan.allowed() { theme.title() } else { theme.fg(theme.c.danger) };
            lines.push(Line::from(Span::styled(prompt, style.add_modifier(Modifier::BOLD))));
            (" confirm ", lines)
        }
        Modal::Running { plan, status, outcome } => {
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
            (" running ", lines)
        }
    };
    let borders = if theme.ascii { Borders::NONE } else { Borders::ALL };
    let block = Block::new().borders(borders).border_style(theme.border()).title(Span::styled(title, theme.title()));
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: false }), r);
}

fn bar_line(label: &str, card: &Card, width: usize, theme: &Theme, fleet: &Fleet) -> Line<'static> {
    let name = |id: &str| crate::ui::holder_name(fleet, id);
    let bar_w = u16::try_from(width.saturating_sub(label.len() + 1)).unwrap_or(0);
    let mut spans = vec![Span::styled(format!("{label} "), theme.dim())];
    spans.extend(mig_bar(card, bar_w, theme, &name).spans);
    Line::from(spans)
}

fn plan_lines(plan: &crate::actions::Plan, theme: &Theme, rows: usize) -> Vec<Line<'static>> {
    let head = Line::from(Span::styled(
        format!("{} via {} ({})", plan.summary, plan.backend.as_str(), plan.source),
        theme.title(),
    ));
    let mut tail = Vec::new();
    for w in &plan.warnings {
        tail.push(Line::from(Span::styled(format!("warning: {w}"), theme.fg(theme.c.warning))));
    }
    for b in &plan.blockers {
        tail.push(Line::from(Span::styled(format!("refused: {b}"), theme.fg(theme.c.danger))));
    }
    // Each step takes two rows; when they do not all fit, the last row says how many are
    // left out, so the warnings, refusals and the prompt are never pushed off the dialog.
    let room = rows.saturating_sub(1 + tail.len());
    let shown = if plan.steps.len() * 2 <= room { plan.steps.len() } else { room.saturating_sub(1) / 2 };
    let mut lines = vec![head];
    for (i, s) in plan.steps.iter().enumerate().take(shown) {
        lines.push(Line::from(Span::styled(format!("{}. {}", i + 1, s.what), theme.text())));
        lines.push(Line::from(Span::styled(format!("   {}", s.call), theme.dim())));
    }
    if shown < plan.steps.len() {
        let more = plan.steps.len() - shown;
        lines.push(Line::from(Span::styled(
            format!("... {more} more steps (every step: the same command with --dry-run)"),
            theme.dim(),
        )));
    }
    lines.extend(tail);
    lines
}
