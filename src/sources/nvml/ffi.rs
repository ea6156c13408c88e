//! Raw NVML calls that nvml-wrapper does not wrap: GPU and compute instances with their
//! placements, and a MIG device's GPU instance id. The only module of tessera with `unsafe`.
#![allow(unsafe_code)]

use std::mem;
use std::os::raw::c_uint;

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper::error::{NvmlError, nvml_sym, nvml_try};
use nvml_wrapper_sys::bindings::{
    nvmlComputeInstance_t, nvmlComputeInstanceInfo_t, nvmlComputeInstanceProfileInfo_t, nvmlGpuInstance_t,
    nvmlGpuInstanceInfo_t, nvmlGpuInstanceProfileInfo_t,
};

/// NVML_GPU_INSTANCE_PROFILE_COUNT and NVML_COMPUTE_INSTANCE_PROFILE_COUNT of current nvml.h
/// (the bundled bindings are older: 17 and 8); drivers answer unknown profiles with an error.
const GI_PROFILE_COUNT: c_uint = 0x12;
const CI_PROFILE_COUNT: c_uint = 0x9;

/// A GPU instance as the driver reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuInstance {
    pub id: u32,
    /// The profile enum value (NVML_GPU_INSTANCE_PROFILE_*), to name it from the catalog.
    pub profile_enum: u32,
    /// The device-specific profile id (what `nvidia-smi mig -lgip` shows).
    pub profile_id: u32,
    pub compute_slices: u32,
    pub memory_mib: u64,
    pub start: u32,
    pub size: u32,
    /// (compute instance id, compute slices) of each compute instance.
    pub compute_instances: Vec<(u32, u32)>,
}

/// Every GPU instance on `device`, with its compute instances. Profiles the device does not
/// support are skipped; other errors are returned.
pub fn gpu_instances(nvml: &Nvml, device: &Device) -> Result<Vec<GpuInstance>, NvmlError> {
    let lib = nvml.lib();
    let profile_info = nvml_sym(lib.nvmlDeviceGetGpuInstanceProfileInfo.as_ref())?;
    let get_instances = nvml_sym(lib.nvmlDeviceGetGpuInstances.as_ref())?;
    let gi_info = nvml_sym(lib.nvmlGpuInstanceGetInfo.as_ref())?;
    // SAFETY: the handle belongs to `device`, which borrows the live `nvml` it came from.
    let handle = unsafe { device.handle() };
    let mut out = Vec::new();
    for profile_enum in 0..GI_PROFILE_COUNT {
        // SAFETY: nvmlGpuInstanceProfileInfo_t is plain data; zero is a valid value.
        let mut info: nvmlGpuInstanceProfileInfo_t = unsafe { mem::zeroed() };
        // SAFETY: a valid device handle and a pointer to a live, writable struct.
        // A profile the driver does not know or support answers with an error of its own
        // choosing; only a lost GPU or missing permission is the card's problem.
        match nvml_try(unsafe { profile_info(handle, profile_enum, &mut info) }) {
            Ok(()) => {}
            Err(e @ (NvmlError::GpuLost | NvmlError::NoPermission)) => return Err(e),
            Err(_) => continue,
        }
        let cap = info.instanceCount.max(1) as usize;
        let mut handles: Vec<nvmlGpuInstance_t> = vec![std::ptr::null_mut(); cap];
        let mut count: c_uint = 0;
        // SAFETY: `handles` has room for `cap` = instanceCount entries, the most NVML writes.
        nvml_try(unsafe { get_instances(handle, info.id, handles.as_mut_ptr(), &mut count) })?;
        for &gi in handles.iter().take((count as usize).min(cap)) {
            // SAFETY: plain data struct; zero is valid.
            let mut gi_data: nvmlGpuInstanceInfo_t = unsafe { mem::zeroed() };
            // SAFETY: `gi` was just returned by NVML for this device; the out-pointer is live.
            nvml_try(unsafe { gi_info(gi, &mut gi_data) })?;
            out.push(GpuInstance {
                id: gi_data.id,
                profile_enum,
                profile_id: info.id,
                compute_slices: info.sliceCount,
                memory_mib: info.memorySizeMB,
                start: gi_data.placement.start,
                size: gi_data.placement.size,
                compute_instances: compute_instances(nvml, gi)?,
            });
        }
    }
    out.sort_by_key(|g| (g.start, g.id));
    Ok(out)
}

fn compute_instances(nvml: &Nvml, gi: nvmlGpuInstance_t) -> Result<Vec<(u32, u32)>, NvmlError> {
    let lib = nvml.lib();
    let profile_info = nvml_sym(lib.nvmlGpuInstanceGetComputeInstanceProfileInfo.as_ref())?;
    let get = nvml_sym(lib.nvmlGpuInstanceGetComputeInstances.as_ref())?;
    let info_v2 = nvml_sym(lib.nvmlComputeInstanceGetInfo_v2.as_ref())?;
    let mut out = Vec::new();
    for profile_enum in 0..CI_PROFILE_COUNT {
        // SAFETY: plain data struct; zero is valid.
        let mut info: nvmlComputeInstanceProfileInfo_t = unsafe { mem::zeroed() };
        // SAFETY: `gi` is a live GPU instance handle; engine profile 0 is SHARED.
        match nvml_try(unsafe { profile_info(gi, profile_enum, 0, &mut info) }) {
            Ok(()) => {}
            Err(e @ (NvmlError::GpuLost | NvmlError::NoPermission)) => return Err(e),
            Err(_) => continue,
        }
        let cap = info.instanceCount.max(1) as usize;
        let mut handles: Vec<nvmlComputeInstance_t> = vec![std::ptr::null_mut(); cap];
        let mut count: c_uint = 0;
        // SAFETY: room for instanceCount handles, the most NVML writes.
        nvml_try(unsafe { get(gi, info.id, handles.as_mut_ptr(), &mut count) })?;
        for &ci in handles.iter().take((count as usize).min(cap)) {
            // SAFETY: plain data struct; zero is valid.
            let mut data: nvmlComputeInstanceInfo_t = unsafe { mem::zeroed() };
            // SAFETY: `ci` was just returned by NVML; the out-pointer is live.
            nvml_try(unsafe { info_v2(ci, &mut data) })?;
            out.push((data.id, info.sliceCount));
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The GPU instance id of a MIG device handle.
pub fn gpu_instance_id(nvml: &Nvml, mig_device: &Device) -> Result<u32, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetGpuInstanceId.as_ref())?;
    let mut id: c_uint = 0;
    // SAFETY: the handle belongs to a live MIG device of `nvml`; the out-pointer is live.
    nvml_try(unsafe { sym(mig_device.handle(), &mut id) })?;
    Ok(id)
}
