//! A text panel in front of the view until Esc: the answer of `:fit` (where a profile, a GPU
//! count or a workload's request fits), or one finding in full (Enter in the Advice view).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use crate::ui::theme::Theme;
use crate::ui::widgets::text::{fit, wrap};

pub fn draw(f: &mut Frame, area: Rect, theme: &Theme, title: &str, lines: &[String]) {
    let a = theme.ascii;
    let widest = lines.iter().map(|l| l.chars().count()).chain([title.len() + 4, 24]).max().unwrap_or(40) as u16;
    let w = area.width.min(widest + 4);
    let inner = usize::from(w.saturating_sub(2));
    // Long lines wrap, their continuation indented under their text.
    let wrapped: Vec<(String, bool)> = lines
        .iter()
        .flat_map(|l| {
            let indent = l.len() - l.trim_start().len() + 2;
            let body = wrap(l.trim_start(), inner.saturating_sub(indent).max(8));
            let first = l.starts_with(' ');
            body.into_iter().enumerate().map(move |(i, part)| {
                let lead = if i == 0 { indent - 2 } else { indent };
                (format!("{}{part}", " ".repeat(lead)), first || i > 0)
            })
        })
        .collect();
    let h = area.height.min(wrapped.len() as u16 + 3);
    let r = Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h };
    let room = usize::from(h.saturating_sub(3)).max(1);
    let mut shown: Vec<Line> = wrapped
        .iter()
        .take(room)
        .map(|(l, plain)| {
            let style = if *plain { theme.text() } else { theme.title() };
            Line::from(Span::styled(fit(l, inner, a), style))
        })
        .collect();
    let foot = match wrapped.len().saturating_sub(room) {
        0 => "Esc closes".to_string(),
        more => format!("{more} more lines (a taller terminal shows them)  Esc closes"),
    };
    shown.push(Line::from(Span::styled(fit(&foot, inner, a), theme.dim())));
    let borders = if a { Borders::NONE } else { Borders::ALL };
    let block = Block::new()
        .borders(borders)
        .border_style(theme.border())
        .title(Span::styled(format!(" {title} "), theme.title()));
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(shown).block(block), r);
}
