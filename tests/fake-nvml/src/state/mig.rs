//! MIG on one card: NVIDIA's GPU instance rules (allowed placements, no memory-slice overlap,
//! per-profile max count, one +me instance), compute instances, and MIG device enumeration.

use std::collections::BTreeMap;

use nvml_wrapper_sys::bindings::{
    NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
    NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE,
    NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE,
    NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_COUNT, NVML_GPU_INSTANCE_PROFILE_COUNT,
    nvmlReturn_enum_NVML_ERROR_IN_USE, nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_RESOURCES,
};

use super::{Card, INVALID_ARGUMENT, NOT_SUPPORTED, NvmlResult};
use crate::catalog::{Model, Placement, Profile};

const INSUFFICIENT_RESOURCES: u32 = nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_RESOURCES;
const IN_USE: u32 = nvmlReturn_enum_NVML_ERROR_IN_USE;

#[derive(Debug, Clone)]
pub struct GpuInstance {
    pub id: u32,
    pub profile: &'static Profile,
    pub placement: Placement,
    pub memory_used_mib: u64,
    /// GPM graphics utilisation in percent (scenario `gpm_util`; 0 for created instances).
    pub gpm_util: f64,
    pub cis: BTreeMap<u32, ComputeInstance>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComputeInstance {
    pub id: u32,
    /// NVML_COMPUTE_INSTANCE_PROFILE_* value, which is also its profile id.
    pub profile_id: u32,
    pub slices: u32,
    /// Offset in compute slices inside the GPU instance.
    pub start: u32,
}

/// A compute instance profile as it applies inside one GPU instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CiProfile {
    pub id: u32,
    pub slices: u32,
    pub instance_count: u32,
}

fn overlaps(a: Placement, b: Placement) -> bool {
    a.start < b.start + b.size && b.start < a.start + a.size
}

/// Whether a GPU instance of `p` at `at` may join `existing` GPU instances.
fn fits(existing: &[(&Profile, Placement)], p: &Profile, at: Placement) -> NvmlResult<()> {
    if !p.placements.contains(&at) {
        return Err(INVALID_ARGUMENT);
    }
    let same = existing.iter().filter(|(q, _)| q.profile_id == p.profile_id).count();
    if same >= p.max_count as usize
        || (p.is_me() && existing.iter().any(|(q, _)| q.is_me()))
        || existing.iter().any(|&(_, pl)| overlaps(pl, at))
    {
        return Err(INSUFFICIENT_RESOURCES);
    }
    Ok(())
}

/// The lowest allowed placement of `p` that fits, if any.
fn first_fit(existing: &[(&Profile, Placement)], p: &Profile) -> Option<Placement> {
    let mut candidates = p.placements.clone();
    candidates.sort_by_key(|pl| pl.start);
    candidates.into_iter().find(|&pl| fits(existing, p, pl).is_ok())
}

/// The compute-slice count of a NVML_COMPUTE_INSTANCE_PROFILE_* value.
fn ci_slices(ci_profile: u32) -> Option<u32> {
    Some(match ci_profile {
        NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE => 1,
        NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE => 2,
        NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE => 3,
        NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE => 4,
        NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE => 7,
        NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE => 8,
        NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE => 6,
        _ => return None,
    })
}

impl GpuInstance {
    /// A compute instance profile inside this GPU instance (A100 pattern: 1c/2c/3c/4c and the
    /// full size, no 3c in a 4g). Out of range: INVALID_ARGUMENT; not offered: NOT_SUPPORTED.
    pub fn ci_profile(&self, ci_profile: u32) -> NvmlResult<CiProfile> {
        if ci_profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT {
            return Err(INVALID_ARGUMENT);
        }
        let g = self.profile.compute_slices;
        let slices = ci_slices(ci_profile).ok_or(NOT_SUPPORTED)?;
        if slices > g || (slices != g && !(1..=4).contains(&slices)) || (g == 4 && slices == 3) {
            return Err(NOT_SUPPORTED);
        }
        Ok(CiProfile { id: ci_profile, slices, instance_count: g / slices })
    }

    /// The lowest free start for a compute instance of `p` (starts at multiples of its size).
    fn ci_first_fit(&self, p: CiProfile, taken: &[(u32, u32)]) -> Option<u32> {
        (0..p.instance_count)
            .map(|k| k * p.slices)
            .find(|&s| taken.iter().all(|&(t, n)| s + p.slices <= t || t + n <= s))
    }

    fn ci_taken(&self) -> Vec<(u32, u32)> {
        self.cis.values().map(|c| (c.start, c.slices)).collect()
    }

    pub fn ci_remaining(&self, ci_profile: u32) -> NvmlResult<u32> {
        let p = self.ci_profile(ci_profile)?;
        let mut taken = self.ci_taken();
        let mut n = 0;
        while let Some(s) = self.ci_first_fit(p, &taken) {
            taken.push((s, p.slices));
            n += 1;
        }
        Ok(n)
    }

    /// Creates a compute instance (lowest free id from 0) and returns its id.
    pub fn create_ci(&mut self, ci_profile: u32) -> NvmlResult<u32> {
        let p = self.ci_profile(ci_profile)?;
        let start = self.ci_first_fit(p, &self.ci_taken()).ok_or(INSUFFICIENT_RESOURCES)?;
        let id = (0..).find(|i| !self.cis.contains_key(i)).ok_or(INSUFFICIENT_RESOURCES)?;
        self.cis.insert(id, ComputeInstance { id, profile_id: p.id, slices: p.slices, start });
        Ok(id)
    }

    pub fn ci_ids(&self, ci_profile: u32) -> NvmlResult<Vec<u32>> {
        let p = self.ci_profile(ci_profile)?;
        Ok(self.cis.values().filter(|c| c.profile_id == p.id).map(|c| c.id).collect())
    }

    /// The MIG device name's profile part: "3g.40gb", or "1c.3g.40gb" for a smaller compute instance.
    pub fn mig_name(&self, ci: u32) -> String {
        match self.cis.get(&ci) {
            Some(c) if c.slices < self.profile.compute_slices => format!("{}c.{}", c.slices, self.profile.name),
            _ => self.profile.name.clone(),
        }
    }
}

impl Card {
    /// The card's MIG model: NOT_SUPPORTED when the card is not MIG capable.
    pub fn mig_model(&self) -> NvmlResult<&'static Model> {
        self.model.ok_or(NOT_SUPPORTED)
    }

    /// The model, for calls that need MIG mode on (NOT_SUPPORTED otherwise, as NVML documents).
    pub fn mig_on(&self) -> NvmlResult<&'static Model> {
        let model = self.mig_model()?;
        if !self.mig_enabled {
            return Err(NOT_SUPPORTED);
        }
        Ok(model)
    }

    /// nvmlDeviceGetGpuInstanceProfileInfo: the profile for a NVML_GPU_INSTANCE_PROFILE_* value.
    pub fn profile_by_enum(&self, nvml_enum: u32) -> NvmlResult<&'static Profile> {
        let model = self.mig_on()?;
        if nvml_enum >= NVML_GPU_INSTANCE_PROFILE_COUNT {
            return Err(INVALID_ARGUMENT);
        }
        model.profile_by_enum(nvml_enum).ok_or(NOT_SUPPORTED)
    }

    /// The profile with this device-specific profile id; unknown: INVALID_ARGUMENT.
    pub fn profile_by_id(&self, profile_id: u32) -> NvmlResult<&'static Profile> {
        self.mig_on()?.profile_by_id(profile_id).ok_or(INVALID_ARGUMENT)
    }

    fn existing(&self) -> Vec<(&'static Profile, Placement)> {
        self.gis.values().map(|g| (g.profile, g.placement)).collect()
    }

    /// How many more GPU instances of the profile fit, given overlaps, counts and +me.
    pub fn remaining_capacity(&self, profile_id: u32) -> NvmlResult<u32> {
        let p = self.profile_by_id(profile_id)?;
        let mut existing = self.existing();
        let mut n = 0;
        while let Some(at) = first_fit(&existing, p) {
            existing.push((p, at));
            n += 1;
        }
        Ok(n)
    }

    /// Creates a GPU instance at `start` (None: the lowest free allowed placement); returns its id
    /// (lowest free from 1).
    pub fn create_gi(&mut self, profile_id: u32, at: Option<Placement>) -> NvmlResult<u32> {
        let profile = self.profile_by_id(profile_id)?;
        let existing = self.existing();
        let placement = match at {
            Some(at) => fits(&existing, profile, at).map(|()| at)?,
            None => first_fit(&existing, profile).ok_or(INSUFFICIENT_RESOURCES)?,
        };
        let id = (1..).find(|i| !self.gis.contains_key(i)).ok_or(INSUFFICIENT_RESOURCES)?;
        self.gis.insert(
            id,
            GpuInstance { id, profile, placement, memory_used_mib: 0, gpm_util: 0.0, cis: BTreeMap::new() },
        );
        Ok(id)
    }

    pub fn gi(&self, gi: u32) -> NvmlResult<&GpuInstance> {
        self.gis.get(&gi).ok_or(INVALID_ARGUMENT)
    }

    fn gi_mut(&mut self, gi: u32) -> NvmlResult<&mut GpuInstance> {
        self.gis.get_mut(&gi).ok_or(INVALID_ARGUMENT)
    }

    /// Destroys a GPU instance; IN_USE while it still has compute instances.
    pub fn destroy_gi(&mut self, gi: u32) -> NvmlResult<()> {
        if !self.gi(gi)?.cis.is_empty() {
            return Err(IN_USE);
        }
        self.gis.remove(&gi);
        Ok(())
    }

    pub fn create_ci(&mut self, gi: u32, ci_profile: u32) -> NvmlResult<u32> {
        self.gi_mut(gi)?.create_ci(ci_profile)
    }

    /// Destroys a compute instance; IN_USE while a scenario process runs on it.
    pub fn destroy_ci(&mut self, gi: u32, ci: u32) -> NvmlResult<()> {
        if self.processes.iter().any(|p| p.gi == gi && p.ci == ci) {
            return Err(IN_USE);
        }
        self.gi_mut(gi)?.cis.remove(&ci).map(|_| ()).ok_or(INVALID_ARGUMENT)
    }

    /// Ids of the GPU instances of a profile, by id.
    pub fn gi_ids(&self, profile_id: u32) -> NvmlResult<Vec<u32>> {
        let p = self.profile_by_id(profile_id)?;
        Ok(self.gis.values().filter(|g| g.profile.profile_id == p.profile_id).map(|g| g.id).collect())
    }

    /// Existing MIG devices (GPU instance id, compute instance id) in gi/ci order.
    pub fn mig_devices(&self) -> Vec<(u32, u32)> {
        self.gis.values().flat_map(|g| g.cis.keys().map(move |&ci| (g.id, ci))).collect()
    }

    /// The most MIG devices the card can hold: its compute slices with MIG on, 0 with MIG off.
    pub fn max_mig_devices(&self) -> NvmlResult<u32> {
        let model = self.mig_model()?;
        Ok(if self.mig_enabled { model.compute_slices } else { 0 })
    }

    /// Creates the scenario's instances in order; the error says which rule broke.
    pub(super) fn load_instances(&mut self) -> Result<(), String> {
        let instances = self.spec.instances.clone();
        if !instances.is_empty() && (self.model.is_none() || !self.mig_enabled) {
            return Err("instances need mig_model and mig_enabled".to_owned());
        }
        for (i, inst) in instances.iter().enumerate() {
            let fail = |what: &str, code: u32| format!("instances[{i}] ({}): {what} (NVML error {code})", inst.profile);
            let model = self.mig_model().map_err(|c| fail("no MIG model", c))?;
            let profile = model.profile_by_name(&inst.profile).ok_or_else(|| fail("unknown profile", 0))?;
            let at = inst.start.map(|start| {
                let size =
                    profile.placements.iter().find(|p| p.start == start).map_or(profile.memory_slices, |p| p.size);
                Placement { start, size }
            });
            let gi = self.create_gi(profile.profile_id, at).map_err(|c| fail("GPU instance rejected", c))?;
            let g = self.gi_mut(gi).map_err(|c| fail("lost GPU instance", c))?;
            g.memory_used_mib = inst.memory_used_mib;
            g.gpm_util = inst.gpm_util;
            if inst.compute_instances > 0 {
                // The largest compute instance profile of which `compute_instances` fit.
                let ci_profile = (0..NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
                    .filter_map(|id| g.ci_profile(id).ok())
                    .filter(|p| p.instance_count >= inst.compute_instances)
                    .max_by_key(|p| p.slices)
                    .ok_or_else(|| fail("too many compute_instances", 0))?;
                for _ in 0..inst.compute_instances {
                    g.create_ci(ci_profile.id).map_err(|c| fail("compute instance rejected", c))?;
                }
            }
        }
        for p in &self.processes {
            if p.gi != super::NO_ID && self.gis.get(&p.gi).and_then(|g| g.cis.get(&p.ci)).is_none() {
                return Err(format!("process {} on missing GPU/compute instance {}/{}", p.pid, p.gi, p.ci));
            }
        }
        Ok(())
    }
}
