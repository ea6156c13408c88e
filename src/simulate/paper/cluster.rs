//! The cluster of one packing run as the paper's simulator sees it: per node its model, host
//! CPU and memory left and each GPU's free thousandths, nodes in rank order (a tie goes to
//! the first); whether a pod passes the filters, why it fails, and taking what it asks.

use super::trace::Shape;
use crate::simulate::Fleet;

/// Why a pod found no node, the first filter that left none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// No node of a model it may use.
    GpuModel,
    /// No node with the GPUs (count, or share of one) free.
    Gpu,
    /// Of those, none with the host CPU.
    Cpu,
    /// Of those, none with the host memory.
    Memory,
}

impl Cause {
    pub const ALL: [Cause; 4] = [Cause::GpuModel, Cause::Gpu, Cause::Cpu, Cause::Memory];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::GpuModel => "gpu_model",
            Self::Gpu => "gpu",
            Self::Cpu => "cpu",
            Self::Memory => "memory",
        }
    }
}

#[derive(Debug, Clone)]
pub struct PNode {
    pub model: u16,
    /// Host CPU and memory left; `i64::MAX` where not limited.
    pub cpu: i64,
    pub mem: i64,
    pub first: u32,
    pub count: u32,
    /// GPUs entirely free, the most any GPU has free, all free thousandths.
    pub full: u32,
    pub max_left: u16,
    /// Bumped at each change (caches compare it).
    pub version: u32,
}

#[derive(Debug, Clone)]
pub struct Cluster {
    pub nodes: Vec<PNode>,
    /// Free thousandths per GPU (0 where its holder cap is reached), nodes' GPUs in a row.
    pub left: Vec<u16>,
    holders: Vec<u16>,
    /// Most holders a GPU takes (`u16::MAX`: no cap).
    cap: u16,
    /// GPU thousandths held, in all and per model.
    pub used: u64,
    pub used_by_model: Vec<u64>,
    pub cap_by_model: Vec<u64>,
}

fn unlimited(v: i64) -> i64 {
    if v == 0 { i64::MAX } else { v }
}

impl Cluster {
    /// The fleet's nodes in `ranks` order, every GPU free.
    pub fn new(fleet: &Fleet, ranks: &[u32], cap: Option<u32>) -> Self {
        let mut order: Vec<usize> = (0..fleet.nodes.len()).collect();
        order.sort_by_key(|&i| ranks.get(i).copied().unwrap_or(u32::MAX));
        let mut nodes = Vec::with_capacity(order.len());
        let mut left = Vec::new();
        let mut cap_by_model = vec![0u64; fleet.models.len()];
        for i in order {
            let n = &fleet.nodes[i];
            let count = n.gpus.min(u32::from(u16::MAX));
            nodes.push(PNode {
                model: n.model,
                cpu: unlimited(i64::from(n.cpu_milli)),
                mem: unlimited(n.mem_mib.min(i64::MAX as u64) as i64),
                first: left.len() as u32,
                count,
                full: count,
                max_left: if count > 0 { 1000 } else { 0 },
                version: 1,
            });
            left.extend(std::iter::repeat_n(1000u16, count as usize));
            cap_by_model[n.model as usize] += u64::from(count) * 1000;
        }
        let holders = vec![0; left.len()];
        let cap = cap.map_or(u16::MAX, |c| c.clamp(1, u32::from(u16::MAX)) as u16);
        Self { nodes, left, holders, cap, used: 0, used_by_model: vec![0; fleet.models.len()], cap_by_model }
    }

    pub fn gpus_of(&self, n: usize) -> &[u16] {
        let node = &self.nodes[n];
        &self.left[node.first as usize..(node.first + node.count) as usize]
    }

    /// The free thousandths a GPU with `left` free has after a share of `take` lands on it.
    pub fn after_share(&self, gpu: usize, take: u32) -> u16 {
        if self.holders[gpu].saturating_add(1) >= self.cap { 0 } else { self.left[gpu] - take as u16 }
    }

    fn gpu_fits(node: &PNode, s: &Shape) -> bool {
        match s.gpus {
            0 => true,
            _ if s.is_share() => u32::from(node.max_left) >= s.take,
            n => node.full >= n,
        }
    }

    /// Whether node `n` passes every filter for `s` (`access`: per model).
    pub fn fits(&self, n: usize, s: &Shape, access: &[bool]) -> bool {
        let node = &self.nodes[n];
        i64::from(s.cpu) <= node.cpu
            && (s.mem.min(i64::MAX as u64) as i64) <= node.mem
            && Self::gpu_fits(node, s)
            && access.get(usize::from(node.model)).copied().unwrap_or(false)
    }

    /// Why no node takes `s`: the first filter (model, GPUs, CPU, memory) that leaves none.
    pub fn cause(&self, s: &Shape, access: &[bool]) -> Cause {
        let mut left: Vec<&PNode> =
            self.nodes.iter().filter(|n| access.get(usize::from(n.model)).copied().unwrap_or(false)).collect();
        if left.is_empty() {
            return Cause::GpuModel;
        }
        left.retain(|n| Self::gpu_fits(n, s));
        if left.is_empty() {
            return Cause::Gpu;
        }
        left.retain(|n| i64::from(s.cpu) <= n.cpu);
        if left.is_empty() { Cause::Cpu } else { Cause::Memory }
    }

    /// The first `k` entirely free GPUs of node `n`, by index (the paper's exclusive pods).
    pub fn first_full(&self, n: usize, k: u32, out: &mut Vec<u32>) {
        out.clear();
        let node = &self.nodes[n];
        for g in node.first..node.first + node.count {
            if out.len() == k as usize {
                break;
            }
            if self.left[g as usize] == 1000 && self.holders[g as usize] == 0 {
                out.push(g);
            }
        }
    }

    /// Give `s` node `n` and the GPUs `gpus` (global indices).
    pub fn take(&mut self, n: usize, s: &Shape, gpus: &[u32]) {
        let node = &mut self.nodes[n];
        if node.cpu != i64::MAX {
            node.cpu -= i64::from(s.cpu);
        }
        if node.mem != i64::MAX {
            node.mem -= s.mem.min(i64::MAX as u64) as i64;
        }
        for &g in gpus {
            let after = self.after_share(g as usize, s.take);
            self.left[g as usize] = if s.is_share() { after } else { 0 };
            self.holders[g as usize] = self.holders[g as usize].saturating_add(1);
        }
        let held = u64::from(s.take) * gpus.len() as u64;
        self.used += held;
        let node = &mut self.nodes[n];
        self.used_by_model[node.model as usize] += held;
        node.version += 1;
        let range = node.first as usize..(node.first + node.count) as usize;
        node.full = self.left[range.clone()]
            .iter()
            .zip(&self.holders[range.clone()])
            .filter(|(l, h)| **l == 1000 && **h == 0)
            .count() as u32;
        node.max_left = self.left[range].iter().copied().max().unwrap_or(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::Job;

    fn shape(gpus: u32, milli: u32, cpu: u32) -> Shape {
        Shape { cpu, mem: 0, gpus, milli, take: milli, spec: 0 }
    }

    #[test]
    fn nodes_come_in_rank_order_and_take_what_is_asked() {
        let fleet = Fleet::from_spec("16xT4").unwrap_or_default();
        let mut c = Cluster::new(&fleet, &[1, 0], None);
        assert_eq!(c.nodes.iter().map(|n| n.first).collect::<Vec<_>>(), [0, 8], "node 1 ranks first");
        let s = shape(1, 300, 0);
        c.take(0, &s, &[0]);
        c.take(0, &s, &[0]);
        assert_eq!((c.left[0], c.nodes[0].full, c.nodes[0].max_left, c.used), (400, 7, 1000, 600));
        let mut out = Vec::new();
        c.first_full(0, 2, &mut out);
        assert_eq!(out, [1, 2]);
        assert!(c.fits(0, &shape(7, 1000, 0), &[true]) && !c.fits(0, &shape(8, 1000, 0), &[true]));
        assert_eq!(c.cause(&shape(9, 1000, 0), &[true]), Cause::Gpu);
        assert_eq!(c.cause(&shape(1, 1000, 0), &[false]), Cause::GpuModel);
        let _ = Job::new("x", 0, 1, 1);
    }

    #[test]
    fn a_holder_cap_closes_a_gpu() {
        let fleet = Fleet::from_spec("1xT4").unwrap_or_default();
        let mut c = Cluster::new(&fleet, &[0], Some(2));
        let s = shape(1, 100, 0);
        c.take(0, &s, &[0]);
        assert_eq!(c.left[0], 900);
        c.take(0, &s, &[0]);
        assert_eq!((c.left[0], c.used), (0, 200), "two holders: nothing more fits, 800 stranded");
        assert!(!c.fits(0, &s, &[true]));
    }

    #[test]
    fn a_cpu_short_node_is_the_cause() {
        let mut fleet = Fleet::from_spec("1xT4").unwrap_or_default();
        fleet.nodes[0].cpu_milli = 4000;
        fleet.nodes[0].mem_mib = 100;
        let c = Cluster::new(&fleet, &[0], None);
        assert_eq!(c.cause(&shape(1, 1000, 8000), &[true]), Cause::Cpu);
        let mem = Shape { mem: 200, ..shape(1, 1000, 1000) };
        assert_eq!(c.cause(&mem, &[true]), Cause::Memory);
        assert!(c.fits(0, &shape(0, 0, 4000), &[true]));
    }
}
