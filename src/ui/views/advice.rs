//! The Advice view (`5`, `:advice`): the advisor's findings, the most severe first, then the
//! most GPU-hours (`s` puts the most costly first), under a line that counts them as the
//! header does, and for the selected one its evidence and suggestion; `a` plans a suggested
//! action through the one action runner, with its usual confirmation.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{cell, rcell};
use crate::advisor::Severity;
use crate::ui::state::UiState;
use crate::ui::state::advice::detail_height;
use crate::ui::theme::Theme;
use crate::ui::widgets::text::fit;

/// The projection's line: the next 24 hours of measured demand, simulated as is and with the
/// advice's layout changes (`None` until the loop has computed one).
pub fn projection_line(st: &UiState) -> Option<String> {
    let p = st.advice.projection.as_ref()?;
    let arrow = if st.settings.ascii { "->" } else { "→" };
    let dot = if st.settings.ascii { "-" } else { "·" };
    let wait = crate::units::duration::short;
    let pct = |v: f64| format!("{:.0}%", v * 100.0);
    let others = match p.others {
        0 => String::new(),
        n => format!("; {} not modelled", crate::units::count(n as u64, "other action", "other actions")),
    };
    // At scale a sample is simulated (`SAMPLE_ABOVE_CARDS`): the line says so.
    let what = match p.sampled {
        Some((kept, of)) => {
            let n = crate::units::grouped;
            format!("simulated 24h on a sample ({} of {} cards)", n(kept.into()), n(of.into()))
        }
        None => "simulated 24h".to_string(),
    };
    if p.changes == 0 {
        return Some(format!(
            "{what}: p90 wait {} {dot} held {} (the plan lays out no card{others})",
            wait(p.as_is.p90_wait_s),
            pct(p.as_is.held),
        ));
    }
    let plans = crate::units::count(p.changes as u64, "layout change", "layout changes");
    Some(format!(
        "{what}: p90 wait {} {arrow} {} {dot} held {} {arrow} {} (as is {arrow} following the plan's {plans}{others})",
        wait(p.as_is.p90_wait_s),
        wait(p.following.p90_wait_s),
        pct(p.as_is.held),
        pct(p.following.held),
    ))
}

/// The counts line: "34 findings: 8 high, 2 warn, 24 info · severity first (s: cost first)".
fn counts_line(st: &UiState) -> String {
    let (h, w, i) = st.advice.counts;
    let n = crate::units::count(st.advice.list.rows.len() as u64, "finding", "findings");
    let order = st.advice.order;
    let dot = if st.settings.ascii { "-" } else { "·" };
    // Advice made a minute of the data's time ago or more says when (a paced pass at 600× is
    // an hour of simulated time old).
    let age = st
        .advice
        .at
        .filter(|at| (st.clock.now - *at).num_seconds() >= 60)
        .map(|at| format!(" {dot} as of {}", at.format("%H:%M")))
        .unwrap_or_default();
    format!("{n}: {h} high, {w} warn, {i} info {dot} {} (s: {}){age}", order.as_str(), order.toggled().as_str())
}

pub fn draw(f: &mut Frame, area: Rect, st: &UiState, theme: &Theme) {
    let a = st.settings.ascii;
    let w = usize::from(area.width);
    let head = theme.title();
    // The list above, the selected finding below (when there is room for both).
    let detail_h = detail_height(usize::from(area.height)) as u16;
    let parts = Layout::vertical([Constraint::Min(2), Constraint::Length(detail_h)]).split(area);
    let title_w = w.saturating_sub(5 + 17 + 10 + 4);
    let mut lines = vec![Line::from(Span::styled(fit(&counts_line(st), w, a), theme.dim()))];
    let projection = projection_line(st);
    if let Some(p) = &projection {
        lines.push(Line::from(Span::styled(fit(p, w, a), theme.dim())));
    }
    lines.push(Line::from(vec![
        cell("SEV", 4, head, a),
        cell("KIND", 16, head, a),
        rcell("GPU-h/d", 9, head, a),
        cell("FINDING", title_w, head, a),
    ]));
    let vp = usize::from(parts[0].height.saturating_sub(2 + u16::from(projection.is_some())));
    for (i, x) in st.advice.list.rows.iter().enumerate().skip(st.advice.list.offset).take(vp) {
        let sev = match x.severity {
            Severity::High => theme.fg(theme.c.danger),
            Severity::Warn => theme.fg(theme.c.warning),
            Severity::Info => theme.dim(),
        };
        let row = Line::from(vec![
            cell(x.severity.as_str(), 4, sev, a),
            cell(x.kind.as_str(), 16, theme.text(), a),
            rcell(
                &if x.gpu_hours_per_day == 0.0 { "-".to_string() } else { format!("{:.1}", x.gpu_hours_per_day) },
                9,
                theme.text(),
                a,
            ),
            cell(&x.title, title_w, theme.text(), a),
        ]);
        lines.push(if i == st.advice.list.selected { row.patch_style(theme.selection()) } else { row });
    }
    if st.advice.list.rows.is_empty() {
        lines.push(Line::from(Span::styled("no findings: nothing held idle, oversized or failing", theme.dim())));
    }
    f.render_widget(Paragraph::new(lines), parts[0]);
    if detail_h == 0 {
        return;
    }
    let Some(x) = st.advice.list.rows.get(st.advice.list.selected) else { return };
    let mut d = vec![Line::from(Span::styled(fit(&x.title, w, a), theme.title()))];
    for e in &x.evidence {
        d.push(Line::from(Span::styled(fit(&format!("  {e}"), w, a), theme.text())));
    }
    // Waste for most kinds; for waiting work what it would use or start (docs/advisor.md).
    let cost = x.cost_per_day.map_or(String::new(), |c| format!(", {c:.2}/day"));
    d.push(Line::from(Span::styled(
        fit(&format!("  GPU-hours a day: {:.1}{cost}", x.gpu_hours_per_day), w, a),
        theme.dim(),
    )));
    let act = if x.suggestion.action().is_some() && !st.settings.read_only { "  (a plans it)" } else { "" };
    d.push(Line::from(Span::styled(fit(&format!("=> {}{act}", x.suggestion.text()), w, a), theme.fg(theme.c.ok))));
    f.render_widget(Paragraph::new(d), parts[1]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::projection::{Outlook, Projection};

    /// #47: advice made a minute of data time ago or more says when it was made.
    #[test]
    fn old_advice_says_its_age() {
        let now = chrono::Utc::now();
        let mut st = UiState::new(false, false, std::time::Duration::from_secs(1800), now);
        st.clock.now = now;
        st.on_findings(Vec::new());
        assert!(!counts_line(&st).contains("as of"), "{}", counts_line(&st));
        st.clock.now = now + chrono::Duration::minutes(50);
        assert!(counts_line(&st).ends_with(&format!("as of {}", now.format("%H:%M"))), "{}", counts_line(&st));
    }

    /// #47: the line names what it follows and never claims changes the plan does not hold
    /// (it said "2 changes advised" with none in the list, and counted layout changes only).
    #[test]
    fn the_projection_line_names_what_it_follows() {
        let mut st = UiState::new(false, false, std::time::Duration::from_secs(1800), chrono::Utc::now());
        let o = |w, h| Outlook { p90_wait_s: w, held: h, never_started: 0 };
        st.advice.projection = Some(Projection {
            as_is: o(3600, 0.5),
            following: o(3600, 0.5),
            changes: 0,
            others: 2,
            jobs: 9,
            followed: Default::default(),
            sampled: None,
        });
        assert_eq!(
            projection_line(&st).as_deref(),
            Some("simulated 24h: p90 wait 1h00m · held 50% (the plan lays out no card; 2 other actions not modelled)")
        );
        st.advice.projection = Some(Projection {
            as_is: o(3600, 0.5),
            following: o(0, 0.6),
            changes: 2,
            others: 0,
            jobs: 9,
            followed: Default::default(),
            sampled: None,
        });
        assert_eq!(
            projection_line(&st).as_deref(),
            Some("simulated 24h: p90 wait 1h00m → 0s · held 50% → 60% (as is → following the plan's 2 layout changes)")
        );
    }

    /// #50: at scale a sample of the fleet is simulated, and the line says so.
    #[test]
    fn a_sampled_projection_says_so() {
        let mut st = UiState::new(false, false, std::time::Duration::from_secs(1800), chrono::Utc::now());
        let o = |w, h| Outlook { p90_wait_s: w, held: h, never_started: 0 };
        st.advice.projection = Some(Projection {
            as_is: o(3600, 0.5),
            following: o(3600, 0.5),
            changes: 0,
            others: 0,
            jobs: 9,
            followed: Default::default(),
            sampled: Some((4104, 32768)),
        });
        assert_eq!(
            projection_line(&st).as_deref(),
            Some(
                "simulated 24h on a sample (4,104 of 32,768 cards): p90 wait 1h00m · held 50% (the plan lays out no card)"
            )
        );
    }
}
