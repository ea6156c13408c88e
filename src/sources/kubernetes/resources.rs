//! NVIDIA's extended resource names and GFD labels: which resources are GPUs, whole-unit
//! quantities, what a pod asks for, and the model and MIG profile a label names.

use std::collections::BTreeMap;

use super::objects::{Container, PodSpec, Qty, ResourceList};

pub const GPU: &str = "nvidia.com/gpu";
pub const PRODUCT: &str = "nvidia.com/gpu.product";
pub const COUNT: &str = "nvidia.com/gpu.count";
pub const MEMORY: &str = "nvidia.com/gpu.memory";
pub const MIG_STRATEGY: &str = "nvidia.com/mig.strategy";
pub const MIG_CONFIG: &str = "nvidia.com/mig.config";
pub const MIG_STATE: &str = "nvidia.com/mig.config.state";
/// GPU Feature Discovery's sharing labels: `none | time-slicing | mps`, replicas per card
/// (1 unshared, 0 on MIG cards), MPS capability, and the device plugin's per-node config.
pub const SHARING: &str = "nvidia.com/gpu.sharing-strategy";
pub const REPLICAS: &str = "nvidia.com/gpu.replicas";
pub const MPS_CAPABLE: &str = "nvidia.com/mps.capable";
pub const PLUGIN_CONFIG: &str = "nvidia.com/device-plugin.config";

/// What a GPU resource name hands out.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum GpuResource {
    /// `nvidia.com/gpu`: a whole card, or a MIG instance under the single strategy.
    Gpu,
    /// `nvidia.com/gpu.shared`: a time-slicing or MPS replica of a card.
    Shared,
    /// `nvidia.com/mig-<profile>` (mixed strategy), also its `.shared` replicas.
    Mig(String),
}

impl GpuResource {
    pub fn parse(name: &str) -> Option<Self> {
        if name == GPU {
            return Some(Self::Gpu);
        }
        if name == "nvidia.com/gpu.shared" {
            return Some(Self::Shared);
        }
        let profile = name.strip_prefix("nvidia.com/mig-")?;
        let profile = profile.strip_suffix(".shared").unwrap_or(profile);
        // Labels share the prefix (`nvidia.com/mig-1g.10gb.count`); a profile is `<n>g.<m>gb`
        // with an optional media-extension suffix.
        let plain = profile.strip_suffix("+me").or_else(|| profile.strip_suffix(".me")).unwrap_or(profile);
        let (g, mem) = plain.split_once("g.")?;
        let ok = !g.is_empty()
            && g.bytes().all(|b| b.is_ascii_digit())
            && mem.strip_suffix("gb").is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()));
        ok.then(|| Self::Mig(profile.to_string()))
    }
}

/// A quantity as a whole number of units: extended resources are integers, but may still be
/// written `1000m`, `2k` or `1e3`. Fractions and garbage give `None`.
pub fn count(q: &Qty) -> Option<u64> {
    let s = q.0.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let num = num.strip_prefix('+').unwrap_or(num);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Value = digits × 10^(scale10) × 2^(scale2), computed exactly in integers.
    let digits: u128 = format!("{int}{frac}").parse().ok()?;
    let mut scale10 = -i32::try_from(frac.len()).ok()?;
    let mut scale2 = 0u32;
    match suffix {
        "" => {}
        "m" => scale10 -= 3,
        "k" => scale10 += 3,
        "M" => scale10 += 6,
        "G" => scale10 += 9,
        "T" => scale10 += 12,
        "P" => scale10 += 15,
        "E" => scale10 += 18,
        "Ki" => scale2 = 10,
        "Mi" => scale2 = 20,
        "Gi" => scale2 = 30,
        "Ti" => scale2 = 40,
        "Pi" => scale2 = 50,
        "Ei" => scale2 = 60,
        e => scale10 += e.strip_prefix(['e', 'E'])?.parse::<i32>().ok()?,
    }
    let mut v = digits.checked_mul(1u128.checked_shl(scale2)?)?;
    while scale10 > 0 {
        v = v.checked_mul(10)?;
        scale10 -= 1;
    }
    while scale10 < 0 {
        if v % 10 != 0 {
            return None;
        }
        v /= 10;
        scale10 += 1;
    }
    u64::try_from(v).ok()
}

/// What one container asks of `name`: its request, or its limit where only a limit is set
/// (Kubernetes defaults an extended resource's request to its limit).
fn amount(c: &Container, name: &str) -> u64 {
    c.resources.requests.get(name).or_else(|| c.resources.limits.get(name)).and_then(count).unwrap_or(0)
}

fn gpu_names(list: &ResourceList) -> impl Iterator<Item = &String> {
    list.keys().filter(|k| GpuResource::parse(k).is_some())
}

/// GPU resources a pod asks for, by resource name, as the scheduler counts them: app
/// containers and sidecars add up, and a plain init container only needs its own amount
/// while it runs alone.
pub fn pod_gpus(spec: &PodSpec) -> BTreeMap<String, u64> {
    let mut names: Vec<&String> = Vec::new();
    for c in spec.containers.iter().chain(&spec.init_containers) {
        names.extend(gpu_names(&c.resources.requests).chain(gpu_names(&c.resources.limits)));
    }
    names.sort();
    names.dedup();
    let sidecar = |c: &&Container| c.restart_policy.as_deref() == Some("Always");
    names
        .into_iter()
        .filter_map(|name| {
            let running: u64 = spec
                .containers
                .iter()
                .chain(spec.init_containers.iter().filter(sidecar))
                .map(|c| amount(c, name))
                .sum();
            let init = spec.init_containers.iter().filter(|c| !sidecar(c)).map(|c| amount(c, name)).max().unwrap_or(0);
            let n = running.max(init);
            (n > 0).then(|| (name.clone(), n))
        })
        .collect()
}

/// `A100-SXM4-40GB-MIG-1g.5gb` → (`A100-SXM4-40GB`, Some(`1g.5gb`)): the single strategy names
/// the MIG profile in the product label.
pub fn split_product(product: &str) -> (&str, Option<&str>) {
    // GFD appends -SHARED to a shared card's product unless the resource is renamed.
    let product = product.strip_suffix("-SHARED").unwrap_or(product);
    match product.split_once("-MIG-") {
        Some((base, profile)) if !profile.is_empty() => (base, Some(profile)),
        _ => (product, None),
    }
}

/// The catalog's name for a product label, else the label without its MIG suffix.
pub fn model_name(product: &str) -> String {
    let (base, _) = split_product(product);
    crate::model::mig::catalog::model_key(base)
}

/// The `nvidia.com/gpu.product` a pod is pinned to by its node selector, or by a required
/// node affinity that allows exactly one product.
pub fn wanted_product(spec: &PodSpec) -> Option<&str> {
    if let Some(p) = spec.node_selector.get(PRODUCT) {
        return Some(p);
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    // Terms are alternatives: only a product every term agrees on is certain.
    let mut found: Option<&str> = None;
    for term in terms {
        let one = term.match_expressions.iter().find_map(|r| {
            match (r.key.as_str(), r.operator.as_str(), r.values.as_slice()) {
                (PRODUCT, "In", [v]) => Some(v.as_str()),
                _ => None,
            }
        })?;
        if found.is_some_and(|f| f != one) {
            return None;
        }
        found = Some(one);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Qty {
        Qty(s.to_string())
    }

    #[test]
    fn resource_names() {
        assert_eq!(GpuResource::parse("nvidia.com/gpu"), Some(GpuResource::Gpu));
        assert_eq!(GpuResource::parse("nvidia.com/gpu.shared"), Some(GpuResource::Shared));
        assert_eq!(GpuResource::parse("nvidia.com/mig-1g.10gb"), Some(GpuResource::Mig("1g.10gb".into())));
        assert_eq!(GpuResource::parse("nvidia.com/mig-1g.10gb+me"), Some(GpuResource::Mig("1g.10gb+me".into())));
        assert_eq!(GpuResource::parse("nvidia.com/mig-3g.48gb.shared"), Some(GpuResource::Mig("3g.48gb".into())));
        assert_eq!(GpuResource::parse("nvidia.com/mig-1g.10gb.count"), None);
        assert_eq!(GpuResource::parse("nvidia.com/mig.config"), None);
        assert_eq!(GpuResource::parse("nvidia.com/gpu.count"), None);
        assert_eq!(GpuResource::parse("cpu"), None);
    }

    #[test]
    fn quantities() {
        assert_eq!(count(&q("7")), Some(7));
        assert_eq!(count(&q("0")), Some(0));
        assert_eq!(count(&q("1000m")), Some(1));
        assert_eq!(count(&q("1500m")), None);
        assert_eq!(count(&q("2k")), Some(2000));
        assert_eq!(count(&q("1e3")), Some(1000));
        assert_eq!(count(&q("1Ki")), Some(1024));
        assert_eq!(count(&q("12700100Ki")), Some(12_700_100 * 1024));
        assert_eq!(count(&q("96626364666")), Some(96_626_364_666));
        assert_eq!(count(&q("3920m")), None);
        assert_eq!(count(&q("1.5")), None);
        assert_eq!(count(&q("2.0")), Some(2));
        assert_eq!(count(&q("-1")), None);
        assert_eq!(count(&q("")), None);
        assert_eq!(count(&q("lots")), None);
        assert_eq!(count(&q("1e999")), None);
    }

    #[test]
    fn products() {
        assert_eq!(split_product("A100-SXM4-40GB-MIG-1g.5gb"), ("A100-SXM4-40GB", Some("1g.5gb")));
        assert_eq!(split_product("NVIDIA-H100-80GB-HBM3"), ("NVIDIA-H100-80GB-HBM3", None));
        assert_eq!(model_name("NVIDIA-H100-80GB-HBM3"), "H100-80GB");
        assert_eq!(model_name("A100-PCIE-40GB-MIG-1g.5gb"), "A100-SXM4-40GB");
        assert_eq!(model_name("NVIDIA-H20"), "NVIDIA-H20");
        assert_eq!(split_product("NVIDIA-A10G-SHARED"), ("NVIDIA-A10G", None));
        assert_eq!(split_product("A100-SXM4-40GB-MIG-1g.5gb-SHARED"), ("A100-SXM4-40GB", Some("1g.5gb")));
        assert_eq!(model_name("NVIDIA-H100-80GB-HBM3-SHARED"), "H100-80GB");
    }
}
