//! Raw NVML calls that nvml-wrapper does not wrap: GPU and compute instances with their
//! placements (listing, creating, destroying), and a MIG device's GPU instance id. The NVML
//! source's only module with `unsafe`.
#![allow(unsafe_code)]

use std::mem;
use std::os::raw::c_uint;

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper::error::{NvmlError, nvml_sym, nvml_try};
use nvml_wrapper_sys::bindings::{
    nvmlComputeInstance_t, nvmlComputeInstanceInfo_t, nvmlComputeInstanceProfileInfo_t, nvmlGpuInstance_t,
    nvmlGpuInstanceInfo_t, nvmlGpuInstancePlacement_t, nvmlGpuInstanceProfileInfo_t,
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

/// An NVML call that failed: which one, and NVML's error.
#[derive(Debug)]
pub struct Failed {
    pub call: &'static str,
    pub error: NvmlError,
}

fn named<T>(call: &'static str, r: Result<T, NvmlError>) -> Result<T, Failed> {
    r.map_err(|error| Failed { call, error })
}

/// The symbol `$field` of the loaded library, or the failure naming it.
macro_rules! sym {
    ($nvml:expr, $field:ident) => {
        named(stringify!($field), nvml_sym($nvml.lib().$field.as_ref()))
    };
}

/// Every allowed placement (start, size) of a GPU instance profile id, as the device reports.
pub fn possible_placements(nvml: &Nvml, device: &Device, profile_id: u32) -> Result<Vec<(u32, u32)>, Failed> {
    let f = sym!(nvml, nvmlDeviceGetGpuInstancePossiblePlacements_v2)?;
    let call = "nvmlDeviceGetGpuInstancePossiblePlacements_v2";
    // SAFETY: the handle belongs to `device`, which borrows the live `nvml` it came from.
    let handle = unsafe { device.handle() };
    let mut count: c_uint = 0;
    // SAFETY: a NULL array asks for the count only; the out-pointer is a live local.
    named(call, nvml_try(unsafe { f(handle, profile_id, std::ptr::null_mut(), &mut count) }))?;
    if count == 0 {
        return Ok(Vec::new());
    }
    let zero = nvmlGpuInstancePlacement_t { start: 0, size: 0 };
    let mut list = vec![zero; count as usize];
    let mut written = count;
    // SAFETY: `list` holds `count` placements, the number NVML just said the profile has.
    named(call, nvml_try(unsafe { f(handle, profile_id, list.as_mut_ptr(), &mut written) }))?;
    list.truncate((written as usize).min(count as usize));
    Ok(list.into_iter().map(|p| (p.start, p.size)).collect())
}

/// The handle of GPU instance `id` on `device`.
fn gpu_instance_by_id(nvml: &Nvml, device: &Device, id: u32) -> Result<nvmlGpuInstance_t, Failed> {
    let f = sym!(nvml, nvmlDeviceGetGpuInstanceById)?;
    let mut gi: nvmlGpuInstance_t = std::ptr::null_mut();
    // SAFETY: a live device handle of `nvml`; the out-pointer is a live local.
    named("nvmlDeviceGetGpuInstanceById", nvml_try(unsafe { f(device.handle(), id, &mut gi) }))?;
    Ok(gi)
}

/// Creates a GPU instance of `profile_id` at the placement (`start`, `size`); its id.
pub fn create_gpu_instance(
    nvml: &Nvml,
    device: &Device,
    profile_id: u32,
    start: u32,
    size: u32,
) -> Result<u32, Failed> {
    let create = sym!(nvml, nvmlDeviceCreateGpuInstanceWithPlacement)?;
    let info = sym!(nvml, nvmlGpuInstanceGetInfo)?;
    let placement = nvmlGpuInstancePlacement_t { start, size };
    let mut gi: nvmlGpuInstance_t = std::ptr::null_mut();
    // SAFETY: a live device handle; `placement` and the out-pointer are live locals.
    let r = nvml_try(unsafe { create(device.handle(), profile_id, &placement, &mut gi) });
    named("nvmlDeviceCreateGpuInstanceWithPlacement", r)?;
    // SAFETY: plain data struct; zero is valid.
    let mut data: nvmlGpuInstanceInfo_t = unsafe { mem::zeroed() };
    // SAFETY: `gi` was just created by NVML; the out-pointer is live.
    named("nvmlGpuInstanceGetInfo", nvml_try(unsafe { info(gi, &mut data) }))?;
    Ok(data.id)
}

/// Destroys GPU instance `gi` (NVML refuses while it has compute instances).
pub fn destroy_gpu_instance(nvml: &Nvml, device: &Device, gi: u32) -> Result<(), Failed> {
    let destroy = sym!(nvml, nvmlGpuInstanceDestroy)?;
    let handle = gpu_instance_by_id(nvml, device, gi)?;
    // SAFETY: `handle` was just returned by NVML for this device.
    named("nvmlGpuInstanceDestroy", nvml_try(unsafe { destroy(handle) }))
}

/// Creates one compute instance of the largest profile GPU instance `gi` offers (the full
/// size); its id (`None` if it was created but could not be read) and compute slices.
pub fn create_full_compute_instance(nvml: &Nvml, device: &Device, gi: u32) -> Result<(Option<u32>, u32), Failed> {
    let profile_info = sym!(nvml, nvmlGpuInstanceGetComputeInstanceProfileInfo)?;
    let create = sym!(nvml, nvmlGpuInstanceCreateComputeInstance)?;
    let info_v2 = sym!(nvml, nvmlComputeInstanceGetInfo_v2)?;
    let handle = gpu_instance_by_id(nvml, device, gi)?;
    let mut best: Option<nvmlComputeInstanceProfileInfo_t> = None;
    for profile_enum in 0..CI_PROFILE_COUNT {
        // SAFETY: plain data struct; zero is valid.
        let mut info: nvmlComputeInstanceProfileInfo_t = unsafe { mem::zeroed() };
        // SAFETY: `handle` is a live GPU instance; engine profile 0 is SHARED; `info` is live.
        match nvml_try(unsafe { profile_info(handle, profile_enum, 0, &mut info) }) {
            Ok(()) => {}
            Err(e @ (NvmlError::GpuLost | NvmlError::NoPermission)) => {
                return Err(Failed { call: "nvmlGpuInstanceGetComputeInstanceProfileInfo", error: e });
            }
            // A profile this GPU instance does not offer.
            Err(_) => continue,
        }
        // The lowest enum of the largest size: the plain profile, not a later revision.
        if best.is_none_or(|b| info.sliceCount > b.sliceCount) {
            best = Some(info);
        }
    }
    let Some(profile) = best else {
        return Err(Failed { call: "nvmlGpuInstanceGetComputeInstanceProfileInfo", error: NvmlError::NotSupported });
    };
    let mut ci: nvmlComputeInstance_t = std::ptr::null_mut();
    // SAFETY: a live GPU instance handle, a profile id it offers, a live out-pointer.
    named("nvmlGpuInstanceCreateComputeInstance", nvml_try(unsafe { create(handle, profile.id, &mut ci) }))?;
    // SAFETY: plain data struct; zero is valid.
    let mut data: nvmlComputeInstanceInfo_t = unsafe { mem::zeroed() };
    // SAFETY: `ci` was just created by NVML; the out-pointer is live.
    let read = nvml_try(unsafe { info_v2(ci, &mut data) });
    Ok((read.ok().map(|()| data.id), profile.sliceCount))
}

/// Destroys compute instance `ci` of GPU instance `gi` (NVML refuses while processes run on it).
pub fn destroy_compute_instance(nvml: &Nvml, device: &Device, gi: u32, ci: u32) -> Result<(), Failed> {
    let by_id = sym!(nvml, nvmlGpuInstanceGetComputeInstanceById)?;
    let destroy = sym!(nvml, nvmlComputeInstanceDestroy)?;
    let gi_handle = gpu_instance_by_id(nvml, device, gi)?;
    let mut handle: nvmlComputeInstance_t = std::ptr::null_mut();
    // SAFETY: `gi_handle` was just returned by NVML; the out-pointer is a live local.
    named("nvmlGpuInstanceGetComputeInstanceById", nvml_try(unsafe { by_id(gi_handle, ci, &mut handle) }))?;
    // SAFETY: `handle` was just returned by NVML for this GPU instance.
    named("nvmlComputeInstanceDestroy", nvml_try(unsafe { destroy(handle) }))
}
