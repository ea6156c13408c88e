//! The fleet a what-if runs on: nodes of cards of known models, their host CPU and memory,
//! their MIG layouts and sharing. Built from a spec (`64xA100-80GB,16xL4`), a trace's node
//! list, the demo or a recording; `--as-model` swaps the model and keeps the counts.

use super::names::{self, Resolved};
use crate::model::mig::{GpuModel, Placed};

/// The most GPUs a fleet spec may hold, all its parts together.
pub const MAX_GPUS: u64 = 1_000_000;

/// GPUs a spec's node holds (the HGX and DGX boards: eight).
pub const CARDS_PER_NODE: u32 = 8;

/// One card model of the fleet.
#[derive(Debug, Clone)]
pub struct Model {
    /// The catalog's name where it has the model, else the name given.
    pub name: Box<str>,
    /// Memory of one card, MiB; 0 where unknown (any memory request fits).
    pub memory_mib: u64,
    /// Its MIG profiles and placements, for MIG-capable models.
    pub mig: Option<&'static GpuModel>,
}

impl Model {
    /// The model a name means (`names::resolve`): a model tessera knows, else the name as
    /// given with unknown memory (a live fleet's card that no table has).
    pub fn named(name: &str) -> Self {
        match names::resolve(name) {
            Resolved::Known { name, mig, memory_mib } => Self { name, memory_mib, mig },
            _ => Self { name: name.trim().into(), memory_mib: 0, mig: None },
        }
    }
}

/// One node: its cards (all of one model), its host resources and each card's MIG layout.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: Box<str>,
    /// Index into `Fleet::models`.
    pub model: u16,
    pub gpus: u32,
    /// Host CPU in thousandths of a core and memory in MiB; 0: not limited.
    pub cpu_milli: u32,
    pub mem_mib: u64,
    /// Each card's MIG layout as it is (`None`: MIG off); empty: all whole.
    pub layouts: Vec<Option<Vec<Placed>>>,
    /// Replicas per card where the node's cards are time-sliced or under MPS.
    pub replicas: Option<u32>,
    /// Its cards are under the DRA driver's DynamicMIG today (the demo's, a recording's): no
    /// schedule's window lays them out, as none does live.
    pub dynamic_mig: bool,
}

impl Node {
    pub fn new(name: &str, model: u16, gpus: u32) -> Self {
        Self {
            name: name.into(),
            model,
            gpus,
            cpu_milli: 0,
            mem_mib: 0,
            layouts: Vec::new(),
            replicas: None,
            dynamic_mig: false,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Fleet {
    pub models: Vec<Model>,
    pub nodes: Vec<Node>,
}

/// Why a fleet spec or a layout cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetError {
    #[error("fleet {text:?}: {why} (write it as COUNTxMODEL[,COUNTxMODEL...], e.g. 64xA100-80GB,16xL4)")]
    Spec { text: String, why: String },
    #[error("layout {text:?}: {why}")]
    Layout { text: String, why: String },
    #[error("the fleet has no GPUs")]
    Empty,
}

impl Fleet {
    pub fn gpus(&self) -> u64 {
        self.nodes.iter().map(|n| u64::from(n.gpus)).sum()
    }

    /// The model index for `name`, added where new.
    pub fn model_index(&mut self, name: &str) -> u16 {
        let m = Model::named(name);
        if let Some(i) = self.models.iter().position(|x| x.name == m.name) {
            return i as u16;
        }
        self.models.push(m);
        (self.models.len() - 1) as u16
    }

    /// A fleet from `64xA100-80GB,16xL4`: GPUs of each model, eight to a node (the last node
    /// of a model holds the rest).
    pub fn from_spec(text: &str) -> Result<Self, FleetError> {
        let bad = |why: String| FleetError::Spec { text: text.to_string(), why };
        let mut fleet = Fleet::default();
        let mut total = 0u64;
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (count, model) =
                part.split_once(['x', 'X']).ok_or_else(|| bad(format!("{part:?} has no COUNTx before the model")))?;
            let count: u32 = count.trim().parse().map_err(|_| bad(format!("{count:?} is not a count of GPUs")))?;
            if count == 0 || count > 1_000_000 {
                return Err(bad(format!("{count} GPUs of {model}: a count from 1 to 1000000")));
            }
            let name = names::require(model, names::resolve(model)).map_err(|e| bad(e.to_string()))?;
            // The whole fleet is bounded, not each part (100 parts of a million took GBs).
            total += u64::from(count);
            if total > MAX_GPUS {
                return Err(bad(format!("more than {MAX_GPUS} GPUs in all")));
            }
            let m = fleet.model_index(&name);
            let short = fleet.models[m as usize].name.to_ascii_lowercase();
            let mut left = count;
            while left > 0 {
                let n = left.min(CARDS_PER_NODE);
                let name = format!("{short}-{:04}", fleet.nodes.len() + 1);
                fleet.nodes.push(Node::new(&name, m, n));
                left -= n;
            }
        }
        if fleet.nodes.is_empty() {
            return Err(FleetError::Empty);
        }
        Ok(fleet)
    }

    /// The same nodes and GPU counts on another model (`--as-model`): layouts are dropped
    /// (the new model's are chosen by the policy), host resources kept.
    pub fn as_model(&self, name: &str) -> Self {
        let model = Model::named(name);
        let nodes = self.nodes.iter().map(|n| Node { model: 0, layouts: Vec::new(), ..n.clone() }).collect();
        Self { models: vec![model], nodes }
    }

    /// The fleet of these nodes only.
    pub fn subset(&self, nodes: &[usize]) -> Self {
        Self { models: self.models.clone(), nodes: nodes.iter().map(|&i| self.nodes[i].clone()).collect() }
    }

    /// Every card of `model` laid out as `text` (`--layout MODEL=LAYOUT`).
    pub fn set_layout(&mut self, model: &str, text: &str) -> Result<(), FleetError> {
        let bad = |why: String| FleetError::Layout { text: format!("{model}={text}"), why };
        let have: Vec<&str> = self.models.iter().map(|m| &*m.name).collect();
        let wanted = names::require(model, names::resolve_among(model, &have)).map_err(|e| bad(e.to_string()))?;
        let Some(m) = self.models.iter().position(|x| x.name == wanted) else {
            let have: Vec<&str> = self.models.iter().map(|m| &*m.name).collect();
            return Err(bad(format!("the fleet has no {model}; it has {}", have.join(", "))));
        };
        let layout = if text.trim().eq_ignore_ascii_case("whole") {
            None
        } else {
            let Some(gm) = self.models[m].mig else {
                return Err(bad(format!("{} has no MIG", self.models[m].name)));
            };
            match crate::model::mig::parse_layout(gm, text) {
                Ok(crate::model::mig::LayoutSpec::Mig(l)) => Some(l),
                Ok(crate::model::mig::LayoutSpec::Whole) => None,
                Err(e) => return Err(bad(e.to_string())),
            }
        };
        for n in self.nodes.iter_mut().filter(|n| n.model as usize == m) {
            n.layouts = vec![layout.clone(); n.gpus as usize];
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_makes_nodes_of_eight() {
        let f = Fleet::from_spec("20xA100-80GB, 3xL4").unwrap_or_default();
        assert_eq!(f.gpus(), 23);
        let sizes: Vec<u32> = f.nodes.iter().map(|n| n.gpus).collect();
        assert_eq!(sizes, vec![8, 8, 4, 3]);
        assert_eq!(&*f.models[0].name, "A100-80GB");
        assert!(f.models[0].mig.is_some());
        assert_eq!(&*f.models[1].name, "L4");
        assert_eq!(f.models[1].memory_mib, 24 * 1024);
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for bad in ["", "A100", "0xA100-80GB", "ax L4", "2000000xL4"] {
            assert!(Fleet::from_spec(bad).is_err(), "{bad}");
        }
        let e = Fleet::from_spec("fourxL4").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("\"four\" is not a count"), "{e}");
        // Each part within bounds, the sum not: refused before any node is made.
        let many = vec!["999999xL4"; 100].join(",");
        let e = Fleet::from_spec(&many).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("more than 1000000 GPUs in all"), "{e}");
    }

    #[test]
    fn a_spec_names_a_model_tessera_knows_or_says_what_was_meant() {
        let e = Fleet::from_spec("16xA100").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("more than one GPU model") && e.contains("A100-80GB"), "{e}");
        let e = Fleet::from_spec("8xZ9000").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("not a GPU model tessera knows"), "{e}");
        let f = Fleet::from_spec("8xnvidia h100 80gb hbm3,2xtesla-t4").unwrap_or_default();
        let names: Vec<&str> = f.models.iter().map(|m| &*m.name).collect();
        assert_eq!(names, vec!["H100-80GB", "T4"]);
        let mut f = Fleet::from_spec("8xA100-80GB").unwrap_or_default();
        assert!(f.set_layout("a100", "3g.40gb,3g.40gb").is_ok(), "a100 is the fleet's one A100");
    }

    #[test]
    fn the_trace_s_models_keep_their_name_and_unknown_memory() {
        let f = Fleet::from_spec("8xG2").unwrap_or_default();
        assert_eq!(&*f.models[0].name, "G2");
        assert_eq!(f.models[0].memory_mib, 0);
    }

    #[test]
    fn layouts_are_checked_against_the_catalog() {
        let mut f = Fleet::from_spec("8xA100-80GB").unwrap_or_default();
        assert!(f.set_layout("A100-80GB", "3g.40gb,3g.40gb").is_ok());
        assert_eq!(f.nodes[0].layouts.len(), 8);
        assert!(f.set_layout("A100-80GB", "9g.99gb").is_err());
        assert!(f.set_layout("L4", "whole").is_err());
    }
}
