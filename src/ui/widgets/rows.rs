//! Rows of styled text written straight into the buffer: what `Paragraph` draws for lines
//! that neither wrap nor align, without its per-frame line composer, and printable ASCII (most
//! of a fleet row) one byte a cell instead of through grapheme segmentation.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

/// Draws `lines` from the top of `area`, one a row, each cut at the area's right edge. Cells
/// past a line's end are left as they are, as `Paragraph` leaves them.
pub fn draw(buf: &mut Buffer, area: Rect, lines: &[Line<'_>]) {
    let area = area.intersection(buf.area);
    for (line, y) in lines.iter().zip(area.top()..area.bottom()) {
        put(buf, area.x, y, line, area.width);
    }
}

/// One line at (`x`, `y`), at most `width` columns.
pub fn put(buf: &mut Buffer, x: u16, y: u16, line: &Line<'_>, width: u16) {
    let right = x.saturating_add(width).min(buf.area.right());
    let mut x = x;
    for span in line {
        if x >= right {
            return;
        }
        let style = line.style.patch(span.style);
        let s = span.content.as_ref();
        if s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            for i in 0..s.len() {
                if x >= right {
                    return;
                }
                buf[(x, y)].set_symbol(&s[i..=i]).set_style(style);
                x += 1;
            }
        } else {
            let next = buf.set_stringn(x, y, s, usize::from(right - x), style).0;
            // A span cut short ends the line, as `Paragraph` ends it: a later span must not
            // show in the column a wide character left.
            // Measured as the buffer measures it: graphemes, control characters left out.
            let full: usize = s.graphemes(true).filter(|g| !g.contains(char::is_control)).map(|g| g.width()).sum();
            if usize::from(next - x) < full {
                return;
            }
            x = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::{Color, Style};
    use ratatui::text::Span;
    use ratatui::widgets::{Paragraph, Widget};

    /// Cell for cell what `Paragraph` draws: ASCII, box drawing, control characters, line and
    /// span styles, lines longer than the area, more lines than rows.
    #[test]
    fn the_same_cells_as_a_paragraph() {
        let lines = vec![
            Line::from(vec![Span::styled("gpu-0 ", Style::new().fg(Color::Red)), Span::raw("A100 ▕██▏ 87%")]),
            Line::from(vec![Span::raw("▾ node "), Span::raw("ex\tq\u{7}z…")]),
            Line::from("a line far longer than the area is wide, cut at its edge").style(Style::new().bg(Color::Blue)),
            Line::from(vec![Span::raw("ab"), Span::styled("c", Style::new().fg(Color::Green)), Span::raw("[##  ]")]),
            Line::from("one row too many"),
        ];
        for width in [1u16, 7, 15, 30, 80] {
            let area = Rect::new(2, 1, width, 4);
            let mut ours = Buffer::empty(Rect::new(0, 0, 90, 6));
            let mut theirs = ours.clone();
            draw(&mut ours, area, &lines);
            Paragraph::new(lines.clone()).render(area, &mut theirs);
            assert_eq!(ours, theirs, "width {width}");
        }
    }

    /// A wide character that does not fit ends the line: nothing of a later span shows in the
    /// column it leaves (`Paragraph` is not consistent here: it shows the later span when the
    /// cut is in the first column, and not after it).
    #[test]
    fn a_cut_wide_character_ends_the_line() {
        let line = Line::from(vec![Span::raw("ab日本"), Span::raw("xyz")]);
        for (width, shown) in [(1u16, "a"), (3, "ab"), (5, "ab日"), (6, "ab日本"), (7, "ab日本x")] {
            let mut buf = Buffer::empty(Rect::new(0, 0, 10, 1));
            put(&mut buf, 0, 0, &line, width);
            let text: String = buf.content.iter().map(|c| c.symbol()).collect::<String>();
            assert_eq!(text.replace(' ', ""), shown, "width {width}");
        }
    }

    /// A grapheme of several characters (a ZWJ emoji, 2 columns) is measured whole: the span
    /// after it still shows.
    #[test]
    fn a_joined_emoji_does_not_end_the_line() {
        let line = Line::from(vec![Span::raw("a\u{1F469}\u{200D}\u{1F4BB}b"), Span::raw("cd")]);
        let mut buf = Buffer::empty(Rect::new(0, 0, 10, 1));
        put(&mut buf, 0, 0, &line, 10);
        assert_eq!(buf.content[4].symbol(), "c", "{:?}", buf.content);
    }
}
