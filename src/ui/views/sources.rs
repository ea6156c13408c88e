//! The sources view (`4`, `:sources`): every source's state in full, where the header has
//! room for a word: state, last good collection, interval, what it reported, and the whole
//! error or note, wrapped rather than cut.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{cell, rcell};
use crate::model::{Fleet, SourceHealth};
use crate::ui::state::UiState;
use crate::ui::theme::Theme;
use crate::ui::widgets::text::wrap;
use crate::units::duration::short;

pub fn draw(f: &mut Frame, area: Rect, st: &UiState, fleet: &Fleet, theme: &Theme) {
    let a = st.settings.ascii;
    let w = usize::from(area.width);
    let head = theme.title();
    let name_w = fleet.sources.iter().map(|s| s.name.chars().count()).max().unwrap_or(4).clamp(6, 40);
    let mut lines = vec![Line::from(vec![
        cell("SOURCE", name_w, head, a),
        cell("KIND", 10, head, a),
        cell("STATE", 11, head, a),
        rcell("LAST OK", 8, head, a),
        rcell("EVERY", 6, head, a),
        rcell("NODES", 6, head, a),
        rcell("CARDS", 6, head, a),
        rcell("WORK", 6, head, a),
        cell("QUEUE", 5, head, a),
    ])];
    let rows: Vec<&crate::model::SourceStatus> = fleet.sources.iter().skip(st.sources.offset).collect();
    for (i, s) in rows.into_iter().enumerate() {
        let style = match s.health {
            SourceHealth::Live { .. } => theme.fg(theme.c.ok),
            SourceHealth::Connecting => theme.dim(),
            SourceHealth::Stale { .. } => theme.fg(theme.c.warning),
            SourceHealth::Unavailable { .. } => theme.fg(theme.c.danger),
        };
        let ago = s.last_ok.map_or_else(|| "never".into(), |t| format!("{} ago", short(age_s(st, t))));
        let (nodes, cards, work) = if s.last_ok.is_some() {
            (s.reported.nodes.to_string(), s.reported.cards.to_string(), s.reported.workloads.to_string())
        } else {
            ("-".into(), "-".into(), "-".into())
        };
        let row = Line::from(vec![
            cell(&s.name, name_w, theme.text(), a),
            cell(s.kind.as_str(), 10, theme.text(), a),
            cell(s.health.name(), 11, style, a),
            rcell(&ago, 8, theme.text(), a),
            rcell(&short(s.interval.as_secs() as i64), 6, theme.dim(), a),
            rcell(&nodes, 6, theme.text(), a),
            rcell(&cards, 6, theme.text(), a),
            rcell(&work, 6, theme.text(), a),
            cell(if s.queue { "yes" } else { "-" }, 5, theme.dim(), a),
        ]);
        lines.push(if st.sources.offset + i == st.sources.selected { row.patch_style(theme.selection()) } else { row });
        let detail = [("error: ", s.health.error(), style), ("note: ", s.note.as_deref(), theme.dim())];
        for (label, text, style) in detail.into_iter().filter_map(|(l, t, s)| Some((l, t?, s))) {
            for piece in wrap(&format!("{label}{text}"), w.saturating_sub(4)) {
                lines.push(Line::from(Span::styled(format!("    {piece}"), style)));
            }
        }
    }
    if fleet.sources.is_empty() {
        lines.push(Line::from(Span::styled("no source configured", theme.dim())));
    }
    f.render_widget(Paragraph::new(lines), area);
}

/// Seconds since `t`: on the wall clock live, on the recording's clock in a replay (a live
/// source of a recording made at `--speed` read "LAST OK 2h19m ago").
fn age_s(st: &UiState, t: chrono::DateTime<chrono::Utc>) -> i64 {
    let reference = if st.replay.is_some() { st.clock.now } else { st.clock.wall };
    (reference - t).num_seconds().max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_ages_sources_on_the_recordings_clock() {
        let mut st = UiState::new(false, false, std::time::Duration::from_secs(1800), chrono::Utc::now());
        let recorded =
            chrono::DateTime::parse_from_rfc3339("2026-11-30T03:12:00Z").map(|t| t.to_utc()).unwrap_or_default();
        st.clock.now = recorded + chrono::Duration::seconds(2);
        st.clock.wall = recorded + chrono::Duration::hours(2);
        assert_eq!(age_s(&st, recorded), 7200, "live: the wall clock");
        st.replay = Some(crate::ui::replay::Replay::new(vec![recorded], 1.0, "r.tsrec".into()));
        assert_eq!(age_s(&st, recorded), 2, "replay: the recording's clock");
    }
}
