//! `simulate`'s text: the demand and fleet it ran, a row per policy, the capacity answers
//! (packing's text: pack_table.rs).

use std::fmt::Write;

use crate::simulate::{Answer, Period, Report};

/// Seconds as the table shows a wait: `0`, `45s`, `12m`, `3.4h`, `2.1d`.
pub fn wait(s: i64) -> String {
    crate::simulate::metrics::format_wait(s)
}

/// A share as a percentage: whole, but a share under 1 % keeps a decimal (`0.3%`: a held share
/// that small read `0%`, as if nothing were held).
fn pct(v: f64) -> String {
    let p = v * 100.0;
    if p > 0.0 && p < 0.95 { format!("{p:.1}%") } else { format!("{}%", crate::units::whole(p)) }
}

fn hours(v: f64) -> String {
    if v < 10.0 { format!("{v:.1}") } else { format!("{v:.0}") }
}

/// A row per policy under a header.
pub fn replay(reports: &[Report], currency: &str) -> String {
    let labelled: Vec<(String, &Report)> = reports.iter().map(|r| (r.policy.as_str().to_string(), r)).collect();
    rows(&labelled, currency)
}

/// A row per report, each under its label.
fn rows(reports: &[(String, &Report)], currency: &str) -> String {
    let mut out = String::new();
    let head = [
        "POLICY",
        "GPUS",
        "HELD",
        "USED/HELD",
        "WAIT p50",
        "p90",
        "p99",
        "INF p90",
        "NOT RUN",
        "PREEMPT",
        "LOST GPU-h",
        "RECONF",
        "INTERF h",
        "IDLE GPU-h",
    ];
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    let priced = reports.iter().any(|(_, r)| r.idle_cost.is_some());
    if priced {
        rows[0].push(format!("IDLE {currency}"));
    }
    for (label, r) in reports {
        let inf = r.waits.iter().find(|w| w.class == "inference").map_or("-".to_string(), |w| wait(w.p90_s));
        let mut row = vec![
            label.clone(),
            r.gpus.to_string(),
            pct(r.held_mean),
            r.used_of_held.map_or("-".to_string(), pct),
            wait(r.wait.p50_s),
            wait(r.wait.p90_s),
            wait(r.wait.p99_s),
            inf,
            (r.never_started + r.unplaceable).to_string(),
            r.preemptions.to_string(),
            hours(r.lost_gpu_hours),
            r.reconfigurations.to_string(),
            hours(r.interference_hours),
            hours(r.idle_gpu_hours),
        ];
        if priced {
            row.push(r.idle_cost.map_or("-".to_string(), |c| format!("{c:.0}")));
        }
        rows.push(row);
    }
    columns(&mut out, &rows);
    out
}

/// The lines under the rows: the one window they were measured over, and each cause of
/// work not run, per policy.
pub fn replay_notes(reports: &[Report], window: Period) -> String {
    let mut out = String::new();
    let span = window.end_s - window.start_s;
    let _ = writeln!(
        out,
        "\nEvery row above is measured over one window: {} from the first arrival (to the latest end of the work that started, under any policy, or --horizon).",
        wait(span)
    );
    for r in reports {
        for n in &r.not_run {
            let _ = writeln!(out, "Not run under {}: {}", r.policy.as_str(), n.text);
        }
    }
    out
}

/// Left-aligned first column, the rest right-aligned, two spaces apart.
pub(super) fn columns(out: &mut String, rows: &[Vec<String>]) {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> =
        (0..n).map(|i| rows.iter().filter_map(|r| r.get(i)).map(|c| c.chars().count()).max().unwrap_or(0)).collect();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i == 0 {
                let _ = write!(line, "{c:<w$}", w = widths[0]);
            } else {
                let _ = write!(line, "  {c:>w$}", w = widths[i]);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// The capacity answers: each found size's own replay as a row (labelled with the fleet
/// it ran on), then per policy the nodes it takes and what decided it.
pub fn capacity(answers: &[Answer], currency: &str) -> String {
    let mut out = String::new();
    let Some(first) = answers.first() else { return out };
    let _ = writeln!(
        out,
        "\nFewest GPUs for a p90 wait of {} or less (every job the fleet can host started), each size replayed:",
        wait(first.target_p90_wait_s)
    );
    let labelled: Vec<(String, &Report)> =
        answers.iter().filter_map(|a| a.row.as_ref().map(|r| (format!("{} fewest", a.policy.as_str()), r))).collect();
    if !labelled.is_empty() {
        out.push_str(&rows(&labelled, currency));
    }
    for a in answers {
        let p = a.policy.as_str();
        match (a.gpus, &a.binding) {
            (Some(g), Some(b)) => {
                let nodes: Vec<&str> = a.fleet.iter().map(|x| x.text.as_str()).collect();
                let how = if a.method == "exhaustive" { "every count tried" } else { "searched" };
                let grown = if a.grown > 1 { format!(", the list grown {}x", a.grown) } else { String::new() };
                let runs = crate::units::count(a.runs, "replay", "replays");
                let _ = writeln!(out, "  {p}: {g} GPUs = {} ({how}{grown}; {runs})", nodes.join(" + "));
                let _ = writeln!(out, "    decided by {}", b.text);
            }
            _ => {
                let _ = writeln!(
                    out,
                    "  {p}: not met with up to {}x the fleet ({})",
                    crate::simulate::search::MAX_GROWTH,
                    crate::units::count(a.runs, "replay", "replays")
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #47 (words): a held share under 1 % is not `0%`.
    #[test]
    fn small_shares_keep_a_decimal() {
        assert_eq!(pct(0.003), "0.3%");
        assert_eq!(pct(0.0), "0%");
        assert_eq!(pct(0.42), "42%");
        assert_eq!(pct(0.0099), "1%");
    }

    #[test]
    fn waits_read_at_a_glance() {
        assert_eq!(wait(0), "0");
        assert_eq!(wait(45), "45s");
        assert_eq!(wait(600), "10m");
        assert_eq!(wait(3 * 3600), "3.0h");
        assert_eq!(wait(3 * 86_400), "3.0d");
    }
}
