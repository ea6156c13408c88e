//! One run's arrivals and node ranking, drawn as the paper's simulator draws them from its
//! seed: one discarded draw, the pods sorted by name and shuffled (or the trace's order),
//! inflated by draws from the name-sorted trace until the GPUs asked reach the level (or
//! thinned at random above it), then a random rank per node that breaks score ties.

use super::gorand::GoRand;
use super::trace::Trace;

/// How the pods arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Sorted by name, then shuffled per seed (the paper's protocol).
    Shuffled,
    /// The trace's own order.
    Trace,
}

/// A run's pods (indices into the trace's pods; draws repeat them) and each fleet node's
/// rank (lower wins a tie).
#[derive(Debug, Clone, PartialEq)]
pub struct Arrivals {
    pub pods: Vec<u32>,
    pub ranks: Vec<u32>,
}

/// A Fenwick tree over present/absent positions: the k-th present one in O(log n).
struct Present {
    tree: Vec<u32>,
}

impl Present {
    fn full(n: usize) -> Self {
        let mut tree = vec![0u32; n + 1];
        for i in 1..=n {
            tree[i] += 1;
            let j = i + (i & i.wrapping_neg());
            if j <= n {
                tree[j] += tree[i];
            }
        }
        Self { tree }
    }

    fn remove(&mut self, pos: usize) {
        let mut i = pos + 1;
        while i < self.tree.len() {
            self.tree[i] -= 1;
            i += i & i.wrapping_neg();
        }
    }

    /// The position of the k-th (from 0) present element.
    fn kth(&self, k: u32) -> usize {
        let n = self.tree.len() - 1;
        let (mut pos, mut left) = (0usize, k + 1);
        let mut step = n.next_power_of_two();
        while step > 0 {
            let next = pos + step;
            if next <= n && self.tree[next] < left {
                pos = next;
                left -= self.tree[next];
            }
            step >>= 1;
        }
        pos
    }
}

/// The arrivals of the run seeded `seed` at `level` (a share of `cap_milli`, the fleet's
/// GPU thousandths), with `node_names` ranked.
pub fn arrivals(trace: &Trace, order: Order, seed: i64, level: f64, cap_milli: u64, node_names: &[&str]) -> Arrivals {
    let mut rng = GoRand::new(seed);
    // The paper's simulator logs one draw before it shuffles (a debug line's argument).
    let _ = rng.int63();
    let mut pods: Vec<u32> = match order {
        Order::Shuffled => {
            let mut p = trace.by_name.clone();
            rng.shuffle(&mut p);
            p
        }
        Order::Trace => (0..trace.pods.len() as u32).collect(),
    };
    let milli = |p: u32| &trace.shapes[trace.pods[p as usize] as usize];
    let target = level * cap_milli as f64;
    let mut total = trace.total_milli();
    let n = trace.by_name.len() as u32;
    if (total as f64) < target && n > 0 {
        loop {
            let drawn = trace.by_name[rng.intn(n) as usize];
            let s = milli(drawn);
            // The paper's stop test adds one GPU's share, not the pod's whole request.
            if (total + u64::from(s.milli)) as f64 > target {
                break;
            }
            total += s.total_milli();
            pods.push(drawn);
        }
    } else if (total as f64) > target {
        let mut present = Present::full(pods.len());
        let mut left = pods.len() as u32;
        let mut gone = vec![false; pods.len()];
        while (total as f64) > target && left > 0 {
            let pos = present.kth(rng.intn(left));
            present.remove(pos);
            gone[pos] = true;
            left -= 1;
            total -= milli(pods[pos]).total_milli();
        }
        let mut k = 0;
        pods.retain(|_| {
            k += 1;
            !gone[k - 1]
        });
    }
    let mut sorted: Vec<usize> = (0..node_names.len()).collect();
    sorted.sort_by(|a, b| node_names[*a].cmp(node_names[*b]));
    let perm = rng.perm(node_names.len());
    let mut ranks = vec![0u32; node_names.len()];
    for (i, node) in sorted.into_iter().enumerate() {
        ranks[node] = perm[i];
    }
    Arrivals { pods, ranks }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::Job;

    fn trace(n: usize) -> Trace {
        let jobs: Vec<Job> = (0..n)
            .map(|i| Job { milli: if i % 3 == 0 { 500 } else { 1000 }, ..Job::new(&format!("p{i:03}"), 0, 1, 1) })
            .collect();
        Trace::new(&jobs.iter().collect::<Vec<_>>(), false)
    }

    #[test]
    fn the_present_tree_finds_the_kth_left() {
        let mut p = Present::full(10);
        p.remove(0);
        p.remove(5);
        assert_eq!((0..8).map(|k| p.kth(k)).collect::<Vec<_>>(), [1, 2, 3, 4, 6, 7, 8, 9]);
    }

    #[test]
    fn inflation_reaches_the_level_and_each_seed_shuffles_its_own_way() {
        let t = trace(30);
        let names = ["n1", "n0", "n2"];
        let a = arrivals(&t, Order::Shuffled, 42, 1.3, 20_000, &names);
        let total: u64 = a.pods.iter().map(|&p| t.shapes[t.pods[p as usize] as usize].total_milli()).sum();
        assert!(total <= 26_000 && total + 1000 > 26_000, "{total}");
        assert!(a.pods.len() > 30);
        let b = arrivals(&t, Order::Shuffled, 43, 1.3, 20_000, &names);
        assert_ne!(a.pods[..30], b.pods[..30]);
        let mut first: Vec<u32> = a.pods[..30].to_vec();
        first.sort_unstable();
        assert_eq!(first, (0..30).collect::<Vec<u32>>(), "every pod of the trace comes once first");
        let mut r = a.ranks.clone();
        r.sort_unstable();
        assert_eq!(r, [0, 1, 2]);
        let tr = arrivals(&t, Order::Trace, 42, 1.3, 20_000, &names);
        assert_eq!(tr.pods[..30], (0..30).collect::<Vec<u32>>());
    }

    #[test]
    fn above_the_level_pods_are_drawn_out_in_order() {
        let t = trace(30);
        let a = arrivals(&t, Order::Trace, 1, 0.5, 20_000, &["n"]);
        let total: u64 = a.pods.iter().map(|&p| t.shapes[t.pods[p as usize] as usize].total_milli()).sum();
        assert!(total <= 10_000, "{total}");
        assert!(a.pods.windows(2).all(|w| w[0] < w[1]), "order kept");
    }
}
