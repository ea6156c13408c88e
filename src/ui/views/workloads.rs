//! The workloads view: running work with runtime, activity now and over 30 minutes (held but
//! idle stands out), memory used against what it holds, whether preemption is allowed now,
//! and placement.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{cell, rcell};
use crate::config::duration::short;
use crate::model::{Fleet, Workload, WorkloadKind};
use crate::ui::gib_pair;
use crate::ui::state::UiState;
use crate::ui::theme::Theme;

/// Whether policy lets an operator preempt `w` now, in words.
pub fn preempt_text(w: &Workload, st: &UiState) -> (String, bool) {
    match w.kind {
        WorkloadKind::Inference => ("never (inference)".into(), false),
        _ => {
            let ran = w.runtime(st.now).map_or(0, |d| d.num_seconds());
            let min = st.min_runtime.as_secs() as i64;
            if ran >= min { ("yes".into(), true) } else { (format!("in {}", short(min - ran)), false) }
        }
    }
}

/// Placement as `node/0-3` or `node/2 1g.10gb`.
fn placement(w: &Workload, fleet: &Fleet) -> String {
    let Some(first) = w.cards.first() else { return "-".into() };
    let idx: Vec<String> = w.cards.iter().map(|c| c.index.to_string()).collect();
    let profile = fleet
        .card(first)
        .and_then(|c| c.mig.instances.iter().find(|i| i.workloads.contains(&w.id)))
        .map(|i| format!(" {}", i.profile))
        .unwrap_or_default();
    format!("{}/{}{profile}", first.node, idx.join(","))
}

/// The width a column needs for its widest shown value, within `min..=max`.
pub fn content_width<'a>(values: impl Iterator<Item = &'a str>, min: usize, max: usize) -> usize {
    values.map(|v| v.chars().count()).max().unwrap_or(0).clamp(min, max.max(min))
}

/// An activity percentage, `-` where unknown.
pub fn pct_text(p: Option<f64>) -> String {
    p.map_or_else(|| "-".into(), |u| format!("{u:.0}%"))
}

pub fn draw(f: &mut Frame, area: Rect, st: &UiState, fleet: &Fleet, theme: &Theme) {
    let a = st.ascii;
    let w = usize::from(area.width);
    let head = theme.title();
    let wide = w >= 120;
    let vp = usize::from(area.height.saturating_sub(1));
    let rows: Vec<&Workload> =
        st.workload_rows.iter().skip(st.offset[2]).take(vp).map(|&i| &fleet.workloads[i]).collect();
    // Columns as wide as what they show; the placement takes the rest.
    let id_w = content_width(rows.iter().map(|w| w.id.as_str()), 6, if wide { 28 } else { 10 });
    let name_w = content_width(rows.iter().map(|w| w.name.as_str()), 8, if wide { 36 } else { 14 });
    let (kind_w, pre_w) = if wide { (9, 17) } else { (5, 6) };
    let fixed = id_w + 1 + name_w + 1 + kind_w + 1 + 8 + 5 + 10 + 14 + pre_w + 1;
    let place_w = w.saturating_sub(fixed).max(8);
    let mut lines = vec![Line::from(vec![
        cell("ID", id_w, head, a),
        cell("NAME", name_w, head, a),
        cell("KIND", kind_w, head, a),
        rcell("RUNTIME", 7, head, a),
        rcell("UTIL", 4, head, a),
        rcell("30m MEAN", 9, head, a),
        rcell("MEM GiB", 13, head, a),
        cell("PREEMPT", pre_w, head, a),
        cell("PLACEMENT", place_w, head, a),
    ])];
    for (i, wl) in rows.into_iter().enumerate() {
        let text = theme.text();
        let (mut pre, allowed) = preempt_text(wl, st);
        if !wide && pre.starts_with("never") {
            pre = "never".into();
        }
        // Held but idle: under 5 % activity for the whole window.
        let idle = wl.activity.is_some_and(|x| x.held_idle());
        let act = wl.activity;
        let mean = act.and_then(|x| x.mean_pct);
        // The column is the 30-minute mean; a mean over less says over how long (a replica
        // seen for a minute read as a 30-minute mean).
        let mean_text = match (mean, idle, act) {
            (Some(_), true, _) => format!("idle {}", pct_text(mean)),
            (Some(_), false, Some(x)) if !x.window_covered() => {
                format!("{}/{}", pct_text(mean), short(i64::try_from(x.covered_s).unwrap_or(0)))
            }
            _ => pct_text(mean),
        };
        let line = Line::from(vec![
            cell(&wl.id, id_w, text, a),
            cell(&wl.name, name_w, text, a),
            cell(
                if wide { wl.kind.as_str() } else { &wl.kind.as_str()[..5.min(wl.kind.as_str().len())] },
                kind_w,
                text,
                a,
            ),
            rcell(&wl.runtime(st.now).map_or("-".into(), |d| short(d.num_seconds())), 7, text, a),
            rcell(&pct_text(act.and_then(|x| x.now_pct)), 4, text, a),
            rcell(&mean_text, 9, if idle { theme.fg(theme.c.warning) } else { text }, a),
            rcell(&gib_pair(wl.memory_used_mib, wl.request.gpu_memory_mib), 13, text, a),
            cell(&pre, pre_w, if allowed { theme.fg(theme.c.ok) } else { theme.dim() }, a),
            cell(&placement(wl, fleet), place_w, text, a),
        ]);
        lines.push(if st.offset[2] + i == st.selected[2] { line.patch_style(theme.selection()) } else { line });
    }
    if st.workload_rows.is_empty() {
        let empty = if st.filter_text.is_empty() { "nothing is running" } else { "nothing running matches the filter" };
        lines.push(Line::from(Span::styled(empty, theme.dim())));
    }
    f.render_widget(Paragraph::new(lines), area);
}
