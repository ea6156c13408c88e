//! The help screen: every binding of the keymap, what each filter term matches, and what the
//! MIG bar's glyphs mean. It takes the width it needs (up to the screen's) and scrolls.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use crate::ui::filter::TERMS;
use crate::ui::keymap::{bindings_for, label};
use crate::ui::theme::Theme;
use crate::ui::widgets::text::{fit, pad};

/// Every line of the help, in order.
fn lines(theme: &Theme, read_only: bool, replay: bool) -> Vec<Line<'static>> {
    let a = theme.ascii;
    let mut lines: Vec<Line> = bindings_for(read_only, replay)
        .map(|b| {
            Line::from(vec![
                Span::styled(pad(label(b, replay), 9, a), theme.title()),
                Span::styled(b.description, theme.text()),
            ])
        })
        .collect();
    lines.push(Line::default());
    lines.push(Line::from(Span::styled("filter terms (/ in every list; all words must match)", theme.title())));
    for (term, means) in TERMS {
        lines.push(Line::from(vec![Span::styled(pad(term, 16, a), theme.title()), Span::styled(*means, theme.text())]));
    }
    lines.push(Line::default());
    let (free, stranded, sep) = if a { (".", "x", "|") } else { ("░", "╳", "▏") };
    lines.push(Line::from(Span::styled("MIG bar: memory slices at their real positions", theme.title())));
    lines.push(Line::from(Span::styled(
        format!("{sep}3g.40gb name instance+holder  {free} free slice  {stranded} stranded  ~54% MIG activity"),
        theme.text(),
    )));
    let (unused, approx) = if a { ("-", "~") } else { ("·", "≈") };
    lines.push(Line::from(Span::styled(
        format!("{unused} unused part of a whole card  {approx} placements inferred (no source reports them)"),
        theme.text(),
    )));
    lines
}

/// Lines the help has, for scrolling (bindings, the terms' heading and lines, the legend).
pub fn line_count(read_only: bool, replay: bool) -> usize {
    bindings_for(read_only, replay).count() + 2 + TERMS.len() + 4
}

pub fn draw(f: &mut Frame, area: Rect, theme: &Theme, read_only: bool, replay: bool, scroll: usize) {
    let all = lines(theme, read_only, replay);
    let widest = all.iter().map(Line::width).max().unwrap_or(40) as u16;
    let w = area.width.min(widest + 4);
    let h = area.height.min(all.len() as u16 + 3);
    let r = Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h };
    let a = theme.ascii;
    let room = usize::from(h.saturating_sub(3)).max(1);
    let top = scroll.min(all.len().saturating_sub(room));
    let below = all.len().saturating_sub(top + room);
    let mut shown: Vec<Line> = all.into_iter().skip(top).take(room).collect();
    let foot = if top > 0 || below > 0 {
        format!("j/k scroll ({top} above, {below} below)  Esc or ? closes this help")
    } else {
        "Esc or ? closes this help".into()
    };
    shown.push(Line::from(Span::styled(fit(&foot, usize::from(w.saturating_sub(2)), a), theme.dim())));
    let borders = if a { Borders::NONE } else { Borders::ALL };
    let block = Block::new().borders(borders).border_style(theme.border()).title(Span::styled(" help ", theme.title()));
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(shown).block(block), r);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_count_is_the_lines_drawn() {
        let theme = Theme::load(None, crate::ui::theme::Depth::TrueColor, false).unwrap_or_else(|e| panic!("{e}"));
        for ro in [false, true] {
            assert_eq!(line_count(ro, false), lines(&theme, ro, false).len());
            assert_eq!(line_count(ro, true), lines(&theme, ro, true).len());
        }
    }
}
