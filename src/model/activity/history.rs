//! The activity recorder: the store records one sample per merged update into one-minute
//! buckets (bounded: `KEEP_MIN` buckets a workload) and writes each workload's `Activity`.
//! The data's clock, not the wall clock.

use std::collections::VecDeque;

/// Maps keyed by workload ids and node names: foldhash, as in the scrape mapping (tens of
/// thousands of lookups a record).
type HashMap<K, V> = foldhash::HashMap<K, V>;

use chrono::{DateTime, Utc};

use super::{Activity, HOUR_MIN, IDLE_BELOW_PCT, KEEP_MIN, WINDOW_MIN};
use crate::model::card_ref::CardRef;
use crate::model::fleet::{Card, CardHistory, Fleet};
use crate::model::workload::Workload;

/// One minute of a workload's samples, in 12 bytes: tens of thousands of workloads keep up to
/// `KEEP_MIN` of them (32 bytes each made 180 MB at 32,768 cards; 16 bytes, with a `u32`
/// offset, 90 MB).
#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Minutes after the series' `base`.
    at: u16,
    sum: f32,
    n: u16,
    /// The most memory in use seen in this minute (MiB), or `NO_MEM` if no sample had it.
    mem: u32,
}

/// A minute with no memory reading.
const NO_MEM: u32 = u32::MAX;

impl Bucket {
    fn mem(&self) -> Option<u64> {
        (self.mem != NO_MEM).then_some(u64::from(self.mem))
    }
}

/// MiB as a bucket keeps it (up to 4 PiB: more than any card).
fn mem_cell(mem: Option<u64>) -> u32 {
    mem.map_or(NO_MEM, |m| u32::try_from(m).unwrap_or(NO_MEM - 1).min(NO_MEM - 1))
}

#[derive(Debug, Default)]
struct Series {
    /// The minute bucket offsets count from.
    base: i64,
    buckets: VecDeque<Bucket>,
    last: Option<f64>,
    /// The record that last saw its workload active (`ActivityHistory::records`).
    seen: u64,
}

impl Series {
    fn minute(&self, b: &Bucket) -> i64 {
        self.base + i64::from(b.at)
    }

    fn add(&mut self, minute: i64, pct: f64, mem: Option<u64>) {
        while self.buckets.front().is_some_and(|b| self.base + i64::from(b.at) <= minute - KEEP_MIN) {
            self.buckets.pop_front();
        }
        if self.buckets.is_empty() {
            self.base = minute;
        }
        let Some(back) = self.buckets.back().map(|b| self.minute(b)) else {
            self.buckets.push_back(Bucket { at: 0, sum: pct as f32, n: 1, mem: mem_cell(mem) });
            return;
        };
        if back > minute {
            return;
        }
        if back == minute {
            if let Some(b) = self.buckets.back_mut() {
                b.sum += pct as f32;
                b.n = b.n.saturating_add(1);
                b.mem = mem_cell(b.mem().max(mem));
            }
            return;
        }
        // The kept minutes span at most `KEEP_MIN`; a base that old is moved up to the first.
        if minute - self.base > i64::from(u16::MAX / 2) {
            let first = self.buckets.front().map_or(0, |b| b.at);
            self.base += i64::from(first);
            for b in &mut self.buckets {
                b.at -= first;
            }
        }
        let at = u16::try_from(minute - self.base).unwrap_or(u16::MAX);
        self.buckets.push_back(Bucket { at, sum: pct as f32, n: 1, mem: mem_cell(mem) });
    }

    /// The mean over the last `minutes`, when all but two of them have samples.
    fn mean_over(&self, now_min: i64, minutes: i64) -> Option<f64> {
        let recent = self.buckets.iter().filter(|b| self.minute(b) > now_min - minutes);
        let (sum, n, buckets) =
            recent.fold((0.0f64, 0u32, 0i64), |(s, n, k), b| (s + f64::from(b.sum), n + u32::from(b.n), k + 1));
        (buckets >= minutes - 2 && n > 0).then(|| sum / f64::from(n))
    }

    fn activity(&self, now_min: i64) -> Activity {
        // One pass over the kept minutes (oldest first): the window's sum and coverage, the
        // peak memory, and the run of idle minutes back from now.
        let (mut sum, mut n, mut covered) = (0.0f64, 0u32, 0u64);
        let (mut peak, mut streak) = (None, 0u64);
        for b in &self.buckets {
            if self.minute(b) > now_min - WINDOW_MIN {
                sum += f64::from(b.sum);
                n += u32::from(b.n);
                covered += 1;
            }
            peak = peak.max(b.mem());
            streak = if f64::from(b.sum) / f64::from(b.n.max(1)) < IDLE_BELOW_PCT { streak + 1 } else { 0 };
        }
        if !self.last.is_some_and(|n| n < IDLE_BELOW_PCT) {
            streak = 0;
        }
        Activity {
            now_pct: self.last.map(hundredths),
            mean_pct: (n > 0).then(|| hundredths(sum / f64::from(n))),
            covered_s: covered * 60,
            idle_for_s: streak * 60,
            peak_mem_mib: peak,
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
    /// Records made: each stamps the series it saw active, and the rest are dropped.
    records: u64,
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
            .filter(|s| matches!(s.health, crate::model::source::SourceHealth::Live { .. }))
            .map(|s| s.name.as_str())
            .collect();
        // One pass to index the nodes: thousands of workloads look their cards up.
        let nodes: HashMap<&str, &crate::model::fleet::Node> = fleet
            .nodes
            .iter()
            .filter(|n| n.sources.iter().any(|s| live.contains(s.as_str())))
            .map(|n| (n.name.as_str(), n))
            .collect();
        let card = |r: &CardRef| nodes.get(r.node.as_str()).and_then(|n| n.card_at(r.index));
        let now: Vec<(usize, Option<f64>, Option<u64>)> = fleet
            .workloads
            .iter()
            .enumerate()
            .filter(|(_, w)| w.state.is_active() && !w.cards.is_empty())
            .map(|(i, w)| (i, pct_of(&card, w), mem_of(&card, w)))
            .collect();
        self.records += 1;
        let stamp = self.records;
        for (i, pct, mem) in now {
            let w = &mut fleet.workloads[i];
            let s = match self.series.get_mut(w.id.as_str()) {
                Some(s) => s,
                None => self.series.entry(w.id.clone()).or_default(),
            };
            s.last = pct;
            s.seen = stamp;
            if let Some(p) = pct {
                s.add(minute, p, mem);
            }
            w.activity = Some(s.activity(minute));
        }
        // A workload that stopped or left forgets its samples (a restart starts afresh).
        self.series.retain(|_, s| s.seen == stamp);
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
                    s.add(t.timestamp().div_euclid(60), f64::from(*u), mem);
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
        let node = Node { cards: vec![card], ..Node::new("n") };
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
    fn a_bucket_is_small_and_its_minutes_survive_any_clock() {
        assert_eq!(std::mem::size_of::<Bucket>(), 12);
        let mut s = Series::default();
        // A workload running for longer than a bucket's offset can count: the base moves up.
        let far = i64::from(u32::MAX);
        for m in [5, 6, far, far + 1, 3 * far] {
            s.add(m, 50.0, Some(1 << 20));
        }
        let mins: Vec<i64> = s.buckets.iter().map(|b| s.minute(b)).collect();
        assert_eq!(mins, vec![3 * far]);
        let a = s.activity(3 * far);
        assert_eq!((a.mean_pct, a.covered_s, a.peak_mem_mib), (Some(50.0), 60, Some(1 << 20)));
        s.add(3 * far + 1, 10.0, None);
        assert_eq!(s.activity(3 * far + 1).peak_mem_mib, Some(1 << 20), "a minute without memory keeps the peak");
        let mut big = Series::default();
        big.add(0, 1.0, Some(u64::MAX));
        assert_eq!(big.activity(0).peak_mem_mib, Some(u64::from(NO_MEM - 1)), "clamped, never read as none");
    }

    #[test]
    fn a_workload_sampled_every_minute_for_months_keeps_its_window() {
        // Past the offset's range minute by minute (no gap empties the series): the base moves
        // up and the last two hours stay in order.
        let mut s = Series::default();
        let end = 3 * i64::from(u16::MAX);
        for m in 0..=end {
            s.add(m, if m > end - 30 { 2.0 } else { 90.0 }, Some(100));
        }
        let mins: Vec<i64> = s.buckets.iter().map(|b| s.minute(b)).collect();
        assert_eq!(mins, ((end - KEEP_MIN + 1)..=end).collect::<Vec<_>>());
        // Idle now too (the record sets the latest sample).
        s.last = Some(2.0);
        let a = s.activity(end);
        assert_eq!((a.mean_pct, a.covered_s, a.idle_for_s), (Some(2.0), 30 * 60, 30 * 60));
    }

    #[test]
    fn idle_counts_back_from_now_to_the_last_busy_minute() {
        let mut s = Series::default();
        for (m, pct) in [(10, 1.0), (11, 1.0), (12, 60.0), (13, 2.0), (14, 0.0), (15, 3.0)] {
            s.add(m, pct, None);
        }
        s.last = Some(3.0);
        let a = s.activity(15);
        assert_eq!(a.idle_for_s, 3 * 60, "13, 14 and 15: the busy minute 12 ends the run");
        assert_eq!(a.covered_s, 6 * 60);
        s.last = Some(40.0);
        assert_eq!(s.activity(15).idle_for_s, 0, "busy now: not idle, whatever the minutes say");
        s.last = Some(0.0);
        s.add(16, 50.0, None);
        assert_eq!(s.activity(16).idle_for_s, 0, "the minute now is busy on average");
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
        let node = Node { cards: vec![card], ..Node::new("n") };
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
