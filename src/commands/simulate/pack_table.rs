//! A packing's text: the unallocated GPUs per arrived level and placement (median of the runs
//! with the min–max), then at the last level the fragmentation, the failures by cause, the
//! unallocated GPUs per model and the commonest failed shapes.

use std::fmt::Write;

use super::table::columns;
use crate::simulate::Packing;

fn name(p: &Packing, many_policies: bool) -> String {
    if many_policies { format!("{} {}", p.policy.as_str(), p.placement.as_str()) } else { p.placement.as_str().into() }
}

fn pct(share: f64) -> String {
    if share.is_finite() { format!("{:.2}", share * 100.0) } else { "-".into() }
}

/// The whole text.
pub fn packing(runs: &[Packing], levels: &[u32]) -> String {
    let many = runs.windows(2).any(|w| w[0].policy != w[1].policy);
    let n = runs.first().map_or(0, |p| p.runs);
    let mut out = String::new();
    let _ = writeln!(out, "Unallocated GPUs, % of the fleet, by GPUs arrived (median of {n} runs, min-max):");
    let mut rows = vec![std::iter::once("ARRIVED".to_string()).chain(runs.iter().map(|p| name(p, many))).collect()];
    for (i, l) in levels.iter().enumerate() {
        let mut row = vec![format!("{l}%")];
        for p in runs {
            row.push(p.levels.get(i).map_or("-".into(), |v| {
                if n > 1 {
                    format!("{} ({}-{})", pct(v.unallocated), pct(v.unallocated_min), pct(v.unallocated_max))
                } else {
                    pct(v.unallocated)
                }
            }));
        }
        rows.push(row);
    }
    columns(&mut out, &rows);
    let Some(last) = levels.len().checked_sub(1) else { return out };
    let _ = writeln!(out, "\nAt {}% arrived (median of the runs):", levels[last]);
    let mut rows = vec![
        ["PLACEMENT", "UNALLOC GPUs", "FRAG GPUs", "FRAG %", "PLACED", "FAILED", "CPU", "MEMORY", "GPU", "GPU MODEL"]
            .map(String::from)
            .to_vec(),
    ];
    for p in runs {
        let Some(v) = p.levels.get(last) else { continue };
        let cause = |c: &str| format!("{:.0}", v.failed_by_cause.get(c).copied().unwrap_or(0.0));
        rows.push(vec![
            name(p, many),
            format!("{:.1}", v.unallocated * p.gpus as f64),
            format!("{:.1}", v.frag_gpus),
            pct(v.frag_ratio),
            format!("{:.0}", v.placed),
            format!("{:.0}", v.failed),
            cause("cpu"),
            cause("memory"),
            cause("gpu"),
            cause("gpu_model"),
        ]);
    }
    columns(&mut out, &rows);
    let _ = writeln!(out, "\nUnallocated GPUs per model at {}% arrived (median of the runs):", levels[last]);
    let models: Vec<String> = runs
        .first()
        .and_then(|p| p.levels.get(last))
        .map(|v| v.unallocated_by_model.iter().map(|m| format!("{} ({})", m.model, m.gpus)).collect())
        .unwrap_or_default();
    let mut rows = vec![std::iter::once("PLACEMENT".to_string()).chain(models).collect::<Vec<_>>()];
    for p in runs {
        let Some(v) = p.levels.get(last) else { continue };
        rows.push(
            std::iter::once(name(p, many))
                .chain(v.unallocated_by_model.iter().map(|m| format!("{:.1}", m.unallocated)))
                .collect(),
        );
    }
    columns(&mut out, &rows);
    let _ = writeln!(out, "\nFailed pods by shape and cause (per run, the commonest five):");
    for p in runs {
        let top: Vec<String> = p
            .failed_by_shape
            .iter()
            .take(5)
            .map(|f| format!("{} for {} {:.1}", f.shape, f.cause.as_str(), f.per_run))
            .collect();
        let _ =
            writeln!(out, "  {:<14} {}", name(p, many), if top.is_empty() { "none".into() } else { top.join("; ") });
    }
    out
}
