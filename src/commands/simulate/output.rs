//! What `simulate` prints: the lines above the table, the table or the JSON, the picture.

use std::path::Path;

use serde_json::json;

use super::demand::Demand;
use super::options::Options;
use super::{SCHEMA_VERSION, pack_table, plot, table};
use crate::error::CmdError;
use crate::out;
use crate::simulate::{self, Fleet, Job, Packing, Settings};

fn fleet_json(f: &Fleet) -> serde_json::Value {
    let models: Vec<serde_json::Value> = f
        .models
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let gpus: u64 = f.nodes.iter().filter(|n| n.model as usize == i).map(|n| u64::from(n.gpus)).sum();
            json!({ "model": &*m.name, "gpus": gpus, "mig": m.mig.is_some() })
        })
        .collect();
    json!({ "gpus": f.gpus(), "nodes": f.nodes.len(), "models": models })
}

fn demand_json(d: &Demand) -> serde_json::Value {
    let gpu_hours: f64 = d.jobs.iter().map(Job::gpu_seconds).sum::<f64>() / 3600.0;
    json!({
        "source": d.source,
        "jobs": d.jobs.len(),
        "without_gpu": d.without_gpu,
        "skipped_lines": d.skipped,
        "gpu_hours": gpu_hours,
        "notes": d.notes,
    })
}

/// The JSON every mode shares (schema version, mode, demand, fleet) with the mode's own
/// fields after them.
fn envelope(mode: &str, d: &Demand, f: &Fleet, own: serde_json::Value) -> serde_json::Value {
    let mut v = json!({
        "schema_version": SCHEMA_VERSION,
        "mode": mode,
        "simulated": true,
        "demand": demand_json(d),
        "fleet": fleet_json(f),
    });
    if let (Some(all), serde_json::Value::Object(mine)) = (v.as_object_mut(), own) {
        all.extend(mine);
    }
    v
}

/// A packing's runs with how they ran.
pub(super) struct Packed {
    pub runs: Vec<Packing>,
    pub protocol: simulate::paper::Protocol,
    /// Pods packed from the input (CPU-only ones among them).
    pub pods: usize,
    pub cpu_only: usize,
}

/// The lines above the table: the demand, the fleet, the notes.
fn header(d: &Demand, f: &Fleet, extra: &str) -> String {
    let gpu_hours: f64 = d.jobs.iter().map(Job::gpu_seconds).sum::<f64>() / 3600.0;
    let models: Vec<String> = f
        .models
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let gpus: u64 = f.nodes.iter().filter(|n| n.model as usize == i).map(|n| u64::from(n.gpus)).sum();
            format!("{gpus}x{}", m.name)
        })
        .collect();
    let mut s = format!(
        "Demand: {}: {}, {:.1} GPU-hours asked{}\nFleet:  {} on {} ({}){extra}\n",
        d.source,
        crate::units::count(d.jobs.len() as u64, "GPU job", "GPU jobs"),
        gpu_hours,
        match (d.without_gpu, d.cpu_only.len()) {
            (0, _) => String::new(),
            (n, k) if k as u64 == n && extra.contains("packed") =>
                format!(" and {n} CPU-only pods (they take host CPU and memory)"),
            (n, _) => format!(" ({n} without a GPU left out)"),
        },
        crate::units::count(f.gpus(), "GPU", "GPUs"),
        crate::units::count(f.nodes.len() as u64, "node", "nodes"),
        models.join(", ")
    );
    for n in &d.notes {
        s.push_str(&format!("Note:   {n}\n"));
    }
    s.push_str("(a simulation: a what-if on this demand, not a measurement)\n\n");
    s
}

fn write_plot(path: &Path, svg: &str) -> Result<(), CmdError> {
    crate::files::write_atomic(path, svg.as_bytes())
        .map_err(|e| CmdError::Failed(format!("--plot {}: {e}", path.display())))
}

pub(super) fn finish_replay(
    o: &Options,
    cfg: &crate::config::Config,
    d: &Demand,
    f: &Fleet,
    s: &Settings,
    replays: &simulate::Replays,
    answers: &[simulate::Answer],
) -> Result<(), CmdError> {
    let reports = &replays.reports;
    if let Some(path) = &o.plot {
        write_plot(path, &plot::replay(&format!("tessera simulate: {}", d.source), reports))?;
    }
    let text = if o.json {
        let v = envelope(
            "replay",
            d,
            f,
            json!({
                "settings": {
                    "placement": s.placement,
                    "dynamic_placement": s.dynamic_placement,
                    "replicas": s.replicas,
                    "min_runtime_s": s.min_runtime_s,
                    "reconfigure_s": s.reconfigure_s,
                    "interval_s": s.interval_s,
                    "max_changes_per_hour": s.max_changes_per_hour,
                    "horizon_s": s.horizon_s,
                },
                "currency": cfg.advisor.currency,
                "window": replays.window,
                "policies": reports,
                "capacity": answers,
            }),
        );
        serde_json::to_string_pretty(&v).map_err(|e| CmdError::Failed(e.to_string()))? + "\n"
    } else {
        let dynamic = reports
            .iter()
            .find(|r| r.policy == simulate::Policy::Dynamic && r.placement != s.placement)
            .map(|r| format!(" (dynamic {}, as the Kubernetes scheduler allocates a claim)", r.placement.as_str()))
            .unwrap_or_default();
        let mut t = header(d, f, &format!("; placement {}{dynamic}", s.placement.as_str()));
        t.push_str(&table::replay(reports, &cfg.advisor.currency));
        t.push_str(&table::replay_notes(reports, replays.window));
        t.push_str(&table::capacity(answers, &cfg.advisor.currency));
        if let Some(p) = &o.plot {
            t.push_str(&format!("\nPicture: {}\n", p.display()));
        }
        t
    };
    out::print(&text)
}

pub(super) fn finish_packing(o: &Options, d: &Demand, f: &Fleet, p: &Packed) -> Result<(), CmdError> {
    let share = p.protocol.level;
    if let Some(path) = &o.plot {
        write_plot(path, &plot::packing(&format!("tessera simulate --pack: {}", d.source), &p.runs))?;
    }
    let text = if o.json {
        let pr = &p.protocol;
        let v = envelope(
            "packing",
            d,
            f,
            json!({
                "target_share": share,
                "protocol": {
                    "runs": pr.runs,
                    "seed": pr.seed,
                    "order": pr.order,
                    "holder_cap": pr.cap,
                    "levels": pr.levels,
                    "typical_percent": simulate::paper::TYPICAL_PERCENT,
                    "pods": p.pods,
                    "cpu_only_pods": p.cpu_only,
                },
                "packing": p.runs,
            }),
        );
        serde_json::to_string_pretty(&v).map_err(|e| CmdError::Failed(e.to_string()))? + "\n"
    } else {
        let pr = &p.protocol;
        let order = match pr.order {
            simulate::paper::Order::Shuffled => "shuffled per run",
            simulate::paper::Order::Trace => "in trace order",
        };
        let extra = format!(
            "; packed until the GPUs asked reach {:.0}% of the fleet\nRuns:   {} (seeds {}-{}), pods {order}{}",
            share * 100.0,
            pr.runs,
            pr.seed,
            pr.seed.saturating_add(i64::from(pr.runs) - 1),
            pr.cap.map_or(String::new(), |c| format!(", at most {c} holders a GPU")),
        );
        let mut t = header(d, f, &extra);
        t.push_str(&pack_table::packing(&p.runs, &pr.levels));
        if let Some(path) = &o.plot {
            t.push_str(&format!("\nPicture: {}\n", path.display()));
        }
        t
    };
    out::print(&text)
}
