//! `simulate`'s text: the demand and fleet it ran, a row per policy, the capacity answers
//! (packing's text: pack_table.rs).

use std::fmt::Write;

use crate::simulate::{Answer, Report};

/// Seconds as the table shows a wait: `0`, `45s`, `12m`, `3.4h`, `2.1d`.
pub fn wait(s: i64) -> String {
    match s {
        0 => "0".into(),
        1..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{:.1}h", s as f64 / 3600.0),
        _ => format!("{:.1}d", s as f64 / 86_400.0),
    }
}

fn pct(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

fn hours(v: f64) -> String {
    if v < 10.0 { format!("{v:.1}") } else { format!("{v:.0}") }
}

/// A row per policy under a header.
pub fn replay(reports: &[Report], currency: &str) -> String {
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
    let priced = reports.iter().any(|r| r.idle_cost.is_some());
    if priced {
        rows[0].push(format!("IDLE {currency}"));
    }
    for r in reports {
        let inf = r.waits.iter().find(|w| w.class == "inference").map_or("-".to_string(), |w| wait(w.p90_s));
        let mut row = vec![
            r.policy.as_str().to_string(),
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

/// The capacity answers, a line per policy.
pub fn capacity(answers: &[Answer]) -> String {
    let mut out = String::new();
    if let Some(a) = answers.first() {
        let _ = writeln!(out, "\nFewest GPUs for a p90 wait of {} or less:", wait(a.target_p90_wait_s));
    }
    for a in answers {
        let _ = match (a.gpus, a.p90_wait_s) {
            (Some(g), Some(p)) => {
                writeln!(out, "  {:<10} {g:>6} GPUs  (p90 wait {}; {} replays)", a.policy.as_str(), wait(p), a.runs)
            }
            _ => writeln!(
                out,
                "  {:<10} not met with up to {}x the fleet ({} replays)",
                a.policy.as_str(),
                crate::simulate::search::MAX_GROWTH,
                a.runs
            ),
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_read_at_a_glance() {
        assert_eq!(wait(0), "0");
        assert_eq!(wait(45), "45s");
        assert_eq!(wait(600), "10m");
        assert_eq!(wait(3 * 3600), "3.0h");
        assert_eq!(wait(3 * 86_400), "3.0d");
    }
}
