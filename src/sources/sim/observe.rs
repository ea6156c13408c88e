//! What the simulated cluster reports: live metrics of every card and MIG instance from the
//! jobs on them, and the past two hours of them (metrics are a pure function of the job and
//! the time, so the past is computed, not stored).

use chrono::Duration as Span;

use super::Sim;
use super::jobs::Job;
use super::rng::noise;
use crate::model::{CardRef, Node};

impl Sim {
    /// Each held whole card's and MIG instance's utilisation over the history the model keeps
    /// (`KEEP_MIN`, two hours: the advisor's longest window, so held-idle can reach its `idle_high`
    /// level at once), one sample a minute: metrics are a pure function of the job and the
    /// time, so the past is computed, not stored.
    pub(super) fn past_history(&self) -> Vec<crate::model::CardHistory> {
        const MINUTES: i64 = crate::model::activity::KEEP_MIN;
        let by_id: foldhash::HashMap<&str, &Job> = self.jobs.iter().map(|j| (j.w.id.as_str(), j)).collect();
        let series = |j: &Job| -> Vec<Option<f32>> {
            (0..MINUTES)
                .rev()
                .map(|m| {
                    let t = self.now - Span::minutes(m);
                    j.w.started_at.filter(|s| *s <= t).map(|_| round1(j.utilization(t)) as f32)
                })
                .collect()
        };
        let mut out = Vec::new();
        for n in &self.nodes {
            for c in n.cards.iter().filter(|c| !c.health.lost) {
                let card = CardRef::new(n.name.clone(), c.index);
                let held: Vec<(Option<u32>, &String)> = if c.mig.enabled {
                    c.mig.instances.iter().filter_map(|i| Some((Some(i.gi_id), i.workloads.first()?))).collect()
                } else if c.sharing.unit.is_some() {
                    // Several holders share the card: its history is nobody's alone.
                    Vec::new()
                } else {
                    c.workloads.first().map(|w| (None, w)).into_iter().collect()
                };
                for (gi, id) in held {
                    let Some(j) = by_id.get(id.as_str()) else { continue };
                    let util = series(j);
                    out.push(crate::model::CardHistory {
                        card: card.clone(),
                        gi,
                        mem_mib: vec![Some(j.mem_mib as f32); MINUTES as usize],
                        step_s: 60,
                        util,
                        mem_pct: Vec::new(),
                    });
                }
            }
        }
        out
    }

    /// Nodes with live metrics filled in from the jobs on them.
    pub(super) fn observed_nodes(&self) -> Vec<Node> {
        let now = self.now;
        let by_id: foldhash::HashMap<&str, &Job> = self.jobs.iter().map(|j| (j.w.id.as_str(), j)).collect();
        let job = |id: &str| by_id.get(id).copied();
        let mut nodes = self.nodes.clone();
        for n in &mut nodes {
            for c in n.cards.iter_mut().filter(|c| !c.health.lost) {
                let mut util = 0.0;
                let mut used = 0u64;
                if c.mig.enabled {
                    for inst in &mut c.mig.instances {
                        let j = inst.workloads.first().and_then(|id| job(id));
                        let u = j.map_or(0.0, |j| j.utilization(now));
                        inst.utilization_pct = Some(round1(u));
                        inst.memory_used_mib = Some(j.map_or(0, |j| j.mem_mib));
                        util += u * f64::from(inst.size) / 8.0;
                        used += inst.memory_used_mib.unwrap_or(0);
                    }
                    // Like NVML and DCGM, no whole-card utilisation for a MIG card.
                    c.utilization_pct = None;
                } else if c.sharing.unit.is_some() {
                    // Time-sliced or MPS: busy whenever any replica runs (the sum, up to 100 %),
                    // and every replica's memory on one card.
                    let jobs: Vec<&Job> = c.workloads.iter().filter_map(|id| job(id)).collect();
                    util = jobs.iter().map(|j| j.utilization(now)).sum::<f64>().min(100.0);
                    used = jobs.iter().map(|j| j.mem_mib).sum();
                    c.utilization_pct = Some(round1(util));
                    let n = u32::try_from(c.workloads.len()).unwrap_or(u32::MAX);
                    c.sharing.replicas_used = Some(n);
                    c.sharing.contexts = Some(n);
                } else {
                    let j = c.workloads.first().and_then(|id| job(id));
                    util = j.map_or(0.0, |j| j.utilization(now));
                    used = j.map_or(0, |j| j.mem_mib / j.w.cards.len().max(1) as u64);
                    c.utilization_pct = Some(round1(util));
                    // One process per job: what NVML's compute list would show.
                    c.sharing.contexts = Some(u32::from(j.is_some()));
                }
                let key = c.uuid.as_deref().map_or(0, |u| u.len() as u64 + u64::from(c.index) * 7919);
                let tdp = c.power_limit_w.unwrap_or(400.0);
                // The driver's own few MiB, never past the card's total.
                c.memory_used_mib = Some((used + 5).min(c.memory_total_mib.unwrap_or(u64::MAX)));
                c.temperature_c = Some((31.0 + 0.42 * util + 1.5 * noise(key, now.timestamp() / 30)).round());
                c.power_w =
                    Some(round1(tdp * 0.12 + (tdp * 0.83) * util / 100.0 + 4.0 * noise(key ^ 1, now.timestamp() / 5)));
            }
        }
        nodes
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
