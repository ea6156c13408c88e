//! The pods a packing runs, reduced to what placement reads: each pod's shape (host CPU and
//! memory, GPUs, share of each GPU, allowed models), the trace's own order and the order of
//! the pods' names (the paper's simulator sorts by name before it shuffles).

use crate::simulate::Fleet;
use crate::simulate::job::Job;

/// What one pod asks for. `milli` is the share of each GPU asked (1–1000; 0 for a CPU-only
/// pod), `take` the share it holds (1000 under whole cards).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape {
    pub cpu: u32,
    pub mem: u64,
    pub gpus: u32,
    pub milli: u32,
    pub take: u32,
    /// Index into `Trace::specs` (0: any model).
    pub spec: u16,
}

impl Shape {
    /// GPU thousandths asked in all.
    pub fn total_milli(&self) -> u64 {
        u64::from(self.gpus) * u64::from(self.milli)
    }

    /// Holds a share of one GPU (the paper's "share" pod).
    pub fn is_share(&self) -> bool {
        self.gpus == 1 && self.take < 1000
    }

    /// How a table names it: `CPU only`, `0.46 GPU`, `1 GPU`, `8 GPUs`, with the models it
    /// is held to.
    pub fn label(&self, specs: &[String]) -> String {
        let base = match (self.gpus, self.milli) {
            (0, _) | (_, 0) => "CPU only".to_string(),
            (1, m) if m < 1000 => format!("{:.2} GPU", f64::from(m) / 1000.0),
            (1, _) => "1 GPU".to_string(),
            (n, _) => format!("{n} GPUs"),
        };
        match specs.get(usize::from(self.spec)) {
            Some(s) if !s.is_empty() => format!("{base} on {s}"),
            _ => base,
        }
    }
}

/// The pods of a packing.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub shapes: Vec<Shape>,
    /// Allowed models as the trace writes them (`V100M16|V100M32`); 0 is "" (any).
    pub specs: Vec<String>,
    /// Each pod's shape, in the trace's order.
    pub pods: Vec<u32>,
    /// Pod indices in the order of their names.
    pub by_name: Vec<u32>,
}

impl Trace {
    /// From jobs in trace order (CPU-only pods among them, `gpus` 0); under `whole_only`
    /// every GPU request takes whole GPUs.
    pub fn new(jobs: &[&Job], whole_only: bool) -> Self {
        let mut t = Trace { specs: vec![String::new()], ..Trace::default() };
        let mut index: std::collections::HashMap<Shape, u32> = std::collections::HashMap::new();
        for j in jobs {
            let spec_text = j.models.iter().map(|m| &**m).collect::<Vec<&str>>().join("|");
            let spec = match t.specs.iter().position(|s| *s == spec_text) {
                Some(i) => i,
                None => {
                    t.specs.push(spec_text);
                    t.specs.len() - 1
                }
            };
            let gpus = j.gpus;
            let milli = if gpus == 0 { 0 } else { j.milli.clamp(1, 1000) };
            let take = if whole_only && gpus > 0 { 1000 } else { milli };
            let spec = spec.min(u16::MAX as usize) as u16;
            let shape = Shape { cpu: j.cpu_milli, mem: j.host_mem_mib, gpus, milli, take, spec };
            let next = index.len() as u32;
            let id = *index.entry(shape.clone()).or_insert(next);
            if id == next {
                t.shapes.push(shape);
            }
            t.pods.push(id);
        }
        let mut by_name: Vec<u32> = (0..jobs.len() as u32).collect();
        by_name.sort_by(|a, b| jobs[*a as usize].name.cmp(&jobs[*b as usize].name));
        t.by_name = by_name;
        t
    }

    /// GPU thousandths the pods ask in all.
    pub fn total_milli(&self) -> u64 {
        self.pods.iter().map(|&p| self.shapes[p as usize].total_milli()).sum()
    }

    /// Whether a node of model `model` (a fleet model index) may host shape `s`: the paper's
    /// exact match of the model's name against any of the allowed ones.
    pub fn access(&self, fleet: &Fleet) -> Vec<Vec<bool>> {
        self.specs
            .iter()
            .map(|spec| {
                fleet
                    .models
                    .iter()
                    .map(|m| {
                        let mut named = spec.split('|').filter(|t| !t.is_empty()).peekable();
                        named.peek().is_none() || named.any(|t| t.eq_ignore_ascii_case(&m.name))
                    })
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, gpus: u32, milli: u32, models: &[&str]) -> Job {
        Job {
            gpus,
            milli,
            cpu_milli: 4000,
            models: models.iter().map(|m| (*m).into()).collect(),
            ..Job::new(name, 0, 1, 1)
        }
    }

    #[test]
    fn shapes_are_shared_and_names_ordered() {
        let jobs =
            [job("c", 1, 500, &[]), job("a", 0, 0, &[]), job("b", 1, 500, &[]), job("d", 2, 1000, &["T4", "P100"])];
        let refs: Vec<&Job> = jobs.iter().collect();
        let t = Trace::new(&refs, false);
        assert_eq!(t.pods, [0, 1, 0, 2]);
        assert_eq!(t.by_name, [1, 2, 0, 3]);
        assert_eq!(t.specs, ["", "T4|P100"]);
        assert_eq!(t.total_milli(), 3000);
        assert_eq!(t.shapes[1].milli, 0, "a CPU-only pod asks no GPU share");
        assert_eq!(t.shapes[2].label(&t.specs), "2 GPUs on T4|P100");
        assert_eq!(t.shapes[0].label(&t.specs), "0.50 GPU");
        let whole = Trace::new(&refs, true);
        assert_eq!((whole.shapes[0].milli, whole.shapes[0].take), (500, 1000));
        let fleet = Fleet::from_spec("8xT4,8xA100-80GB").unwrap_or_default();
        assert_eq!(t.access(&fleet), vec![vec![true, true], vec![true, false]]);
    }
}
