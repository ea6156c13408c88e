//! One workload in full (Enter in the queue or workloads view): what it asked for, why it
//! waits in the scheduler's whole words, who owns it, its times, and the cards and MIG
//! instances it holds with their activity.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::queue::request_text;
use super::workloads::{pct_text as pct, preempt_text};
use crate::model::Fleet;
use crate::ui::gib_pair;
use crate::ui::state::UiState;
use crate::ui::theme::Theme;
use crate::ui::widgets::text::{fit, wrap};
use crate::units::duration::short;

pub fn draw(f: &mut Frame, area: Rect, st: &UiState, fleet: &Fleet, theme: &Theme, id: &str) {
    let a = st.settings.ascii;
    let w = usize::from(area.width);
    let Some(wl) = fleet.workload(id) else {
        let msg = format!("{id} is gone: it finished or left the queue (Esc goes back)");
        f.render_widget(Paragraph::new(Span::styled(msg, theme.fg(theme.c.warning))), area);
        return;
    };
    let time = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map_or_else(|| "-".into(), |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
    };
    let field = |k: &str, v: String| {
        Line::from(vec![
            Span::styled(format!("{k:<13}"), theme.dim()),
            Span::styled(fit(&v, w.saturating_sub(13), a), theme.text()),
        ])
    };
    let mut lines = vec![
        Line::from(Span::styled(fit(&format!(" {} · {}", wl.id, wl.name), w, a), theme.title())),
        field("kind", format!("{} ({})", wl.kind.as_str(), wl.state.as_str())),
        field("owner", wl.owner.clone().unwrap_or_else(|| "-".into())),
        field("priority", wl.priority.map_or("-".into(), |p| p.to_string())),
        field("request", {
            let r = request_text(wl);
            if r.is_empty() { "-".into() } else { r }
        }),
        field("GPU memory", gib_pair(wl.memory_used_mib, wl.request.gpu_memory_mib) + " GiB"),
        field(
            "host memory",
            wl.request.host_memory_mib.map_or("-".into(), |m| format!("{:.1} GiB", m as f64 / 1024.0)),
        ),
        field("submitted", time(wl.submitted_at)),
    ];
    lines.extend(when_lines(wl, st, &field));
    if let Some(act) = wl.activity {
        let idle = if act.held_idle() { "  HELD BUT IDLE" } else { "" };
        let over = short(act.covered_s as i64);
        lines.push(field(
            "activity",
            format!("now {} · mean {} over {over}{idle}", pct(act.now_pct), pct(act.mean_pct)),
        ));
    }
    lines.push(Line::from(Span::styled("reason", theme.dim())));
    for piece in wrap(wl.reason.as_deref().unwrap_or("-"), w.saturating_sub(2)) {
        lines.push(Line::from(Span::styled(format!("  {piece}"), theme.text())));
    }
    lines.extend(holds_lines(fleet, wl, w, theme, a));
    f.render_widget(Paragraph::new(lines), area);
}

/// When the workload was seen: how long a pending one waited; for running work, when it
/// started, how long it waited and ran, its node and whether it may be preempted.
fn when_lines(
    wl: &crate::model::Workload,
    st: &UiState,
    field: &dyn Fn(&str, String) -> Line<'static>,
) -> Vec<Line<'static>> {
    let time = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map_or_else(|| "-".into(), |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
    };
    let mut out = Vec::new();
    // What only running work has (started, ran, node, preemption) is left out of a pending
    // workload's detail, which says how long it has waited instead.
    if wl.state == crate::model::WorkloadState::Pending {
        out.push(field("waited", wl.waited(st.clock.now).map_or("-".into(), |d| short(d.num_seconds()))));
    } else {
        out.push(field("started", time(wl.started_at)));
        out.push(field(
            "waited / ran",
            format!(
                "{} / {}",
                wl.waited(st.clock.now).map_or("-".into(), |d| short(d.num_seconds())),
                wl.runtime(st.clock.now).map_or("-".into(), |d| short(d.num_seconds()))
            ),
        ));
        out.push(field("node", wl.node.clone().unwrap_or_else(|| "-".into())));
        out.push(field("preempt", preempt_text(wl, st).0));
    }
    out
}

/// The cards the workload holds, each with its model and what of it the workload has.
fn holds_lines(fleet: &Fleet, wl: &crate::model::Workload, w: usize, theme: &Theme, a: bool) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if !wl.cards.is_empty() {
        lines.push(Line::from(Span::styled("holds", theme.dim())));
    }
    for r in &wl.cards {
        let Some(c) = fleet.card(r) else {
            lines.push(Line::from(Span::styled(format!("  {r}: no source reports this card now"), theme.dim())));
            continue;
        };
        let model = c.gpu_model().map_or(c.model.clone(), |m| m.name.clone());
        let held: Vec<String> = c
            .mig
            .instances
            .iter()
            .filter(|i| i.workloads.contains(&wl.id))
            .map(|i| {
                format!(
                    "{}@{} {} GiB {}",
                    i.profile,
                    i.start,
                    gib_pair(i.memory_used_mib, i.memory_total_mib),
                    pct(i.utilization_pct)
                )
            })
            .collect();
        let what = if held.is_empty() {
            format!("whole card {} GiB {}", gib_pair(c.memory_used_mib, c.memory_total_mib), pct(c.utilization_pct))
        } else {
            held.join(", ")
        };
        lines.push(Line::from(Span::styled(fit(&format!("  {r} {model}: {what}"), w, a), theme.text())));
    }
    lines
}
