//! A fleet as node types and counts, what the capacity search chooses among: nodes alike in
//! model, cards, host CPU and memory and sharing are one type, and a fleet of given counts is
//! built in one canonical order, so that the same counts always replay the same, whichever
//! node list they were taken from.

use super::fleet::{Fleet, Node};
use super::job::Job;

/// One kind of node and how many of it the fleet has.
#[derive(Debug, Clone)]
pub struct NodeType {
    /// A node of the type (layouts dropped: the search sizes them to the demand).
    pub node: Node,
    pub available: usize,
}

/// The fleet's node types in canonical order (model name, cards, CPU, memory, replicas).
#[derive(Debug, Clone)]
pub struct Types {
    pub models: Vec<super::fleet::Model>,
    pub kinds: Vec<NodeType>,
}

type Key = (Box<str>, u32, u32, u64, Option<u32>);

impl Types {
    pub fn of(fleet: &Fleet) -> Self {
        let mut kinds: Vec<(Key, NodeType)> = Vec::new();
        for n in &fleet.nodes {
            // One replica a card is no sharing: the same type as none said.
            let replicas = n.replicas.filter(|r| *r > 1);
            let key: Key = (fleet.models[n.model as usize].name.clone(), n.gpus, n.cpu_milli, n.mem_mib, replicas);
            match kinds.iter_mut().find(|(k, _)| *k == key) {
                Some((_, t)) => t.available += 1,
                None => {
                    let node = Node { layouts: Vec::new(), ..n.clone() };
                    kinds.push((key, NodeType { node, available: 1 }));
                }
            }
        }
        kinds.sort_by(|a, b| a.0.cmp(&b.0));
        Self { models: fleet.models.clone(), kinds: kinds.into_iter().map(|(_, t)| t).collect() }
    }

    /// Counts of every type as the fleet has them.
    pub fn all(&self) -> Vec<usize> {
        self.kinds.iter().map(|t| t.available).collect()
    }

    pub fn gpus(&self, counts: &[usize]) -> u64 {
        self.kinds.iter().zip(counts).map(|(t, &c)| u64::from(t.node.gpus) * c as u64).sum()
    }

    /// The fleet of `counts` nodes of each type, in canonical order.
    pub fn fleet(&self, counts: &[usize]) -> Fleet {
        let mut nodes = Vec::with_capacity(counts.iter().sum());
        for (i, (t, &c)) in self.kinds.iter().zip(counts).enumerate() {
            for k in 0..c {
                nodes.push(Node { name: format!("type{i}-{k:04}").into(), ..t.node.clone() });
            }
        }
        Fleet { models: self.models.clone(), nodes }
    }

    /// The model name of type `i`.
    pub fn model(&self, i: usize) -> &str {
        &self.models[self.kinds[i].node.model as usize].name
    }

    /// Type `i` in words: `7 x G3 (8 GPUs, 128 cores, 768 GiB)`.
    pub fn describe(&self, i: usize, count: usize) -> String {
        format!("{count} x {}", self.shape(i))
    }

    /// Type `i`'s node in words: `G3 (8 GPUs, 128 cores, 768 GiB)`.
    pub fn shape(&self, i: usize) -> String {
        let n = &self.kinds[i].node;
        let mut host = Vec::new();
        if n.cpu_milli > 0 {
            host.push(format!("{} cores", n.cpu_milli / 1000));
        }
        if n.mem_mib > 0 {
            host.push(format!("{} GiB", n.mem_mib / 1024));
        }
        if let Some(r) = n.replicas.filter(|r| *r > 1) {
            host.push(format!("{r} replicas per card"));
        }
        let host = if host.is_empty() { String::new() } else { format!(", {}", host.join(", ")) };
        let cards = if n.gpus == 1 { "1 GPU".to_string() } else { format!("{} GPUs", n.gpus) };
        format!("{} ({cards}{host})", self.model(i))
    }

    /// Whether an empty node of type `i` can host `job`.
    pub fn hosts(&self, i: usize, job: &Job) -> bool {
        let n = &self.kinds[i].node;
        let m = &self.models[n.model as usize];
        n.gpus >= job.gpus
            && (n.cpu_milli == 0 || job.cpu_milli <= n.cpu_milli)
            && (n.mem_mib == 0 || job.host_mem_mib <= n.mem_mib)
            && (m.memory_mib == 0 || job.mem_mib <= m.memory_mib)
            && job.may_run_on(&m.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alike_nodes_are_one_type_and_counts_rebuild_one_fleet() {
        let mut f = Fleet::from_spec("16xA100-80GB,4xL4").unwrap_or_default();
        f.nodes[1].cpu_milli = 64_000;
        let t = Types::of(&f);
        assert_eq!(t.kinds.len(), 3, "{:?}", t.kinds);
        assert_eq!(t.gpus(&t.all()), 20);
        let some = t.fleet(&[1, 0, 1]);
        assert_eq!(some.gpus(), 12);
        // The same counts from another order of the same nodes: the same fleet.
        let mut g = f.clone();
        g.nodes.reverse();
        let u = Types::of(&g);
        let names = |f: &Fleet| f.nodes.iter().map(|n| (n.gpus, n.cpu_milli, n.model)).collect::<Vec<_>>();
        assert_eq!(names(&u.fleet(&[1, 0, 1])), names(&some));
        assert!(t.describe(0, 2).starts_with("2 x A100-80GB (8 GPUs"), "{}", t.describe(0, 2));
    }
}
