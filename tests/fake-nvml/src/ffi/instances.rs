//! Exports taking GPU instance and compute instance handles: info, destroy, and compute instance
//! profiles, capacity, creation and lookup (by profile or by id).

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::{
    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT, nvmlComputeInstance_t, nvmlComputeInstanceInfo_t,
    nvmlComputeInstancePlacement_t, nvmlComputeInstanceProfileInfo_t, nvmlGpuInstance_t, nvmlGpuInstanceInfo_t,
    nvmlGpuInstancePlacement_t, nvmlReturn_enum_NVML_ERROR_NOT_FOUND, nvmlReturn_t,
};

use super::{SUCCESS, addr, nonnull, put, put_slice, to_ptr, with_state};
use crate::state::{Handle, INVALID_ARGUMENT};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceGetInfo(
    gpu_instance: nvmlGpuInstance_t,
    info: *mut nvmlGpuInstanceInfo_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let (card, gi) = s.gpu_instance(addr(gpu_instance), "nvmlGpuInstanceGetInfo")?;
        let g = s.cards[card].gi(gi)?;
        Ok(nvmlGpuInstanceInfo_t {
            device: to_ptr(Handle::Device(card)),
            id: g.id,
            profileId: g.profile.profile_id,
            placement: nvmlGpuInstancePlacement_t { start: g.placement.start, size: g.placement.size },
        })
    });
    // SAFETY: `info` is NULL or the caller's writable struct.
    unsafe { put(info, r) }
}

/// Mutating; IN_USE while the GPU instance has compute instances.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceDestroy(gpu_instance: nvmlGpuInstance_t) -> nvmlReturn_t {
    let r = with_state(|s| {
        let (card, gi) = s.gpu_instance(addr(gpu_instance), "nvmlGpuInstanceDestroy")?;
        s.mutate(|s| s.cards[card].destroy_gi(gi))
    });
    r.err().unwrap_or(SUCCESS)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstanceProfileInfo(
    gpu_instance: nvmlGpuInstance_t,
    profile: c_uint,
    eng_profile: c_uint,
    info: *mut nvmlComputeInstanceProfileInfo_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let (card, gi) = s.gpu_instance(addr(gpu_instance), "nvmlGpuInstanceGetComputeInstanceProfileInfo")?;
        if eng_profile >= NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT {
            return Err(INVALID_ARGUMENT);
        }
        let g = s.cards[card].gi(gi)?;
        let ci = g.ci_profile(profile)?;
        let gp = g.profile;
        Ok(nvmlComputeInstanceProfileInfo_t {
            id: ci.id,
            sliceCount: ci.slices,
            instanceCount: ci.instance_count,
            multiprocessorCount: gp.sm_count.unwrap_or(0) * ci.slices / gp.compute_slices.max(1),
            sharedCopyEngineCount: gp.copy_engines.unwrap_or(0),
            sharedDecoderCount: gp.media.nvdec.unwrap_or(0),
            sharedEncoderCount: gp.media.nvenc.unwrap_or(0),
            sharedJpegCount: gp.media.nvjpg.unwrap_or(0),
            sharedOfaCount: gp.media.ofa.unwrap_or(0),
        })
    });
    // SAFETY: `info` is NULL or the caller's writable struct.
    unsafe { put(info, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstanceRemainingCapacity(
    gpu_instance: nvmlGpuInstance_t,
    profile_id: c_uint,
    count: *mut c_uint,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let (card, gi) = s.gpu_instance(addr(gpu_instance), "nvmlGpuInstanceGetComputeInstanceRemainingCapacity")?;
        s.cards[card].gi(gi)?.ci_remaining(profile_id)
    });
    // SAFETY: `count` is NULL or the caller's writable out-pointer.
    unsafe { put(count, r) }
}

/// Mutating: creates a compute instance (lowest free id from 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceCreateComputeInstance(
    gpu_instance: nvmlGpuInstance_t,
    profile_id: c_uint,
    compute_instance: *mut nvmlComputeInstance_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let (card, gi) = s.gpu_instance(addr(gpu_instance), "nvmlGpuInstanceCreateComputeInstance")?;
        nonnull(compute_instance)?;
        let ci = s.mutate(|s| s.cards[card].create_ci(gi, profile_id))?;
        Ok(to_ptr(Handle::Ci { card, gi, ci }))
    });
    // SAFETY: `compute_instance` is NULL or the caller's writable out-pointer.
    unsafe { put(compute_instance, r) }
}

/// The compute instances of a profile id. `*count` is output only: the array must hold the
/// profile's instanceCount handles, as NVML documents.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstances(
    gpu_instance: nvmlGpuInstance_t,
    profile_id: c_uint,
    compute_instances: *mut nvmlComputeInstance_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let (card, gi) = s.gpu_instance(addr(gpu_instance), "nvmlGpuInstanceGetComputeInstances")?;
        let ids = s.cards[card].gi(gi)?.ci_ids(profile_id)?;
        nonnull(compute_instances)?;
        nonnull(count)?;
        Ok(ids.into_iter().map(|ci| to_ptr(Handle::Ci { card, gi, ci })).collect::<Vec<nvmlComputeInstance_t>>())
    });
    let handles = match r {
        Ok(h) => h,
        Err(e) => return e,
    };
    // SAFETY: `compute_instances` is non-null and, by NVML's contract, holds instanceCount
    // handles, which bounds `handles.len()`.
    unsafe { put_slice(compute_instances, &handles) };
    // SAFETY: `count` is non-null (checked above) and the caller's writable out-pointer.
    unsafe { put(count, Ok(handles.len() as c_uint)) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlComputeInstanceGetInfo_v2(
    compute_instance: nvmlComputeInstance_t,
    info: *mut nvmlComputeInstanceInfo_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let (card, gi, ci) = s.compute_instance(addr(compute_instance), "nvmlComputeInstanceGetInfo_v2")?;
        let c = s.cards[card].gi(gi)?.cis.get(&ci).copied().ok_or(INVALID_ARGUMENT)?;
        Ok(nvmlComputeInstanceInfo_t {
            device: to_ptr(Handle::Device(card)),
            gpuInstance: to_ptr(Handle::Gi { card, gi }),
            id: c.id,
            profileId: c.profile_id,
            placement: nvmlComputeInstancePlacement_t { start: c.start, size: c.slices },
        })
    });
    // SAFETY: `info` is NULL or the caller's writable struct.
    unsafe { put(info, r) }
}

/// Mutating; IN_USE while a scenario process runs on the compute instance.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlComputeInstanceDestroy(compute_instance: nvmlComputeInstance_t) -> nvmlReturn_t {
    let r = with_state(|s| {
        let (card, gi, ci) = s.compute_instance(addr(compute_instance), "nvmlComputeInstanceDestroy")?;
        s.mutate(|s| s.cards[card].destroy_ci(gi, ci))
    });
    r.err().unwrap_or(SUCCESS)
}

/// The compute instance with this id in the GPU instance; NOT_FOUND if there is none.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstanceById(
    gpu_instance: nvmlGpuInstance_t,
    id: c_uint,
    compute_instance: *mut nvmlComputeInstance_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let (card, gi) = s.gpu_instance(addr(gpu_instance), "nvmlGpuInstanceGetComputeInstanceById")?;
        nonnull(compute_instance)?;
        s.cards[card].gi(gi)?.cis.get(&id).ok_or(nvmlReturn_enum_NVML_ERROR_NOT_FOUND)?;
        Ok(to_ptr(Handle::Ci { card, gi, ci: id }))
    });
    // SAFETY: `compute_instance` is NULL or the caller's writable out-pointer.
    unsafe { put(compute_instance, r) }
}
