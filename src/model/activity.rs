//! Compute activity per workload over time: what a held card or instance is doing now and on
//! average over a window, so "held but idle" can be told from "busy". The store records one
//! sample per merged update into one-minute buckets (bounded: `KEEP_MIN` buckets a workload)
//! and writes each workload's `Activity`. Pure data; the data's clock, not the wall clock.

use std::collections::{HashMap, VecDeque};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::fleet::{Card, CardHistory, CardRef, Fleet};
use super::workload::Workload;

/// Below this mean activity a held workload is idle (peers' default: DCGM-based idle reports
/// and the advisor's threshold, 5 %).
pub const IDLE_BELOW_PCT: f64 = 5.0;
/// The window the mean covers, and how long it must be covered before "idle" is said.
pub const WINDOW_MIN: i64 = 30;
/// Minutes of history kept per workload (the advisor's longest window).
pub const KEEP_MIN: i64 = 120;

/// A workload's activity: now, and the mean over the last `WINDOW_MIN` minutes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct Activity {
    pub now_pct: Option<f64>,
    pub mean_pct: Option<f64>,
    /// Seconds of the window that have samples: minutes with at least one, times 60 (less
    /// while the workload is young, tessera has just started, or its source was down).
    pub covered_s: u64,
    /// How long it has been idle without a break, back from now, over the kept history
    /// (`KEEP_MIN`): minutes with samples, all below the idle threshold, times 60.
    pub idle_for_s: u64,
    /// The most memory it was seen using over the kept history, where a source reports it:
    /// waste and sizing are judged on the peak, not on one moment.
    pub peak_mem_mib: Option<u64>,
    /// The mean over the last `HOUR_MIN` minutes, once all but two of them have samples (the
    /// scale-in window); `None` before.
    pub mean_1h_pct: Option<f64>,
}

/// The scale-in window, minutes.
pub const HOUR_MIN: i64 = 60;

impl Activity {
    /// The window has samples in all but two of its minutes: enough to judge a mean.
    pub fn window_covered(&self) -> bool {
        self.covered_s >= ((WINDOW_MIN - 2) * 60) as u64
    }

    /// Held, and below the idle threshold for the whole (covered) window, and idle now: never
    /// said from missing or frozen data.
    pub fn held_idle(&self) -> bool {
        self.window_covered()
            && self.mean_pct.is_some_and(|m| m < IDLE_BELOW_PCT)
            && self.now_pct.is_some_and(|n| n < IDLE_BELOW_PCT)
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    minute: i64,
    sum: f32,
    n: u16,
    /// The most memory in use seen in this minute (MiB), if any sample had it.
    mem: Option<u64>,
}

#[derive(Debug, Default)]
struct Series {
    buckets: VecDeque<Bucket>,
    last: Option<f64>,
}

impl Series {
    fn add(&mut self, minute: i64, pct: f64, mem: Option<u64>) {
        match self.buckets.back_mut() {
            Some(b) if b.minute == minute => {
                b.sum += pct as f32;
                b.n = b.n.saturating_add(1);
                b.mem = b.mem.max(mem);
            }
            Some(b) if b.minute > minute => {}
            _ => self.buckets.push_back(Bucket { minute, sum: pct as f32, n: 1, mem }),
        }
        while self.buckets.front().is_some_and(|b| b.minute <= minute - KEEP_MIN) {
            self.buckets.pop_front();
        }
    }

    /// The mean over the last `minutes`, when all but two of them have samples.
    fn mean_over(&self, now_min: i64, minutes: i64) -> Option<f64> {
        let recent = self.buckets.iter().filter(|b| b.minute > now_min - minutes);
        let (sum, n, buckets) =
            recent.fold((0.0f64, 0u32, 0i64), |(s, n, k), b| (s + f64::from(b.sum), n + u32::from(b.n), k + 1));
        (buckets >= minutes - 2 && n > 0).then(|| sum / f64::from(n))
    }

    fn activity(&self, now_min: i64) -> Activity {
        let recent: Vec<&Bucket> = self.buckets.iter().filter(|b| b.minute > now_min - WINDOW_MIN).collect();
        let (sum, n) = recent.iter().fold((0.0f64, 0u32), |(s, n), b| (s + f64::from(b.sum), n + u32::from(b.n)));
        let covered_s = recent.len() as u64 * 60;
        let idle = |b: &&Bucket| f64::from(b.sum) / f64::from(b.n.max(1)) < IDLE_BELOW_PCT;
        let streak = if self.last.is_some_and(|n| n < IDLE_BELOW_PCT) {
            self.buckets.iter().rev().take_while(idle).count() as u64
        } else {
            0
        };
        Activity {
            now_pct: self.last.map(hundredths),
            mean_pct: (n > 0).then(|| hundredths(sum / f64::from(n))),
            covered_s,
            idle_for_s: streak * 60,
            peak_mem_mib: self.buckets.iter().filter_map(|b| b.mem).max(),
            mean_1h_pct: self.mean_over(now_min, HOUR_MIN).map(hundredths),
        }
    }
}

/// A percentage to a hundredth: far finer than any threshold or screen uses, and a recording
/// then keeps a few digits a mean, not seventeen.
fn hundredths(pct: f64) -> f64 {
    (pct * 100.0).round() / 100.0
}

/// What a workload's cards or MIG instances do now: the mean of their activity, where known.
pub fn current_pct(fleet: &Fleet, w: &Workload) -> Option<f64> {
    pct_of(&|r| fleet.card(r), w)
}

/// Memory `w` uses now: what its source says, else the memory in use of the one card or MIG
/// instance it holds alone (an exporter reports the card's, not the job's); `None` otherwise.
fn mem_of<'f>(card: &dyn Fn(&CardRef) -> Option<&'f Card>, w: &Workload) -> Option<u64> {
    if w.memory_used_mib.is_some() {
        return w.memory_used_mib;
    }
    let [r] = w.cards.as_slice() else { return None };
    let c = card(r)?;
    if c.mig.enabled {
        let mine: Vec<_> = c.mig.instances.iter().filter(|i| i.workloads.contains(&w.id)).collect();
        match mine.as_slice() {
            [i] if i.workloads.len() == 1 => i.memory_used_mib,
            _ => None,
        }
    } else if c.workloads.len() == 1 && c.workloads[0] == w.id {
        c.memory_used_mib
    } else {
        None
    }
}

fn pct_of<'f>(card: &dyn Fn(&CardRef) -> Option<&'f Card>, w: &Workload) -> Option<f64> {
    let mut vals = Vec::new();
    for r in &w.cards {
        let Some(c) = card(r) else { continue };
        if c.mig.enabled {
            vals.extend(
                c.mig.instances.iter().filter(|i| i.workloads.contains(&w.id)).filter_map(|i| i.utilization_pct),
            );
        } else if let Some(u) = c.utilization_pct {
            vals.push(u);
        }
    }
    (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
}

/// Activity samples of every running workload.
#[derive(Debug, Default)]
pub struct ActivityHistory {
    series: HashMap<String, Series>,
}

impl ActivityHistory {
    /// Record the fleet at its data time and write each active workload's `activity`. Only
    /// cards some live source reports are sampled: a stale source's frozen numbers are not
    /// activity.
    pub fn record(&mut self, fleet: &mut Fleet) {
        let Some(at) = fleet.taken_at else { return };
        let minute = at.timestamp().div_euclid(60);
        let live: std::collections::HashSet<&str> = fleet
            .sources
            .iter()
            .filter(|s| matches!(s.health, super::source::SourceHealth::Live { .. }))
            .map(|s| s.name.as_str())
            .collect();
        // One pass to index the nodes: thousands of workloads look their cards up.
        let nodes: HashMap<&str, &super::fleet::Node> = fleet
            .nodes
            .iter()
            .filter(|n| n.sources.iter().any(|s| live.contains(s.as_str())))
            .map(|n| (n.name.as_str(), n))
            .collect();
        let card = |r: &CardRef| nodes.get(r.node.as_str()).and_then(|n| n.cards.iter().find(|c| c.index == r.index));
        let now: Vec<(usize, Option<f64>, Option<u64>)> = fleet
            .workloads
            .iter()
            .enumerate()
            .filter(|(_, w)| w.state.is_active() && !w.cards.is_empty())
            .map(|(i, w)| (i, pct_of(&card, w), mem_of(&card, w)))
            .collect();
        let mut alive = std::collections::HashSet::new();
        for (i, pct, mem) in now {
            let w = &mut fleet.workloads[i];
            let s = self.series.entry(w.id.clone()).or_default();
            s.last = pct;
            if let Some(p) = pct {
                s.add(minute, p, mem);
            }
            w.activity = Some(s.activity(minute));
            alive.insert(i);
        }
        // A workload that stopped or left forgets its samples (a restart starts afresh).
        let active: std::collections::HashSet<&str> = alive.iter().map(|&i| fleet.workloads[i].id.as_str()).collect();
        self.series.retain(|id, _| active.contains(id.as_str()));
    }

    /// Seed workloads with no samples yet from a source's card history (Prometheus, the
    /// simulator): a whole card's utilisation series is its one holder's activity, and a MIG
    /// instance's series its holder's.
    pub fn seed(&mut self, fleet: &Fleet, history: &[CardHistory]) {
        let Some(at) = fleet.taken_at else { return };
        for h in history {
            let Some(c) = fleet.card(&h.card) else { continue };
            let holders = match h.gi {
                None if !c.mig.enabled => &c.workloads,
                Some(gi) if c.mig.enabled => match c.mig.instances.iter().find(|i| i.gi_id == gi) {
                    Some(i) => &i.workloads,
                    None => continue,
                },
                _ => continue,
            };
            let [holder] = holders.as_slice() else { continue };
            // Only what happened since the holder started: the card's past before it (idle, or
            // another job's memory) is not its activity. No start time, no seeding.
            let Some(started) = fleet.workload(holder).and_then(|w| w.started_at) else { continue };
            let s = self.series.entry(holder.clone()).or_default();
            if !s.buckets.is_empty() {
                continue;
            }
            let n = h.util.len() as i64;
            for (i, u) in h.util.iter().enumerate() {
                let t: DateTime<Utc> = at - chrono::Duration::seconds((n - 1 - i as i64) * h.step_s as i64);
                if t < started {
                    continue;
                }
                if let Some(u) = u {
                    let mem = h.mem_mib.get(i).copied().flatten().map(|m| m as u64);
                    s.add(t.timestamp().div_euclid(60), *u, mem);
                }
            }
        }
    }

    /// Workloads with samples (for tests and benchmarks).
    pub fn len(&self) -> usize {
        self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Node, WorkloadKind, WorkloadState};

    fn fleet(util: f64, at: DateTime<Utc>) -> Fleet {
        let card = Card { index: 0, utilization_pct: Some(util), workloads: vec!["nb".into()], ..Card::default() };
        let node = Node { name: "n".into(), schedulable: true, cards: vec![card], ..Node::default() };
        let mut w = Workload::new("nb", "notebook", WorkloadKind::Other, WorkloadState::Running);
        w.cards = vec![CardRef::new("n", 0)];
        w.started_at = Some(at - chrono::Duration::hours(3));
        let live = crate::model::SourceStatus {
            name: "dcgm".into(),
            kind: crate::model::SourceKind::Scrape,
            health: crate::model::SourceHealth::Live { at },
            interval: std::time::Duration::from_secs(1),
            note: None,
            last_ok: None,
            reported: Default::default(),
            queue: false,
        };
        let mut f = Fleet {
            nodes: vec![node],
            workloads: vec![w],
            taken_at: Some(at),
            sources: vec![live],
            ..Fleet::default()
        };
        f.nodes[0].sources = vec!["dcgm".into()];
        f.index_workloads();
        f
    }

    #[test]
    fn idle_only_after_a_whole_window_below_the_threshold() {
        let t0 = DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        let mut h = ActivityHistory::default();
        let mut last = None;
        for m in 0..40 {
            let mut f = fleet(1.0, t0 + chrono::Duration::minutes(m));
            h.record(&mut f);
            last = f.workloads[0].activity;
            if m == 10 {
                assert!(!last.is_some_and(|a| a.held_idle()), "10 minutes are not enough");
            }
        }
        let a = last.unwrap_or_else(|| panic!("no activity"));
        assert!(a.held_idle(), "{a:?}");
        assert_eq!(a.mean_pct, Some(1.0));
        // Busy again: not idle at once, whatever the mean says.
        let mut f = fleet(80.0, t0 + chrono::Duration::minutes(41));
        h.record(&mut f);
        assert!(!f.workloads[0].activity.is_some_and(|a| a.held_idle()));
    }

    #[test]
    fn frozen_or_missing_data_is_never_idle() {
        let t0 = DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        let mut h = ActivityHistory::default();
        // One sample, then its source goes stale: the numbers stay on screen, frozen.
        let mut f = fleet(1.0, t0);
        h.record(&mut f);
        for m in 1..40 {
            let mut f = fleet(1.0, t0 + chrono::Duration::minutes(m));
            f.sources[0].health = crate::model::SourceHealth::Stale { since: t0, error: None };
            h.record(&mut f);
            assert!(!f.workloads[0].activity.is_some_and(|a| a.held_idle()), "minute {m}");
        }
    }

    #[test]
    fn the_hour_mean_waits_for_an_hour() {
        let mut s = Series::default();
        for m in 0..40 {
            s.add(m, 20.0, None);
        }
        assert_eq!(s.activity(39).mean_1h_pct, None, "40 minutes are not an hour");
        for m in 40..60 {
            s.add(m, 80.0, None);
        }
        let a = s.activity(59);
        assert_eq!(a.mean_1h_pct, Some(40.0), "(40 × 20 + 20 × 80) / 60");
        assert_eq!(a.mean_pct, Some(60.0), "the last 30 minutes: 10 × 20 + 20 × 80");
    }

    #[test]
    fn the_peak_memory_is_the_most_seen_over_the_kept_history() {
        let mut s = Series::default();
        s.add(100, 50.0, Some(30_000));
        s.add(101, 50.0, Some(12_000));
        s.add(102, 50.0, None);
        assert_eq!(s.activity(102).peak_mem_mib, Some(30_000));
        // Two hours on, the spike has left the kept history.
        s.add(100 + KEEP_MIN, 50.0, Some(12_000));
        assert_eq!(s.activity(100 + KEEP_MIN).peak_mem_mib, Some(12_000));
    }

    #[test]
    fn an_instance_history_seeds_its_holder_with_its_peak_memory() {
        let t = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 3, 2, 12, 0, 0).single().unwrap_or_default();
        let mut card = Card { model: "NVIDIA A100-SXM4-80GB".into(), ..Card::default() };
        card.mig = crate::model::MigState::from_layout(&card.model, "3g.40gb@0,3g.40gb@4");
        card.mig.instances[1].workloads.push("w".into());
        let node = Node { name: "n".into(), schedulable: true, cards: vec![card], ..Node::default() };
        let mut w = Workload::new("w", "w", WorkloadKind::Inference, WorkloadState::Running);
        w.cards = vec![CardRef::new("n", 0)];
        w.started_at = Some(t - chrono::Duration::hours(3));
        let f = Fleet { nodes: vec![node], workloads: vec![w], taken_at: Some(t), ..Fleet::default() };
        let gi = f.nodes[0].cards[0].mig.instances[1].gi_id;
        let mut mem = vec![Some(10_240.0); 60];
        mem[10] = Some(30_720.0);
        let hist = CardHistory {
            card: CardRef::new("n", 0),
            gi: Some(gi),
            mem_mib: mem,
            step_s: 60,
            util: vec![Some(40.0); 60],
            mem_pct: vec![],
        };
        let mut h = ActivityHistory::default();
        h.seed(&f, &[hist]);
        let a = h.series["w"].activity(t.timestamp().div_euclid(60));
        assert!(a.window_covered(), "{a:?}");
        assert_eq!(a.peak_mem_mib, Some(30_720));
    }

    #[test]
    fn a_card_history_seeds_its_holder() {
        let t0 = DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        let mut f = fleet(1.0, t0);
        let hist = CardHistory {
            card: CardRef::new("n", 0),
            gi: None,
            mem_mib: vec![],
            step_s: 60,
            util: vec![Some(1.0); 60],
            mem_pct: vec![],
        };
        let mut h = ActivityHistory::default();
        h.seed(&f, std::slice::from_ref(&hist));
        h.record(&mut f);
        assert!(f.workloads[0].activity.is_some_and(|a| a.held_idle()), "{:?}", f.workloads[0].activity);
        assert_eq!(h.len(), 1);
        // A job that started five minutes ago is not given the card's idle hour before it.
        let mut young = fleet(1.0, t0);
        young.workloads[0].started_at = Some(t0 - chrono::Duration::minutes(5));
        let mut h = ActivityHistory::default();
        h.seed(&young, std::slice::from_ref(&hist));
        h.record(&mut young);
        let a = young.workloads[0].activity.unwrap_or_else(|| panic!("recorded"));
        assert!(a.idle_for_s <= 6 * 60 && !a.window_covered(), "{a:?}");
        // No start time: nothing seeded.
        young.workloads[0].started_at = None;
        let mut h = ActivityHistory::default();
        h.seed(&young, &[hist]);
        assert!(h.is_empty());
    }
}
