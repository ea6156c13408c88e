//! Where a pod goes under each placement of a packing: the paper's `fgd`, `paper-bestfit`
//! and `paper-dotprod` as its simulator scores them (integer scores, the highest wins, a tie
//! to the first node in rank order), `first-fit`, tessera's `best-fit`, and tessera's
//! `frag-aware` (tessera.rs). A node's score for a request shape is kept until the node
//! changes.

use super::cluster::Cluster;
use super::frag::{Measure, Summary, fgd_score};
use super::tessera;
use super::trace::{Shape, Trace};
use crate::simulate::Placement;

/// The most (node, shape) scores kept: past it, the rarer shapes are scored afresh.
const MEMO_ENTRIES: usize = 1 << 20;

#[derive(Debug, Clone, Copy, Default)]
struct Memo {
    version: u32,
    gpu: u16,
    score: (f64, f64),
}

/// A node's summary for the measure and its fragmentation, for the state `version` names.
#[derive(Debug, Clone, Default)]
pub struct Cached {
    pub version: u32,
    pub summary: Summary,
    pub frag: f64,
}

#[derive(Debug)]
pub struct Chooser<'a> {
    pub placement: Placement,
    pub measure: &'a Measure,
    cache: Vec<Cached>,
    /// Per shape, its score key (shapes alike in CPU, share and GPUs share one), or none.
    key: Vec<Option<u32>>,
    keys: usize,
    memo: Vec<Memo>,
    gpus: Vec<u32>,
}

impl<'a> Chooser<'a> {
    pub fn new(placement: Placement, measure: &'a Measure, trace: &Trace, nodes: usize) -> Self {
        // Shapes alike in what the score reads share a key (memory only where it counts).
        let of = |s: &Shape| (s.cpu, s.take, s.gpus, if measure.with_mem { s.mem } else { 0 });
        let mut counts: std::collections::HashMap<(u32, u32, u32, u64), u64> = std::collections::HashMap::new();
        for &p in &trace.pods {
            *counts.entry(of(&trace.shapes[p as usize])).or_default() += 1;
        }
        let mut by_count: Vec<((u32, u32, u32, u64), u64)> = counts.into_iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let keys = by_count.len().min(MEMO_ENTRIES / nodes.max(1)).max(1);
        let ids: std::collections::HashMap<(u32, u32, u32, u64), u32> =
            by_count.iter().take(keys).enumerate().map(|(i, (k, _))| (*k, i as u32)).collect();
        let key = trace.shapes.iter().map(|s| ids.get(&of(s)).copied()).collect();
        let memoised = matches!(placement, Placement::Fgd | Placement::FragAware);
        let memo = if memoised { vec![Memo::default(); keys * nodes] } else { Vec::new() };
        Self { placement, measure, cache: vec![Cached::default(); nodes], key, keys, memo, gpus: Vec::new() }
    }

    /// Node `n`'s summary and fragmentation now.
    pub fn cached(&mut self, cl: &Cluster, n: usize) -> &Cached {
        let version = cl.nodes[n].version;
        if self.cache[n].version != version {
            let summary = self.measure.summary(cl.gpus_of(n));
            let node = &cl.nodes[n];
            let frag = self.measure.amount(node.model, (node.cpu, node.mem), &summary, &[]);
            self.cache[n] = Cached { version, summary, frag };
        }
        &self.cache[n]
    }

    /// The node and GPUs (global indices) for shape `shape` of `trace`, if any node takes it.
    pub fn choose(&mut self, cl: &Cluster, trace: &Trace, shape: u32, access: &[bool]) -> Option<(usize, &[u32])> {
        let s = &trace.shapes[shape as usize];
        let mut best: Option<((f64, f64), usize, u16)> = None;
        for n in 0..cl.nodes.len() {
            if !cl.fits(n, s, access) {
                continue;
            }
            let (score, gpu) = match self.placement {
                Placement::FirstFit => ((0.0, 0.0), first_gpu(cl, n, s)),
                Placement::PaperBestFit => paper_bestfit(cl, n, s),
                Placement::PaperDotProd => paper_dotprod(cl, n, s),
                Placement::BestFit => best_fit(cl, n, s),
                Placement::Fgd | Placement::FragAware => self.memoised(cl, n, s, shape),
            };
            if best.is_none_or(|b| score > b.0) {
                best = Some((score, n, gpu));
                if self.placement == Placement::FirstFit {
                    break;
                }
            }
        }
        let (_, n, gpu) = best?;
        if s.gpus == 0 {
            self.gpus.clear();
        } else if s.is_share() {
            self.gpus.clear();
            self.gpus.push(cl.nodes[n].first + u32::from(gpu));
        } else {
            cl.first_full(n, s.gpus, &mut self.gpus);
        }
        Some((n, &self.gpus))
    }

    fn memoised(&mut self, cl: &Cluster, n: usize, s: &Shape, shape: u32) -> ((f64, f64), u16) {
        let version = cl.nodes[n].version;
        let slot = self.key[shape as usize].map(|k| n * self.keys + k as usize);
        if let Some(m) = slot.and_then(|i| self.memo.get(i)).filter(|m| m.version == version) {
            return (m.score, m.gpu);
        }
        let (score, gpu) = if self.placement == Placement::Fgd { self.fgd(cl, n, s) } else { self.ours(cl, n, s) };
        if let Some(m) = slot.and_then(|i| self.memo.get_mut(i)) {
            *m = Memo { version, gpu, score };
        }
        (score, gpu)
    }

    /// FGD: 100·σ((before − after)/1000) truncated; a share pod tries each GPU it fits
    /// (the first of equal scores), other pods take entirely free GPUs.
    fn fgd(&mut self, cl: &Cluster, n: usize, s: &Shape) -> ((f64, f64), u16) {
        let model = cl.nodes[n].model;
        let cpu = (after_cpu(cl.nodes[n].cpu, s.cpu), after_mem(cl.nodes[n].mem, s.mem));
        let first = cl.nodes[n].first as usize;
        let measure = self.measure;
        let c = self.cached(cl, n);
        let (summary, before) = (&c.summary, c.frag);
        if !s.is_share() {
            let changes = vec![(1000u16, 0u16); s.gpus as usize];
            let after = measure.amount(model, cpu, summary, &changes);
            return ((fgd_score(before, after) as f64, 0.0), 0);
        }
        let mut best: Option<(i64, u16)> = None;
        let mut seen: [(u16, u16); 8] = [(u16::MAX, u16::MAX); 8];
        for (i, &l) in cl.gpus_of(n).iter().enumerate() {
            if u32::from(l) < s.take {
                continue;
            }
            let change = (l, cl.after_share(first + i, s.take));
            if seen.contains(&change) {
                continue;
            }
            if i < seen.len() {
                seen[i] = change;
            }
            let score = fgd_score(before, measure.amount(model, cpu, summary, &[change]));
            if best.is_none_or(|b| score > b.0) {
                best = Some((score, i as u16));
            }
        }
        best.map_or(((f64::MIN, 0.0), 0), |(sc, g)| ((sc as f64, 0.0), g))
    }

    fn ours(&mut self, cl: &Cluster, n: usize, s: &Shape) -> ((f64, f64), u16) {
        let model = cl.nodes[n].model;
        let cpu = (after_cpu(cl.nodes[n].cpu, s.cpu), after_mem(cl.nodes[n].mem, s.mem));
        let first = cl.nodes[n].first as usize;
        let gpus = cl.gpus_of(n);
        let measure = self.measure;
        let c = self.cached(cl, n);
        tessera::score(measure, model, cpu, &c.summary, c.frag, gpus, s, |i| cl.after_share(first + i, s.take))
    }
}

pub(super) fn after_cpu(left: i64, ask: u32) -> i64 {
    if left == i64::MAX { left } else { left - i64::from(ask) }
}

pub(super) fn after_mem(left: i64, ask: u64) -> i64 {
    if left == i64::MAX { left } else { left - ask.min(i64::MAX as u64) as i64 }
}

fn first_gpu(cl: &Cluster, n: usize, s: &Shape) -> u16 {
    cl.gpus_of(n).iter().position(|&l| u32::from(l) >= s.take).unwrap_or(0) as u16
}

/// The GPU with the least free share that still holds the pod (the first of equals).
fn tightest_gpu(cl: &Cluster, n: usize, s: &Shape) -> u16 {
    let mut best: Option<(u16, u16)> = None;
    for (i, &l) in cl.gpus_of(n).iter().enumerate() {
        if u32::from(l) >= s.take && best.is_none_or(|b| l < b.0) {
            best = Some((l, i as u16));
        }
    }
    best.map_or(0, |b| b.1)
}

fn gpu_free(cl: &Cluster, n: usize) -> f64 {
    cl.gpus_of(n).iter().map(|&l| f64::from(l)).sum()
}

/// The node's CPU term over the paper's largest node (128 cores); 0 where CPU is unlimited.
fn cpu_term(left: i64, ask: u32) -> (f64, f64) {
    if left == i64::MAX { (0.0, 0.0) } else { (left as f64 / 128_000.0, f64::from(ask) / 128_000.0) }
}

/// The paper's BestFit: 100·(1 − ½·CPU left after/128 cores − ½·GPU left after/8 GPUs),
/// truncated (its min–max normalisation keeps the highest on top).
fn paper_bestfit(cl: &Cluster, n: usize, s: &Shape) -> ((f64, f64), u16) {
    let (cf, cr) = cpu_term(cl.nodes[n].cpu, s.cpu);
    let gf = gpu_free(cl, n) / 8000.0;
    let gr = f64::from(s.take) * f64::from(s.gpus) / 8000.0;
    let score = (cf - cr) * 0.5 + (gf - gr) * 0.5;
    ((((1.0 - score) * 100.0) as i64 as f64, 0.0), tightest_gpu(cl, n, s))
}

/// The paper's DotProd: 100·(1 − (free·asked)/2) over (CPU/128 cores, GPU/8 GPUs), truncated.
fn paper_dotprod(cl: &Cluster, n: usize, s: &Shape) -> ((f64, f64), u16) {
    let (n0, p0) = cpu_term(cl.nodes[n].cpu, s.cpu);
    let n1 = gpu_free(cl, n) / 8000.0;
    let p1 = f64::from(s.take) * f64::from(s.gpus) / 8000.0;
    let cur = 1.0 - (n0 * p0 + n1 * p1) / 2.0;
    (((100.0 * cur) as i64 as f64, 0.0), tightest_gpu(cl, n, s))
}

/// tessera's best fit: the GPU (or node of whole GPUs) left with the least free.
fn best_fit(cl: &Cluster, n: usize, s: &Shape) -> ((f64, f64), u16) {
    if s.is_share() {
        let g = tightest_gpu(cl, n, s);
        let l = cl.gpus_of(n).get(usize::from(g)).copied().unwrap_or(0);
        ((-(f64::from(l) - f64::from(s.take)), 0.0), g)
    } else {
        ((-(f64::from(cl.nodes[n].full) - f64::from(s.gpus)), 0.0), 0)
    }
}
