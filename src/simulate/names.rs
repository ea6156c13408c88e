//! The one resolver of GPU model names a what-if is given (`--fleet`, `--as-model`,
//! `--layout`, a demand's `model` column, a trace's `gpu_spec`): every model tessera knows,
//! MIG or not, in any of the spellings people and tools write (case, NVML's and DCGM's
//! names, Kubernetes labels, Slurm GRES types such as `a100` or `a100_80gb`). A name that
//! means one model resolves to it; a family without its size (`a100`) resolves where the
//! fleet has one model of it, else it is ambiguous; anything else is unknown. Both say what
//! was perhaps meant.

use crate::model::mig::GpuModel;
use crate::model::mig::catalog::{catalog, lookup, suggest, without_mig};

/// Memory of cards without MIG, from NVIDIA's data sheets (L4, T4, A10, A10G, A2, A16 per
/// GPU, A40, L40, L40S, L20, V100 16 and 32 GB, P100 16 GB, P40, P4). Names as
/// `without_mig` gives them.
pub const MEMORY_GB: &[(&str, u64)] = &[
    ("L4", 24),
    ("L40S", 48),
    ("L40", 48),
    ("L20", 48),
    ("T4", 16),
    ("A10G", 24),
    ("A10", 24),
    ("A16", 16),
    ("A2", 16),
    ("A40", 48),
    ("V100M32", 32),
    ("V100M16", 16),
    ("V100", 32),
    ("P100", 16),
    ("P40", 24),
    ("P4", 8),
];

/// The Alibaba GPU trace v2023's models whose make it does not disclose (its node list's
/// `G1`..`G3`): known by name, memory unknown.
const TRACE_MODELS: &[&str] = &["G1", "G2", "G3"];

/// What a model name means.
#[derive(Debug, Clone)]
pub enum Resolved {
    /// One model: its name as tessera writes it, its MIG catalog entry where it has MIG,
    /// and one card's memory in MiB (0: unknown).
    Known { name: Box<str>, mig: Option<&'static GpuModel>, memory_mib: u64 },
    /// Several models (a family without its memory size).
    Ambiguous(Vec<String>),
    /// No model tessera knows; the nearest names, if any.
    Unknown(Vec<String>),
}

/// Why a name cannot be used, with what was perhaps meant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{name:?} is more than one GPU model: did you mean {}?", .meant.join(" or "))]
    Ambiguous { name: String, meant: Vec<String> },
    #[error("{name:?} is not a GPU model tessera knows{}", did_you_mean(.meant))]
    Unknown { name: String, meant: Vec<String> },
}

fn did_you_mean(meant: &[String]) -> String {
    if meant.is_empty() { String::new() } else { format!(" (did you mean {}?)", meant.join(" or ")) }
}

fn upper_words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_ascii_alphanumeric() && c != '.')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_uppercase)
        .collect()
}

/// The known model `name` is, if it is one.
fn known(name: &str) -> Option<Resolved> {
    if let Some(m) = lookup(name) {
        let memory_mib = m.profiles.iter().map(|p| p.planning_mib()).max().unwrap_or(0);
        return Some(Resolved::Known { name: m.name.as_str().into(), mig: Some(m), memory_mib });
    }
    let upper = name.trim().to_ascii_uppercase();
    // A V100 with its memory in the name is the trace's V100M16 or V100M32 (NVML writes
    // "Tesla V100-SXM2-16GB").
    let short = without_mig(name).map(|s| match (s, upper_words(name).iter().any(|w| w == "16GB")) {
        ("V100", true) => "V100M16",
        _ => s,
    });
    let plain = MEMORY_GB
        .iter()
        .find(|(n, _)| *n == upper)
        .or_else(|| short.and_then(|short| MEMORY_GB.iter().find(|(n, _)| *n == short)));
    if let Some((n, gb)) = plain {
        return Some(Resolved::Known { name: (*n).into(), mig: None, memory_mib: gb * 1024 });
    }
    TRACE_MODELS.iter().find(|n| **n == upper).map(|n| Resolved::Known { name: (*n).into(), mig: None, memory_mib: 0 })
}

/// Every name tessera knows, MIG catalog first, for suggestions.
fn all_names() -> impl Iterator<Item = (String, Vec<String>)> {
    let mig = catalog().models.iter().map(|m| {
        let words: Vec<String> = std::iter::once(&m.name).chain(&m.aliases).flat_map(|n| upper_words(n)).collect();
        (m.name.clone(), words)
    });
    let plain = MEMORY_GB
        .iter()
        .map(|(n, _)| *n)
        .chain(TRACE_MODELS.iter().copied())
        .map(|n| (n.to_string(), vec![n.to_string()]));
    mig.chain(plain)
}

/// What `name` means among every model tessera knows.
pub fn resolve(name: &str) -> Resolved {
    if let Some(k) = known(name) {
        return k;
    }
    let asked = upper_words(name);
    let asked: Vec<String> = match asked.first() {
        Some(w) if w == "NVIDIA" || w == "TESLA" => asked[1..].to_vec(),
        _ => asked,
    };
    if asked.is_empty() {
        return Resolved::Unknown(Vec::new());
    }
    // A family: every asked word starts a word of the model's names.
    let mut family: Vec<String> = all_names()
        .filter(|(_, words)| asked.iter().all(|a| words.iter().any(|w| w.starts_with(a.as_str()))))
        .map(|(n, _)| n)
        .collect();
    family.dedup();
    if family.len() > 1 {
        return Resolved::Ambiguous(family);
    }
    let near: Vec<String> =
        if family.is_empty() { suggest(name).into_iter().map(str::to_string).collect() } else { family };
    Resolved::Unknown(near)
}

/// What `name` means given the models a fleet has: one of them by its own name (a live
/// fleet's card no table has, in any case), else the model it resolves to where the fleet
/// has it, else the fleet's one model of the family it names (`a100` or `h100` with a fleet
/// of A100-80GB or H100-94GB is that one).
pub fn resolve_among(name: &str, have: &[&str]) -> Resolved {
    if let Some(h) = have.iter().find(|h| h.eq_ignore_ascii_case(name.trim())) {
        return match resolve(h) {
            k @ Resolved::Known { .. } => k,
            _ => Resolved::Known { name: (*h).into(), mig: None, memory_mib: 0 },
        };
    }
    let r = resolve(name);
    if let Resolved::Known { name: n, .. } = &r
        && have.contains(&&**n)
    {
        return r;
    }
    // The family the name starts: every asked word starts a word of the fleet's model.
    let asked = upper_words(name);
    let asked: Vec<&String> = asked.iter().filter(|w| *w != "NVIDIA" && *w != "TESLA").collect();
    let family: Vec<&&str> = have
        .iter()
        .filter(|h| {
            let words = upper_words(h);
            !asked.is_empty() && asked.iter().all(|a| words.iter().any(|w| w.starts_with(a.as_str())))
        })
        .collect();
    match (family.as_slice(), r) {
        ([one], _) => resolve_among(one, have),
        (_, r) => r,
    }
}

/// The name as tessera writes it, or why it cannot be used.
pub fn require(name: &str, r: Resolved) -> Result<Box<str>, NameError> {
    match r {
        Resolved::Known { name, .. } => Ok(name),
        Resolved::Ambiguous(meant) => Err(NameError::Ambiguous { name: name.trim().to_string(), meant }),
        Resolved::Unknown(meant) => Err(NameError::Unknown { name: name.trim().to_string(), meant }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(r: Resolved) -> String {
        match r {
            Resolved::Known { name, .. } => name.to_string(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn every_spelling_of_a_known_model_resolves_to_one_name() {
        for (typed, want) in [
            ("A100-80GB", "A100-80GB"),
            ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
            ("a100_80gb", "A100-80GB"),
            ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
            ("nvidia h100 80gb hbm3", "H100-80GB"),
            ("l4", "L4"),
            ("NVIDIA L4", "L4"),
            ("Tesla-T4", "T4"),
            ("t4", "T4"),
            ("V100M16", "V100M16"),
            ("Tesla V100-SXM2-16GB", "V100M16"),
            ("Tesla V100-SXM2-32GB", "V100"),
            ("g2", "G2"),
            ("G3", "G3"),
        ] {
            assert_eq!(name_of(resolve(typed)), want, "{typed}");
        }
    }

    #[test]
    fn a_family_without_its_size_is_ambiguous_unless_the_fleet_has_one() {
        let Resolved::Ambiguous(meant) = resolve("a100") else { panic!("{:?}", resolve("a100")) };
        assert!(meant.iter().any(|m| m == "A100-80GB") && meant.iter().any(|m| m == "A100-SXM4-40GB"), "{meant:?}");
        assert_eq!(name_of(resolve_among("a100", &["A100-80GB", "L4"])), "A100-80GB");
        // A family the catalog resolves alone still names the fleet's own member.
        assert_eq!(name_of(resolve_among("h100", &["H100-94GB"])), "H100-94GB");
        // A live fleet's card no table has is taken by its own name.
        assert_eq!(name_of(resolve_among("nvidia rtx a6000", &["NVIDIA RTX A6000"])), "NVIDIA RTX A6000");
        assert!(matches!(resolve_among("A100", &["L4"]), Resolved::Ambiguous(_)));
        let e = require("a100", resolve("a100")).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("did you mean") && e.contains("A100-80GB"), "{e}");
    }

    #[test]
    fn an_unknown_name_is_said_with_what_was_near() {
        let e = require("Z9000", resolve("Z9000")).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("not a GPU model tessera knows"), "{e}");
        assert!(matches!(resolve("H10"), Resolved::Ambiguous(_) | Resolved::Unknown(_)));
    }
}
