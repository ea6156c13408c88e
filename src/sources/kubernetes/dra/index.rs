//! The slices gathered into pools (the newest generation of each, counter sets from every
//! slice of it: the split layout and the combined one read alike), every device found by pool
//! and name, and what allocated claims hold: device → the pods its claim is reserved for.

use std::collections::HashMap;
use std::sync::Arc;

use super::objects::{CounterSet, Device, MAX_COUNTER_SETS, MAX_COUNTERS, MAX_DEVICES, MAX_DEVICES_PARTITIONED, Slice};
use super::{Claim, GPU_DRIVER, Picture};

/// One pool of the GPU driver: its node, counter sets and devices.
#[derive(Debug, Default)]
pub struct Pool<'a> {
    pub name: &'a str,
    pub driver: &'a str,
    pub node: Option<&'a str>,
    pub sets: HashMap<&'a str, &'a CounterSet>,
    pub devices: Vec<&'a Device>,
    /// Problems of the pool's slices, said on each of its cards.
    pub problems: Vec<String>,
}

pub struct Devices<'a> {
    pools: Vec<Pool<'a>>,
    /// pool → device → (pool position, device position).
    by_name: HashMap<&'a str, HashMap<&'a str, (usize, usize)>>,
}

impl<'a> Devices<'a> {
    pub fn new(slices: &'a [Arc<Slice>]) -> Self {
        // The newest generation of each pool: older slices are being replaced.
        let mut newest: HashMap<&str, i64> = HashMap::new();
        for s in slices.iter().filter(|s| &*s.spec.driver == GPU_DRIVER) {
            let g = newest.entry(&s.spec.pool.name).or_insert(i64::MIN);
            *g = (*g).max(s.spec.pool.generation);
        }
        let mut at: HashMap<&str, usize> = HashMap::new();
        let mut pools: Vec<Pool> = Vec::new();
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut want: HashMap<&str, i64> = HashMap::new();
        for s in slices.iter().filter(|s| &*s.spec.driver == GPU_DRIVER) {
            let spec = &s.spec;
            if newest.get(&*spec.pool.name) != Some(&spec.pool.generation) {
                continue;
            }
            let i = *at.entry(&spec.pool.name).or_insert_with(|| {
                pools.push(Pool { name: &spec.pool.name, driver: &spec.driver, ..Pool::default() });
                pools.len() - 1
            });
            let pool = &mut pools[i];
            *seen.entry(&spec.pool.name).or_default() += 1;
            want.insert(&spec.pool.name, spec.pool.resource_slice_count);
            if pool.node.is_none() {
                pool.node = spec.node_name.as_deref();
            }
            let name = s.metadata.name.as_deref().unwrap_or_default();
            limits(s, name, pool);
            for set in &spec.shared_counters.items {
                if pool.sets.insert(&set.name, set).is_some() {
                    pool.problems.push(format!("counter set {} declared twice in pool {}", &*set.name, pool.name));
                }
            }
            pool.devices.extend(spec.devices.items.iter());
        }
        for pool in &mut pools {
            let (got, wanted) = (seen.get(pool.name).copied().unwrap_or(0), want.get(pool.name).copied().unwrap_or(0));
            if i64::try_from(got).unwrap_or(i64::MAX) < wanted {
                pool.problems.push(format!("pool {} incomplete: {got} of {wanted} slices published", pool.name));
            }
        }
        let mut by_name: HashMap<&str, HashMap<&str, (usize, usize)>> = HashMap::new();
        for (p, pool) in pools.iter_mut().enumerate() {
            let mut twice = Vec::new();
            let names = by_name.entry(pool.name).or_default();
            for (d, dev) in pool.devices.iter().enumerate() {
                // The first of two devices of one name is the one found.
                match names.entry(&*dev.name) {
                    std::collections::hash_map::Entry::Occupied(_) => {
                        twice.push(format!("device {} published twice in pool {}", &*dev.name, pool.name));
                    }
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert((p, d));
                    }
                }
            }
            pool.problems.extend(twice.into_iter().take(4));
        }
        Self { pools, by_name }
    }

    pub fn pools(&self) -> impl Iterator<Item = &Pool<'a>> {
        self.pools.iter()
    }

    pub fn get(&self, pool: &str, device: &str) -> Option<&'a Device> {
        let &(p, d) = self.by_name.get(pool)?.get(device)?;
        self.pools.get(p)?.devices.get(d).copied()
    }
}

/// The API's limits on one slice, said as problems of its pool.
fn limits(s: &Slice, name: &str, pool: &mut Pool) {
    let spec = &s.spec;
    let partitioned =
        spec.devices.items.iter().any(|d| !d.taints.items.is_empty() || !d.consumes_counters.items.is_empty());
    let most = if partitioned { MAX_DEVICES_PARTITIONED } else { MAX_DEVICES };
    let devices = spec.devices.total;
    if devices > most {
        let read = spec.devices.items.len();
        pool.problems.push(format!(
            "ResourceSlice {name}: {devices} devices, over the API's {most}{}",
            if read < devices { format!(" ({} not read)", devices - read) } else { String::new() }
        ));
    }
    if spec.shared_counters.over() {
        pool.problems.push(format!(
            "ResourceSlice {name}: {} counter sets, over the API's {MAX_COUNTER_SETS} (the rest not read)",
            spec.shared_counters.total
        ));
    }
    for set in spec.shared_counters.items.iter().filter(|c| c.counters.total > MAX_COUNTERS) {
        pool.problems.push(format!(
            "ResourceSlice {name}: counter set {} has {} counters, over the API's {MAX_COUNTERS}",
            &*set.name, set.counters.total
        ));
    }
    for d in &spec.devices.items {
        let over = [
            (d.attributes.total + d.capacity.total > super::objects::MAX_ATTRIBUTES, "attributes and capacities"),
            (d.consumes_counters.over(), "counter consumptions"),
            (d.taints.over(), "taints"),
        ];
        for (_, what) in over.iter().filter(|(o, _)| *o) {
            pool.problems.push(format!("device {}: more {what} than the API allows", &*d.name));
        }
        for (attr, ty) in &d.attributes.unknown {
            pool.problems.push(format!(
                "device {}: attribute {} has a type the API does not have ({})",
                &*d.name, &**attr, &**ty
            ));
        }
    }
}

/// Holders of allocated devices: (pool, device) → workload ids of the pods the claim is
/// reserved for, or the claim itself (`claim:NS/NAME`) while no pod uses it yet: an allocated
/// device is taken either way.
pub struct Allocations<'a> {
    /// pool → device → holders.
    by_device: HashMap<&'a str, HashMap<&'a str, Vec<String>>>,
}

impl<'a> Allocations<'a> {
    pub fn new(claims: &'a [Arc<Claim>], devices: &Devices, pic: &mut Picture) -> Self {
        let mut by_device: HashMap<&str, HashMap<&str, Vec<String>>> = HashMap::new();
        for c in claims {
            let Some(a) = &c.status.allocation else { continue };
            let ns = c.metadata.namespace.as_deref().unwrap_or_default();
            let name = c.metadata.name.as_deref().unwrap_or_default();
            let mut holders: Vec<String> = c
                .status
                .reserved_for
                .items
                .iter()
                .filter(|r| r.resource == "pods" && !r.name.is_empty())
                .map(|r| format!("k8s:{ns}/{}", r.name))
                .collect();
            if holders.is_empty() {
                holders.push(format!("claim:{ns}/{name}"));
            }
            // An admin-access result neither holds the device nor consumes its counters.
            let allocated = |r: &&super::objects::AllocatedDevice| r.admin_access != Some(true);
            for r in a.devices.results.items.iter().filter(|r| &*r.driver == GPU_DRIVER).filter(allocated) {
                if devices.get(&r.pool, &r.device).is_none() {
                    pic.note(format!(
                        "ResourceClaim {ns}/{name} is allocated device {} of pool {}, which no ResourceSlice publishes",
                        &*r.device, &*r.pool
                    ));
                    continue;
                }
                let list = by_device.entry(&r.pool).or_default().entry(&r.device).or_default();
                for h in &holders {
                    if !list.contains(h) {
                        list.push(h.clone());
                    }
                }
            }
        }
        Self { by_device }
    }

    /// Who holds the device; empty: nobody, it is free.
    pub fn holders(&self, pool: &str, device: &str) -> &[String] {
        self.by_device.get(pool).and_then(|d| d.get(device)).map_or(&[], Vec::as_slice)
    }
}
