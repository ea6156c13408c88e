//! The replay's line above the view: the recording's span as a timeline with its actions
//! (`A`) and source outages (`!`), the moment shown (`▲`), and the last action before it.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::ui::replay::Replay;
use crate::ui::state::UiState;
use crate::ui::theme::Theme;
use crate::ui::widgets::text::fit;

/// `03:12:05`, with the date where the recording spans more than a day.
fn stamp(r: &Replay, t: DateTime<Utc>) -> String {
    if r.end() - r.start() >= chrono::Duration::days(1) {
        t.format("%m-%d %H:%M").to_string()
    } else {
        t.format("%H:%M:%S").to_string()
    }
}

/// The header's words for a replay: `REPLAY 2026-11-30 03:12:05 UTC ▶ 60×`.
pub fn header_label(r: &Replay, ascii: bool) -> String {
    let state = match (r.paused, ascii) {
        (true, false) => "⏸",
        (true, true) => "paused",
        (false, false) => "▶",
        (false, true) => ">",
    };
    let speed = if ascii { r.speed_text().replace('×', "x") } else { r.speed_text() };
    format!(" REPLAY {} {state} {speed} ", r.shown_at().format("%Y-%m-%d %H:%M:%S UTC"))
}

/// The glyph of each of `width` cells over the span: the moment, actions, outages.
pub fn cells(r: &Replay, width: usize, ascii: bool) -> String {
    let (line, cursor) = if ascii { ('-', '^') } else { ('─', '▲') };
    let (start, end) = (r.start().timestamp_millis(), r.end().timestamp_millis());
    let span = (end - start).max(1) as f64;
    let cell = |t: DateTime<Utc>| -> usize {
        (((t.timestamp_millis() - start) as f64 / span * width as f64) as usize).min(width.saturating_sub(1))
    };
    let mut out = vec![line; width];
    for (a, b) in &r.outages {
        for c in out.iter_mut().take(cell(*b) + 1).skip(cell(*a)) {
            *c = '!';
        }
    }
    for (t, _) in r.actions.iter().filter(|(t, _)| (r.start()..=r.end()).contains(t)) {
        if let Some(c) = out.get_mut(cell(*t)) {
            *c = 'A';
        }
    }
    if let Some(c) = out.get_mut(cell(r.pos)) {
        *c = cursor;
    }
    out.into_iter().collect()
}

pub fn timeline(f: &mut Frame, area: Rect, st: &UiState, theme: &Theme) {
    let Some(r) = &st.replay else { return };
    let w = usize::from(area.width);
    let (from, to) = (stamp(r, r.start()), stamp(r, r.end()));
    let last = r.last_action().map(|(t, s)| format!(" last action {}: {s}", stamp(r, *t))).unwrap_or_default();
    // The bar takes what the labels leave, the last action at most a third of the line.
    let room = w.saturating_sub(from.len() + to.len() + 4);
    let info = fit(&last, (w / 3).min(room.saturating_sub(10)), theme.ascii);
    let bar = room.saturating_sub(info.chars().count()).max(1);
    let marks = cells(r, bar, theme.ascii);
    let mut spans = vec![Span::styled(format!(" {from} "), theme.dim())];
    let hot = theme.fg(theme.c.warning).add_modifier(Modifier::BOLD);
    for ch in marks.chars() {
        let style = match ch {
            'A' => hot,
            '!' => theme.fg(theme.c.danger),
            '▲' | '^' => theme.title().add_modifier(Modifier::BOLD),
            _ => theme.dim(),
        };
        spans.push(Span::styled(ch.to_string(), style));
    }
    spans.push(Span::styled(format!(" {to} "), theme.dim()));
    spans.push(Span::styled(info, theme.text()));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_timeline_marks_actions_outages_and_the_moment() {
        let t = |s: i64| Utc.timestamp_opt(1_764_468_000 + s, 0).single().unwrap_or_default();
        let mut r = Replay::new((0..=100).map(|i| t(i * 10)).collect(), 1.0, "r".into());
        r.actions = vec![(t(250), "outcome drain a/0: done".into())];
        r.outages = vec![(t(700), t(800))];
        r.go(t(500));
        assert_eq!(cells(&r, 10, true), "--A--^-!!-");
        assert_eq!(header_label(&r, true), " REPLAY 2025-11-30 02:08:20 UTC > 1x ");
    }
}
