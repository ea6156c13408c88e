//! The paper's fragmentation measure (FGD, `pkg/utils/frag.go`): the typical pods (the
//! commonest request shapes, covering 95 % of the trace's pods, CPU-only ones and GPU-model
//! constraints included) and, for a node, the idle GPU thousandths each typical pod could
//! not use there, weighted by its frequency.

use super::trace::Trace;

/// A typical pod: host CPU, share of each GPU (0: CPU only), GPUs, allowed models, and its
/// frequency among the typical pods (they sum to 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Typical {
    pub cpu: u32,
    /// The mean host memory of its pods, MiB (the paper leaves memory out; tessera's
    /// measure counts it).
    pub mem: u64,
    pub milli: u32,
    pub gpus: u32,
    pub spec: u16,
    pub freq: f64,
}

/// The most typical pods kept. A real trace needs few (the default trace 35 for 95 %); one
/// whose every pod is a shape of its own would make the measure cost (and each node's summary
/// hold) as many as its pods: past this the coverage stops short of `percent`.
pub const MAX_TYPICAL: usize = 256;

/// The typical pods of `trace` (its own pods, before any draw): shapes by (CPU, share, GPUs,
/// models), memory left out, by count (ties: the larger shape first), the shortest prefix
/// covering `percent` of the pods (at most `MAX_TYPICAL`), frequencies renormalised over it.
pub fn typical(trace: &Trace, percent: f64) -> Vec<Typical> {
    // (CPU, share, GPUs, models) → (pods, their memory in all).
    type Key = (u32, u32, u32, u16);
    let mut counts: std::collections::HashMap<Key, (u64, u128)> = std::collections::HashMap::new();
    for &p in &trace.pods {
        let s = &trace.shapes[p as usize];
        let e = counts.entry((s.cpu, s.take, s.gpus, s.spec)).or_default();
        e.0 += 1;
        e.1 += u128::from(s.mem);
    }
    let spec = |i: u16| trace.specs.get(usize::from(i)).map_or("", String::as_str);
    let mut v: Vec<(Key, (u64, u128))> = counts.into_iter().collect();
    v.sort_by(|(a, (ca, _)), (b, (cb, _))| {
        cb.cmp(ca).then_with(|| (b.0, b.1, b.2, spec(b.3)).cmp(&(a.0, a.1, a.2, spec(a.3))))
    });
    let total = trace.pods.len() as f64;
    let expected = percent * total / 100.0;
    let mut cum = 0.0;
    let mut taken = 0;
    while cum < expected && taken < v.len().min(MAX_TYPICAL) {
        cum += v[taken].1.0 as f64;
        taken += 1;
    }
    let share = cum / total;
    v.truncate(taken);
    v.into_iter()
        .map(|((cpu, milli, gpus, spec), (n, mem))| Typical {
            cpu,
            mem: (mem / u128::from(n.max(1))) as u64,
            milli,
            gpus,
            spec,
            freq: (n as f64 / total) / share,
        })
        .collect()
}

/// A node's free GPU thousandths summarised per typical pod: how many GPUs have at least
/// its share free, and the free thousandths on the GPUs that have less.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub total: i64,
    pub fit: Vec<u32>,
    pub short: Vec<i64>,
}

/// The measure: the typical pods and which models each may use.
#[derive(Debug, Clone)]
pub struct Measure {
    pub typical: Vec<Typical>,
    /// Per typical pod, per fleet model: may it run there.
    pub access: Vec<Vec<bool>>,
    /// A typical pod lacking host memory counts as lacking CPU (tessera's measure; the
    /// paper's leaves memory out).
    pub with_mem: bool,
    /// A typical pod held to other models counts the node's idle GPUs as fragments (the
    /// paper's "no access" term); tessera's measure leaves such pods out at that node.
    pub no_access: bool,
}

const Q1: usize = 0;
const Q2: usize = 1;
const Q4: usize = 3;
const XL: usize = 4;
const XR: usize = 5;
const NA: usize = 6;

impl Measure {
    pub fn new(trace: &Trace, access: &[Vec<bool>], percent: f64) -> Self {
        let typical = typical(trace, percent);
        let access = typical.iter().map(|t| access.get(usize::from(t.spec)).cloned().unwrap_or_default()).collect();
        Self { typical, access, with_mem: false, no_access: true }
    }

    /// The summary of free thousandths `left`.
    pub fn summary(&self, left: &[u16]) -> Summary {
        let total = left.iter().map(|&l| i64::from(l)).sum();
        let mut s = Summary { total, fit: Vec::with_capacity(self.typical.len()), short: Vec::new() };
        for t in &self.typical {
            let m = t.milli as u16;
            s.fit.push(left.iter().filter(|&&l| l >= m).count() as u32);
            s.short.push(left.iter().filter(|&&l| l < m).map(|&l| i64::from(l)).sum());
        }
        s
    }

    /// The node's fragmentation with host CPU and memory `host` free (`i64::MAX`:
    /// unlimited), model `model`, free GPUs as `s` says after `changes` (free before, free
    /// after) of GPUs.
    pub fn amount(&self, model: u16, host: (i64, i64), s: &Summary, changes: &[(u16, u16)]) -> f64 {
        let (cpu_left, mem_left) = host;
        let total = s.total + changes.iter().map(|&(a, b)| i64::from(b) - i64::from(a)).sum::<i64>();
        let mut data = [0.0f64; 7];
        for (k, t) in self.typical.iter().enumerate() {
            let cpu_ok =
                cpu_left >= i64::from(t.cpu) && (!self.with_mem || mem_left >= t.mem.min(i64::MAX as u64) as i64);
            if t.milli == 0 {
                data[if cpu_ok { XL } else { XR }] += t.freq * total as f64;
                continue;
            }
            if !self.access[k].get(usize::from(model)).copied().unwrap_or(false) {
                if self.no_access {
                    data[NA] += t.freq * total as f64;
                }
                continue;
            }
            let m = t.milli as u16;
            let (mut fit, mut short) = (i64::from(s.fit[k]), s.short[k]);
            for &(a, b) in changes {
                if a >= m {
                    fit -= 1;
                } else {
                    short -= i64::from(a);
                }
                if b >= m {
                    fit += 1;
                } else {
                    short += i64::from(b);
                }
            }
            if fit >= i64::from(t.gpus) {
                if cpu_ok {
                    data[Q2] += t.freq * short as f64;
                } else {
                    data[Q4] += t.freq * total as f64;
                }
            } else {
                data[if cpu_ok { Q2 } else { Q1 }] += t.freq * total as f64;
            }
        }
        // Every category but Q3 (satisfied), summed in the paper's order.
        data[Q1] + data[Q2] + data[Q4] + data[XL] + data[XR] + data[NA]
    }
}

/// The FGD score of a change of fragmentation from `before` to `after`: 100·σ(Δ/1000),
/// truncated to an integer (so close changes tie).
pub fn fgd_score(before: f64, after: f64) -> i64 {
    let x = (before - after) / 1000.0;
    (1.0 / (1.0 + (-x).exp()) * 100.0) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::Job;

    /// The paper's worked example's typical pods are the default trace's; here a small mix
    /// computed by hand.
    fn measure() -> Measure {
        let mut jobs = Vec::new();
        for i in 0..6 {
            jobs.push(Job { milli: 500, cpu_milli: 4000, ..Job::new(&format!("s{i}"), 0, 1, 1) });
        }
        for i in 0..3 {
            jobs.push(Job { cpu_milli: 8000, ..Job::new(&format!("w{i}"), 0, 1, 1) });
        }
        jobs.push(Job { gpus: 0, milli: 0, cpu_milli: 2000, ..Job::new("c", 0, 1, 1) });
        let t = Trace::new(&jobs.iter().collect::<Vec<_>>(), false);
        let access = vec![vec![true]];
        Measure::new(&t, &access, 95.0)
    }

    #[test]
    fn typical_pods_cover_the_share_asked_and_renormalise() {
        let m = measure();
        let shapes: Vec<(u32, u32, u32)> = m.typical.iter().map(|t| (t.cpu, t.milli, t.gpus)).collect();
        assert_eq!(shapes, [(4000, 500, 1), (8000, 1000, 1), (2000, 0, 0)]);
        assert!((m.typical[0].freq - 0.6).abs() < 1e-12);
        let m90 = Measure::new(
            &Trace::new(&[&Job { milli: 500, ..Job::new("a", 0, 1, 1) }, &Job::new("b", 0, 1, 1)], false),
            &[vec![true]],
            50.0,
        );
        assert_eq!(m90.typical.len(), 1, "a tie on count: the larger shape first, and it covers 50 %");
        assert_eq!((m90.typical[0].milli, m90.typical[0].freq), (1000, 1.0));
    }

    #[test]
    fn a_trace_of_distinct_shapes_keeps_a_bounded_measure() {
        // Every pod a shape of its own (a hostile or very diverse trace): the typical pods stop
        // at the bound, and each node's summary holds that many, not one per pod.
        let jobs: Vec<Job> =
            (0..5000u32).map(|i| Job { cpu_milli: 1000 + i, ..Job::new(&format!("p{i}"), 0, 1, 1) }).collect();
        let refs: Vec<&Job> = jobs.iter().collect();
        let m = Measure::new(&Trace::new(&refs, false), &[vec![true]], 95.0);
        assert_eq!(m.typical.len(), MAX_TYPICAL);
        let total: f64 = m.typical.iter().map(|t| t.freq).sum();
        assert!((total - 1.0).abs() < 1e-9, "frequencies renormalised: {total}");
        assert_eq!(m.summary(&[1000, 500]).fit.len(), MAX_TYPICAL);
    }

    #[test]
    fn a_nodes_fragmentation_by_hand() {
        let m = measure();
        // Two GPUs, 300 and 1000 free, 10 cores free. Share pod (0.6): the 300 is too small
        // for it: 0.6·300. Whole pod (0.3): the 1000 fits, the 300 is a fragment: 0.3·300.
        // CPU-only pod (0.1): every idle thousandth: 0.1·1300.
        let s = m.summary(&[300, 1000]);
        let f = m.amount(0, (10_000, i64::MAX), &s, &[]);
        assert!((f - (0.6 * 300.0 + 0.3 * 300.0 + 0.1 * 1300.0)).abs() < 1e-9, "{f}");
        // 6 cores free: the whole pod lacks CPU, all 1300 count for it.
        let f = m.amount(0, (6000, i64::MAX), &s, &[]);
        assert!((f - (0.6 * 300.0 + 0.3 * 1300.0 + 0.1 * 1300.0)).abs() < 1e-9, "{f}");
        // After a change of the 1000 to 500: no GPU takes a whole pod (0.3·800), the 500
        // still takes a share one (0.6·300).
        let f = m.amount(0, (10_000, i64::MAX), &s, &[(1000, 500)]);
        assert!((f - (0.6 * 300.0 + 0.3 * 800.0 + 0.1 * 800.0)).abs() < 1e-9, "{f}");
        // A model none of the pods may use: everything is a fragment.
        let mut no = m.clone();
        no.access = vec![vec![false]; 3];
        let f = no.amount(0, (10_000, i64::MAX), &s, &[]);
        assert!((f - (0.9 * 1300.0 + 0.1 * 1300.0)).abs() < 1e-9, "{f}");
    }

    #[test]
    fn the_score_is_a_truncated_sigmoid() {
        assert_eq!(fgd_score(100.0, 100.0), 50);
        assert_eq!(fgd_score(1087.8187, 1383.8398), 42, "the spec's worked example");
        assert_eq!(fgd_score(1000.0, 600.0), 59);
        assert_eq!(fgd_score(0.0, 1e9), 0);
        assert_eq!(fgd_score(1e9, 0.0), 100);
    }
}
