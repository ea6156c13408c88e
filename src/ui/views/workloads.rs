//! The workloads view: running work with runtime, placement, memory used against allocated
//! (held but idle stands out) and whether preemption is allowed now.

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

pub fn draw(f: &mut Frame, area: Rect, st: &UiState, fleet: &Fleet, theme: &Theme) {
    let a = st.ascii;
    let w = usize::from(area.width);
    let head = theme.title();
    let wide = w >= 120;
    let (name_w, kind_w, pre_w) = if wide { (21, 9, 17) } else { (12, 5, 6) };
    let place_w = w.saturating_sub(9 + name_w + 1 + kind_w + 1 + 8 + 14 + pre_w + 1).max(8);
    let mut lines = vec![Line::from(vec![
        cell("ID", 8, head, a),
        cell("NAME", name_w, head, a),
        cell("KIND", kind_w, head, a),
        rcell("RUNTIME", 7, head, a),
        cell("PLACEMENT", place_w, head, a),
        rcell("MEM GiB", 13, head, a),
        cell("PREEMPT", pre_w, head, a),
    ])];
    let vp = usize::from(area.height.saturating_sub(1));
    for (i, &wi) in st.workload_rows.iter().enumerate().skip(st.offset[2]).take(vp) {
        let wl = &fleet.workloads[wi];
        let text = theme.text();
        let (mut pre, allowed) = preempt_text(wl, st);
        if !wide && pre.starts_with("never") {
            pre = "never".into();
        }
        // Held but idle: under a fifth of what it holds is in use.
        let idle = matches!((wl.memory_used_mib, wl.request.gpu_memory_mib), (Some(u), Some(t)) if t > 0 && u * 5 < t);
        let mem_style = if idle { theme.fg(theme.c.warning) } else { text };
        let mem = gib_pair(wl.memory_used_mib, wl.request.gpu_memory_mib);
        let line = Line::from(vec![
            cell(&wl.id, 8, text, a),
            cell(&wl.name, name_w, text, a),
            cell(
                if wide { wl.kind.as_str() } else { &wl.kind.as_str()[..5.min(wl.kind.as_str().len())] },
                kind_w,
                text,
                a,
            ),
            rcell(&wl.runtime(st.now).map_or("-".into(), |d| short(d.num_seconds())), 7, text, a),
            cell(&placement(wl, fleet), place_w, text, a),
            rcell(&if idle { format!("idle {mem}") } else { mem }, 13, mem_style, a),
            cell(&pre, pre_w, if allowed { theme.fg(theme.c.ok) } else { theme.dim() }, a),
        ]);
        lines.push(if i == st.selected[2] { line.patch_style(theme.selection()) } else { line });
    }
    if st.workload_rows.is_empty() {
        lines.push(Line::from(Span::styled("nothing is running", theme.dim())));
    }
    f.render_widget(Paragraph::new(lines), area);
}
