//! The Advice view's state: the findings as listed, their order, the panel in front and what
//! the loop computed beside them (the projection, a schedule change that is due).

use chrono::{DateTime, Utc};

use super::list::List;
use crate::model::CardRef;

/// The findings, how they are ordered and shown, and what came with them.
#[derive(Debug, Default)]
pub struct Advice {
    /// The advisor's findings in `order` (the loop sets them, on a recent fleet: the advisor
    /// is paced by its own cost, every second at 4,096 cards, up to ten at 32,768).
    pub list: List<crate::advisor::Finding>,
    /// The Advice view's order: the most severe first, or the most costly (`s` there).
    pub order: crate::advisor::Order,
    /// A text panel in front of the view until Esc (title, lines): the answer of `:fit`, or a
    /// finding in full (Enter in the Advice view).
    pub panel: Option<(String, Vec<String>)>,
    /// The finding the panel shows, by kind and subject: each advice pass shows it anew, or
    /// marks it gone, and `a` acts on it only while the latest pass has it.
    pub panel_finding: Option<(crate::advisor::Kind, crate::advisor::Subject)>,
    /// Findings by severity (high, warn, info), counted once per update for the header.
    pub counts: (usize, usize, usize),
    /// The data's clock when the findings were made (the advisor is paced: at 600× a pass can
    /// be an hour of simulated time old).
    pub at: Option<DateTime<Utc>>,
    /// Cards some warn or high finding is about: their fleet rows say `advice`.
    pub flagged: std::collections::HashSet<CardRef>,
    /// What the next 24 hours of measured demand would do as is and with the advice's
    /// layout changes (a simulation the loop runs off the render path; `None` until then).
    pub projection: Option<crate::simulate::projection::Projection>,
    /// A schedule change due now or within its lead (the loop sets it with the advice).
    pub banner: Option<crate::schedule::group::Banner>,
}

/// Lines the selected finding takes below the list in a body of `height` lines (none where
/// there is no room for both).
pub fn detail_height(height: usize) -> usize {
    if height >= 14 { 7 } else { 0 }
}

/// Findings the list shows in a body of `height` lines: less the selected finding below, the
/// counts line and the column heads.
pub fn list_rows(height: usize, projection: bool) -> usize {
    height.saturating_sub(detail_height(height) + 2 + usize::from(projection)).max(1)
}

impl Advice {
    /// New findings from the advisor at data time `now`: listed in the order asked for, the
    /// selection kept on its finding (`visible` rows in view), the finding the panel shows
    /// shown anew or marked gone.
    pub fn on_findings(&mut self, findings: Vec<crate::advisor::Finding>, now: DateTime<Utc>, visible: usize) {
        self.flagged = findings
            .iter()
            .filter(|f| f.severity >= crate::advisor::Severity::Warn)
            .flat_map(|f| f.cards.iter().cloned())
            .collect();
        self.counts = crate::advisor::counts(&findings);
        self.at = Some(now);
        self.list_findings(findings, visible);
        self.show_panel_finding();
    }

    /// `findings` in `order`, the selection kept on its finding where it is still listed.
    fn list_findings(&mut self, mut findings: Vec<crate::advisor::Finding>, visible: usize) {
        let kept = self.list.current().map(|x| (x.kind, x.subject.clone()));
        crate::advisor::order(&mut findings, self.order);
        self.list.rows = findings;
        if let Some(i) = kept.and_then(|(kind, subject)| self.finding_at(kind, &subject)) {
            self.list.selected = i;
        }
        self.list.clamp(visible);
    }

    /// Where the finding of `kind` about `subject` is listed now.
    pub fn finding_at(&self, kind: crate::advisor::Kind, subject: &crate::advisor::Subject) -> Option<usize> {
        self.list.rows.iter().position(|x| x.kind == kind && &x.subject == subject)
    }

    /// The other order (`s` in the view), the selection kept on its finding.
    pub fn toggle_order(&mut self, visible: usize) {
        self.order = self.order.toggled();
        self.list_findings(self.list.rows.clone(), visible);
    }

    /// The panel's finding as the latest pass has it, or, gone from it, said to be gone.
    fn show_panel_finding(&mut self) {
        let Some((kind, subject)) = self.panel_finding.clone() else { return };
        match self.finding_at(kind, &subject) {
            Some(i) => self.panel = Some(finding_panel(&self.list.rows[i])),
            None => {
                if let Some((title, lines)) = self.panel.as_mut()
                    && !lines.first().is_some_and(|l| l.starts_with(GONE))
                {
                    title.push_str(": gone");
                    // What it suggested is no longer advice: nothing to plan.
                    lines.retain(|l| !l.starts_with("  a plans it"));
                    lines.insert(0, format!("{GONE}: the latest advice no longer has it (Esc closes)"));
                }
            }
        }
    }
}

/// How a finding's panel begins once an advice pass no longer has the finding.
pub const GONE: &str = "this finding is gone";

/// A finding's panel: its kind and severity as the title, the finding in full.
pub fn finding_panel(x: &crate::advisor::Finding) -> (String, Vec<String>) {
    (format!("{} ({})", x.kind.as_str(), x.severity.as_str()), finding_lines(x))
}

/// A finding in full for the panel: what, the evidence, the cost, the suggestion.
fn finding_lines(x: &crate::advisor::Finding) -> Vec<String> {
    let mut out = vec![x.title.clone(), "evidence:".into()];
    out.extend(x.evidence.iter().map(|e| format!("  {e}")));
    // Waste for most kinds; for waiting work, what it would use or start (docs/advisor.md).
    out.push(format!("GPU-hours a day: {:.1}", x.gpu_hours_per_day));
    out.push(format!("suggestion: {}", x.suggestion.text()));
    if x.suggestion.action().is_some() {
        out.push("  a plans it (confirmation first)".into());
    }
    out
}
