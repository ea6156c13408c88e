//! Exports for MIG on a card: MIG mode, MIG device handles, and GPU instance profiles,
//! placements, capacity, creation and lookup.

use std::ffi::c_uint;
use std::mem::size_of;

use nvml_wrapper_sys::bindings::{
    self as b, nvmlDevice_t, nvmlGpuInstance_t, nvmlGpuInstancePlacement_t, nvmlGpuInstanceProfileInfo_t,
    nvmlGpuInstanceProfileInfo_v2_t, nvmlGpuInstanceProfileInfo_v3_t, nvmlReturn_t,
};

use super::{SUCCESS, addr, c_array, nonnull, put, put_slice, to_ptr, with_state};
use crate::catalog::{Placement, Profile};
use crate::state::{Handle, INVALID_ARGUMENT, NOT_SUPPORTED, NvmlResult};

/// NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2) and (…, 3).
const PROFILE_INFO_V2: c_uint = (size_of::<nvmlGpuInstanceProfileInfo_v2_t>() as c_uint) | (2 << 24);
const PROFILE_INFO_V3: c_uint = (size_of::<nvmlGpuInstanceProfileInfo_v3_t>() as c_uint) | (3 << 24);

fn profile_info(p: &Profile) -> nvmlGpuInstanceProfileInfo_t {
    nvmlGpuInstanceProfileInfo_t {
        id: p.profile_id,
        isP2pSupported: 0,
        sliceCount: p.compute_slices,
        instanceCount: p.max_count,
        multiprocessorCount: p.sm_count.unwrap_or(0),
        copyEngineCount: p.copy_engines.unwrap_or(0),
        decoderCount: p.media.nvdec.unwrap_or(0),
        encoderCount: p.media.nvenc.unwrap_or(0),
        jpegCount: p.media.nvjpg.unwrap_or(0),
        ofaCount: p.media.ofa.unwrap_or(0),
        memorySizeMB: p.memory_mib(),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current_mode: *mut c_uint,
    pending_mode: *mut c_uint,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let card = s.physical(addr(device), "nvmlDeviceGetMigMode")?;
        card.mig_model()?;
        nonnull(current_mode)?;
        nonnull(pending_mode)?;
        Ok((u32::from(card.mig_enabled), u32::from(card.mig_pending)))
    });
    match r {
        // SAFETY: both out-pointers were checked non-null and are the caller's writable c_uints.
        Ok((current, pending)) => unsafe {
            current_mode.write(current);
            pending_mode.write(pending);
            SUCCESS
        },
        Err(e) => e,
    }
}

/// tessera never changes MIG mode: always NVML_ERROR_NO_PERMISSION for a valid card.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceSetMigMode(
    device: nvmlDevice_t,
    _mode: c_uint,
    _activation_status: *mut nvmlReturn_t,
) -> nvmlReturn_t {
    let r = with_state(|s| s.physical(addr(device), "nvmlDeviceSetMigMode")?.mig_model().map(|_| ()));
    r.err().unwrap_or(b::nvmlReturn_enum_NVML_ERROR_NO_PERMISSION)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(device: nvmlDevice_t, count: *mut c_uint) -> nvmlReturn_t {
    let r = with_state(|s| s.physical(addr(device), "nvmlDeviceGetMaxMigDeviceCount")?.max_mig_devices());
    // SAFETY: `count` is NULL or the caller's writable out-pointer.
    unsafe { put(count, r) }
}

/// MIG device `index` among existing compute instances in gi/ci order; a free slot below the
/// maximum: NOT_FOUND.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig_device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let card = s.physical(addr(device), "nvmlDeviceGetMigDeviceHandleByIndex")?;
        card.mig_on()?;
        match card.mig_devices().get(index as usize) {
            Some(&(gi, ci)) => Ok(to_ptr(Handle::Mig { card: card.index, gi, ci })),
            None if index < card.max_mig_devices()? => Err(b::nvmlReturn_enum_NVML_ERROR_NOT_FOUND),
            None => Err(INVALID_ARGUMENT),
        }
    });
    // SAFETY: `mig_device` is NULL or the caller's writable out-pointer.
    unsafe { put(mig_device, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(device: nvmlDevice_t, is_mig_device: *mut c_uint) -> nvmlReturn_t {
    let r = with_state(|s| s.device(addr(device), "nvmlDeviceIsMigDeviceHandle").map(|d| u32::from(d.mig.is_some())));
    // SAFETY: `is_mig_device` is NULL or the caller's writable out-pointer.
    unsafe { put(is_mig_device, r) }
}

/// The parent card of a MIG device; INVALID_ARGUMENT for a card handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig_device: nvmlDevice_t,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let dev = s.device(addr(mig_device), "nvmlDeviceGetDeviceHandleFromMigDeviceHandle")?;
        dev.mig.map(|_| to_ptr(Handle::Device(dev.card))).ok_or(INVALID_ARGUMENT)
    });
    // SAFETY: `device` is NULL or the caller's writable out-pointer.
    unsafe { put(device, r) }
}

/// A MIG device's GPU instance id; NOT_SUPPORTED for a card handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(device: nvmlDevice_t, id: *mut c_uint) -> nvmlReturn_t {
    let r = with_state(|s| s.device(addr(device), "nvmlDeviceGetGpuInstanceId")?.mig.map(|m| m.0).ok_or(NOT_SUPPORTED));
    // SAFETY: `id` is NULL or the caller's writable out-pointer.
    unsafe { put(id, r) }
}

/// A MIG device's compute instance id; NOT_SUPPORTED for a card handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(device: nvmlDevice_t, id: *mut c_uint) -> nvmlReturn_t {
    let r =
        with_state(|s| s.device(addr(device), "nvmlDeviceGetComputeInstanceId")?.mig.map(|m| m.1).ok_or(NOT_SUPPORTED));
    // SAFETY: `id` is NULL or the caller's writable out-pointer.
    unsafe { put(id, r) }
}

/// Profile info by NVML_GPU_INSTANCE_PROFILE_* value (needs MIG on; unknown for the model: NOT_SUPPORTED).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfo(
    device: nvmlDevice_t,
    profile: c_uint,
    info: *mut nvmlGpuInstanceProfileInfo_t,
) -> nvmlReturn_t {
    let name = "nvmlDeviceGetGpuInstanceProfileInfo";
    let r = with_state(|s| s.physical(addr(device), name)?.profile_by_enum(profile).map(profile_info));
    // SAFETY: `info` is NULL or the caller's writable struct.
    unsafe { put(info, r) }
}

/// Versioned profile info: the caller sets `version` to the v2 or v3 struct version.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfoV(
    device: nvmlDevice_t,
    profile: c_uint,
    info: *mut nvmlGpuInstanceProfileInfo_v2_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let p = s.physical(addr(device), "nvmlDeviceGetGpuInstanceProfileInfoV")?.profile_by_enum(profile)?;
        nonnull(info)?;
        // SAFETY: `info` is non-null and points to the caller's struct, whose version it set.
        Ok((p, unsafe { (*info).version }))
    });
    let (p, version) = match r {
        Ok(v) => v,
        Err(e) => return e,
    };
    let i = profile_info(p);
    let name = c_array(&format!("MIG {}", p.name));
    match version {
        PROFILE_INFO_V2 => {
            let v2 = nvmlGpuInstanceProfileInfo_v2_t {
                version,
                id: i.id,
                isP2pSupported: i.isP2pSupported,
                sliceCount: i.sliceCount,
                instanceCount: i.instanceCount,
                multiprocessorCount: i.multiprocessorCount,
                copyEngineCount: i.copyEngineCount,
                decoderCount: i.decoderCount,
                encoderCount: i.encoderCount,
                jpegCount: i.jpegCount,
                ofaCount: i.ofaCount,
                memorySizeMB: i.memorySizeMB,
                name,
            };
            // SAFETY: `info` is non-null (checked above) and the caller's v2 struct.
            unsafe { put(info, Ok(v2)) }
        }
        PROFILE_INFO_V3 => {
            let v3 = nvmlGpuInstanceProfileInfo_v3_t {
                version,
                id: i.id,
                sliceCount: i.sliceCount,
                instanceCount: i.instanceCount,
                multiprocessorCount: i.multiprocessorCount,
                copyEngineCount: i.copyEngineCount,
                decoderCount: i.decoderCount,
                encoderCount: i.encoderCount,
                jpegCount: i.jpegCount,
                ofaCount: i.ofaCount,
                memorySizeMB: i.memorySizeMB,
                name,
                capabilities: 0,
            };
            // SAFETY: the caller's version says `info` points to a v3 struct, which NVML's
            // signature passes as the v2 pointer type.
            unsafe { put(info.cast::<nvmlGpuInstanceProfileInfo_v3_t>(), Ok(v3)) }
        }
        _ => b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    }
}

/// All allowed placements of a profile id (NULL `placements`: only the count).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstancePossiblePlacements_v2(
    device: nvmlDevice_t,
    profile_id: c_uint,
    placements: *mut nvmlGpuInstancePlacement_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let p = s.physical(addr(device), "nvmlDeviceGetGpuInstancePossiblePlacements_v2")?.profile_by_id(profile_id)?;
        nonnull(count)?;
        Ok(p.placements.iter().map(|pl| nvmlGpuInstancePlacement_t { start: pl.start, size: pl.size }).collect())
    });
    let list: Vec<nvmlGpuInstancePlacement_t> = match r {
        Ok(l) => l,
        Err(e) => return e,
    };
    if !placements.is_null() {
        // SAFETY: NVML's contract: a non-NULL array holds every placement of the profile.
        unsafe { put_slice(placements, &list) };
    }
    // SAFETY: `count` is non-null (checked above) and the caller's writable out-pointer.
    unsafe { put(count, Ok(list.len() as c_uint)) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceRemainingCapacity(
    device: nvmlDevice_t,
    profile_id: c_uint,
    count: *mut c_uint,
) -> nvmlReturn_t {
    let name = "nvmlDeviceGetGpuInstanceRemainingCapacity";
    let r = with_state(|s| s.physical(addr(device), name)?.remaining_capacity(profile_id));
    // SAFETY: `count` is NULL or the caller's writable out-pointer.
    unsafe { put(count, r) }
}

/// Creates a GPU instance (mutating) after checking the handle and the out-pointer; `at` None:
/// the lowest free allowed placement.
fn create_gi(
    device: nvmlDevice_t,
    profile_id: u32,
    at: impl FnOnce() -> NvmlResult<Option<Placement>>,
    out: *mut nvmlGpuInstance_t,
    name: &str,
) -> NvmlResult<nvmlGpuInstance_t> {
    with_state(|s| {
        let card = s.physical(addr(device), name)?.index;
        nonnull(out)?;
        let at = at()?;
        s.mutate(|s| s.cards[card].create_gi(profile_id, at)).map(|gi| to_ptr(Handle::Gi { card, gi }))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceCreateGpuInstance(
    device: nvmlDevice_t,
    profile_id: c_uint,
    gpu_instance: *mut nvmlGpuInstance_t,
) -> nvmlReturn_t {
    let r = create_gi(device, profile_id, || Ok(None), gpu_instance, "nvmlDeviceCreateGpuInstance");
    // SAFETY: `gpu_instance` is NULL or the caller's writable out-pointer.
    unsafe { put(gpu_instance, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceCreateGpuInstanceWithPlacement(
    device: nvmlDevice_t,
    profile_id: c_uint,
    placement: *const nvmlGpuInstancePlacement_t,
    gpu_instance: *mut nvmlGpuInstance_t,
) -> nvmlReturn_t {
    let read_placement = || {
        nonnull(placement)?;
        // SAFETY: `placement` is non-null (checked above) and points to the caller's struct.
        let at = unsafe { placement.read() };
        Ok(Some(Placement { start: at.start, size: at.size }))
    };
    let r = create_gi(device, profile_id, read_placement, gpu_instance, "nvmlDeviceCreateGpuInstanceWithPlacement");
    // SAFETY: `gpu_instance` is NULL or the caller's writable out-pointer.
    unsafe { put(gpu_instance, r) }
}

/// The GPU instances of a profile id. `*count` is output only: the array must hold the
/// profile's instanceCount handles, as NVML documents.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstances(
    device: nvmlDevice_t,
    profile_id: c_uint,
    gpu_instances: *mut nvmlGpuInstance_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let card = s.physical(addr(device), "nvmlDeviceGetGpuInstances")?;
        let ids = card.gi_ids(profile_id)?;
        nonnull(gpu_instances)?;
        nonnull(count)?;
        Ok(ids.into_iter().map(|gi| to_ptr(Handle::Gi { card: card.index, gi })).collect::<Vec<nvmlGpuInstance_t>>())
    });
    let handles = match r {
        Ok(h) => h,
        Err(e) => return e,
    };
    // SAFETY: `gpu_instances` is non-null and, by NVML's contract, holds instanceCount handles,
    // which bounds `handles.len()`.
    unsafe { put_slice(gpu_instances, &handles) };
    // SAFETY: `count` is non-null (checked above) and the caller's writable out-pointer.
    unsafe { put(count, Ok(handles.len() as c_uint)) }
}

/// The GPU instance with this id; NOT_FOUND if there is none.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceById(
    device: nvmlDevice_t,
    id: c_uint,
    gpu_instance: *mut nvmlGpuInstance_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let card = s.physical(addr(device), "nvmlDeviceGetGpuInstanceById")?;
        card.mig_on()?;
        card.gi(id).map_err(|_| b::nvmlReturn_enum_NVML_ERROR_NOT_FOUND)?;
        Ok(to_ptr(Handle::Gi { card: card.index, gi: id }))
    });
    // SAFETY: `gpu_instance` is NULL or the caller's writable out-pointer.
    unsafe { put(gpu_instance, r) }
}
