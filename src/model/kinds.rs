//! Which workloads are inference and which are training: rules over scheduler names
//! (Slurm partition and QOS, Kubernetes PriorityClass and namespace), set in `[kinds]`.

use serde::{Deserialize, Serialize};

use super::WorkloadKind;

/// Case-insensitive substrings; the first list that matches any of a workload's names wins,
/// in the order inference, other, training. A GPU workload that matches nothing is training
/// (the preemptible default); one without GPUs is other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KindRules {
    pub inference: Vec<String>,
    pub training: Vec<String>,
    pub other: Vec<String>,
}

impl Default for KindRules {
    fn default() -> Self {
        let v = |xs: &[&str]| xs.iter().map(|s| (*s).to_string()).collect();
        Self {
            inference: v(&["inference", "infer", "serving", "serve", "online", "realtime", "prod-api"]),
            training: v(&["training", "train", "batch", "research"]),
            other: Vec::new(),
        }
    }
}

impl KindRules {
    /// Classify a workload by the names a scheduler gives it (empty names are ignored).
    pub fn classify<'a>(&self, names: impl IntoIterator<Item = &'a str> + Clone, wants_gpu: bool) -> WorkloadKind {
        let hit = |patterns: &[String]| {
            names.clone().into_iter().filter(|n| !n.is_empty()).any(|n| {
                let n = n.to_ascii_lowercase();
                patterns.iter().any(|p| !p.is_empty() && n.contains(&p.to_ascii_lowercase()))
            })
        };
        if hit(&self.inference) {
            WorkloadKind::Inference
        } else if hit(&self.other) {
            WorkloadKind::Other
        } else if hit(&self.training) || wants_gpu {
            WorkloadKind::Training
        } else {
            WorkloadKind::Other
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_rules() {
        let r = KindRules::default();
        assert_eq!(r.classify(["inference", "normal"], true), WorkloadKind::Inference);
        assert_eq!(r.classify(["gpu", "High-Serving"], true), WorkloadKind::Inference);
        assert_eq!(r.classify(["gpu", "normal"], true), WorkloadKind::Training);
        assert_eq!(r.classify(["debug", ""], false), WorkloadKind::Other);
        assert_eq!(r.classify(["batch"], false), WorkloadKind::Training);
    }

    #[test]
    fn site_rules_override() {
        let r = KindRules { inference: vec!["llm-api".into()], training: vec![], other: vec!["interactive".into()] };
        assert_eq!(r.classify(["llm-api-prod"], true), WorkloadKind::Inference);
        assert_eq!(r.classify(["interactive"], true), WorkloadKind::Other);
        assert_eq!(r.classify(["inference"], true), WorkloadKind::Training);
    }
}
