//! The `:fit` panel: where a profile, a GPU count or a workload's request fits, in a box in
//! front of the view until Esc.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use crate::ui::theme::Theme;
use crate::ui::widgets::text::fit;

pub fn draw(f: &mut Frame, area: Rect, theme: &Theme, title: &str, lines: &[String]) {
    let a = theme.ascii;
    let widest = lines.iter().map(|l| l.chars().count()).chain([title.len() + 4, 24]).max().unwrap_or(40) as u16;
    let w = area.width.min(widest + 4);
    let h = area.height.min(lines.len() as u16 + 3);
    let r = Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h };
    let inner = usize::from(w.saturating_sub(2));
    let room = usize::from(h.saturating_sub(3)).max(1);
    let mut shown: Vec<Line> = lines
        .iter()
        .take(room)
        .map(|l| {
            let style = if l.starts_with(' ') { theme.text() } else { theme.title() };
            Line::from(Span::styled(fit(l, inner, a), style))
        })
        .collect();
    let foot = match lines.len().saturating_sub(room) {
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
