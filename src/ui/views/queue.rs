//! The queue view: pending workloads with what they want and why they wait, and a demand
//! table of each resource's waiting work against what is free now.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{cell, rcell};
use crate::model::{Fleet, Workload};
use crate::ui::state::UiState;
use crate::ui::theme::Theme;
use crate::units::duration::short;

pub fn request_text(w: &Workload) -> String {
    let mut parts = Vec::new();
    if let Some(s) = w.request.shares {
        let unit = match s.unit {
            crate::model::ShareUnit::Replica if s.count == 1 => "replica".to_string(),
            crate::model::ShareUnit::Replica => "replicas".to_string(),
            crate::model::ShareUnit::Mps => "MPS units".to_string(),
        };
        parts.push(format!("{} {unit}", s.count));
    }
    match (&w.request.mig_profile, w.request.gpus) {
        (Some(p), Some(n)) if n > 1 => parts.push(format!("{n}× MIG {p}")),
        (Some(p), _) => parts.push(format!("MIG {p}")),
        (None, Some(n)) => parts.push(format!("{n} GPU")),
        (None, None) => {}
    }
    if let Some(m) = w.request.model.as_deref() {
        parts.push(crate::model::mig::lookup(m).map_or(m.to_string(), |g| g.name.clone()));
    }
    parts.join(" ")
}

pub fn draw(f: &mut Frame, area: Rect, st: &UiState, fleet: &Fleet, theme: &Theme) {
    let q = &st.queue.summary;
    let demand_h = crate::ui::state::queue_demand_height(usize::from(area.height), q.demand.len()) as u16;
    let parts = Layout::vertical([Constraint::Min(2), Constraint::Length(demand_h)]).split(area);
    let a = st.settings.ascii;
    let w = usize::from(area.width);
    let head = theme.title();
    let vp = usize::from(parts[0].height.saturating_sub(1));
    let shown: Vec<&Workload> =
        st.queue.list.rows.iter().skip(st.queue.list.offset).take(vp).map(|&i| &fleet.workloads[i]).collect();
    // Columns as wide as what they show; the reason takes the rest.
    let wide = w >= 120;
    use super::workloads::content_width as content;
    let id_w = content(shown.iter().map(|w| w.id.as_str()), 6, if wide { 28 } else { 10 });
    let name_w = content(shown.iter().map(|w| w.name.as_str()), 8, if wide { 32 } else { 14 });
    let reqs: Vec<String> = shown.iter().map(|w| request_text(w)).collect();
    let req_w = content(reqs.iter().map(String::as_str), 7, if wide { 24 } else { 12 });
    let reason_w = w.saturating_sub(id_w + 1 + name_w + 1 + 10 + req_w + 1 + 5 + 7);
    let mut lines = vec![Line::from(vec![
        cell("ID", id_w, head, a),
        cell("NAME", name_w, head, a),
        cell("KIND", 9, head, a),
        cell("REQUEST", req_w, head, a),
        rcell("PRIO", 4, head, a),
        rcell("WAIT", 6, head, a),
        cell("REASON", reason_w, head, a),
    ])];
    for (i, (wl, req)) in shown.into_iter().zip(&reqs).enumerate() {
        let i = st.queue.list.offset + i;
        let text = theme.text();
        let wait = wl.wait(st.clock.now).map(|d| d.num_seconds());
        let over = wait.is_some_and(|s| s > 0 && s as u64 > st.settings.queue_wait_threshold.as_secs());
        let line = Line::from(vec![
            cell(&wl.id, id_w, text, a),
            cell(&wl.name, name_w, text, a),
            cell(wl.kind.as_str(), 9, text, a),
            cell(req, req_w, text, a),
            rcell(&wl.priority.map_or("-".into(), |p| p.to_string()), 4, text, a),
            rcell(&wait.map_or("-".into(), short), 6, if over { theme.fg(theme.c.warning) } else { text }, a),
            cell(wl.reason.as_deref().unwrap_or("-"), reason_w, theme.dim(), a),
        ]);
        lines.push(if i == st.queue.list.selected { line.patch_style(theme.selection()) } else { line });
    }
    if st.queue.list.rows.is_empty() {
        lines.push(nothing_listed(st, theme, w));
    }
    f.render_widget(Paragraph::new(lines), parts[0]);

    if demand_h > 0 {
        f.render_widget(Paragraph::new(demand_lines(st, theme, w)), parts[1]);
    }
}

/// The line where no row is listed: nothing waits (or nothing matches), no queue source, or
/// the queue is unknown (never shown as empty).
fn nothing_listed(st: &UiState, theme: &Theme, w: usize) -> Line<'static> {
    let (text, style) = match &st.queue.summary.known {
        crate::model::QueueKnown::Known if !st.filter.text.is_empty() => {
            ("nothing waiting matches the filter".to_string(), theme.dim())
        }
        crate::model::QueueKnown::Known => ("nothing is waiting".to_string(), theme.dim()),
        crate::model::QueueKnown::NoScheduler => {
            ("no queue source: add --slurm, --kubernetes, or Prometheus with prometheus_queue".to_string(), theme.dim())
        }
        crate::model::QueueKnown::Unknown { reason } => {
            (format!("queue unknown (not empty): {reason}"), theme.fg(theme.c.warning))
        }
    };
    Line::from(Span::styled(crate::ui::widgets::text::fit(&text, w, st.settings.ascii), style))
}

/// The demand against free capacity, a row per resource, with where free is not free together.
fn demand_lines(st: &UiState, theme: &Theme, w: usize) -> Vec<Line<'static>> {
    let (q, a, head) = (&st.queue.summary, st.settings.ascii, theme.title());
    let mut d = vec![
        Line::from(Span::styled(format!("demand against free capacity · {} pending", q.pending), theme.title())),
        Line::from(vec![
            cell("RESOURCE", 26, head, a),
            rcell("WAITING", 7, head, a),
            rcell("WANT", 5, head, a),
            rcell("FREE", 5, head, a),
        ]),
    ];
    for dm in &q.demand {
        let short_of = dm.wanted > dm.free;
        let style = if short_of { theme.fg(theme.c.warning) } else { theme.fg(theme.c.ok) };
        let mut row = vec![
            cell(&dm.resource.to_string(), 26, theme.text(), a),
            rcell(&dm.pending.to_string(), 7, theme.text(), a),
            rcell(&dm.wanted.to_string(), 5, theme.text(), a),
            rcell(&dm.free.to_string(), 5, style, a),
        ];
        // Free in total is not free where it is needed: a multi-GPU job needs one node, a
        // share one card.
        let shared = matches!(dm.resource, crate::model::Resource::Shared { .. });
        if dm.scattered() {
            let place = if shared { "card" } else { "node" };
            let note =
                format!("  at most {} on one {place}; a job wants {} together", dm.largest_block, dm.largest_request);
            row.push(Span::styled(
                crate::ui::widgets::text::fit(&note, w.saturating_sub(44), a),
                theme.fg(theme.c.warning),
            ));
        }
        if dm.replicas > 0 && !shared && !dm.scattered() {
            // The scheduler hands these out for GPU requests: shares, not whole cards.
            let note = format!(
                "  {} of them {} of shared cards",
                dm.replicas,
                if dm.replicas == 1 { "a replica" } else { "replicas" }
            );
            row.push(Span::styled(crate::ui::widgets::text::fit(&note, w.saturating_sub(44), a), theme.dim()));
        }
        d.push(Line::from(row));
    }
    d
}
