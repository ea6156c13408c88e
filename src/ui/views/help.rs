//! The help screen: every binding of the keymap, and what the MIG bar's glyphs mean.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use crate::ui::keymap::bindings;
use crate::ui::theme::Theme;
use crate::ui::widgets::text::pad;

pub fn draw(f: &mut Frame, area: Rect, theme: &Theme, read_only: bool) {
    let w = area.width.min(72);
    let h = area.height.min(bindings(read_only).count() as u16 + 5);
    let r = Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h };
    let a = theme.ascii;
    let mut lines: Vec<Line> = bindings(read_only)
        .map(|b| {
            Line::from(vec![Span::styled(pad(b.label, 9, a), theme.title()), Span::styled(b.description, theme.text())])
        })
        .collect();
    let (free, stranded, sep) = if a { (".", "x", "|") } else { ("░", "╳", "▏") };
    lines.push(Line::from(Span::styled("MIG bar: memory slices at their real positions", theme.title())));
    lines.push(Line::from(Span::styled(
        format!("{sep}3g.40gb name instance+holder  {free} free slice  {stranded} stranded  ~54% MIG activity"),
        theme.text(),
    )));
    lines.push(Line::from(Span::styled("Esc or ? closes this help", theme.dim())));
    let borders = if a { Borders::NONE } else { Borders::ALL };
    let block = Block::new().borders(borders).border_style(theme.border()).title(Span::styled(" help ", theme.title()));
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(lines).block(block), r);
}
