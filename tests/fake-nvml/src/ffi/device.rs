//! Exports for per-device queries (identity, PCI, memory, utilisation, sensors, ECC, compute mode,
//! running processes), on card and, where NVML allows, MIG device handles.

use std::ffi::{c_char, c_uint, c_ulonglong};
use std::mem::size_of;

use nvml_wrapper_sys::bindings::{
    self as b, nvmlClockType_t, nvmlComputeMode_t, nvmlDevice_t, nvmlEccCounterType_t, nvmlMemory_t, nvmlMemory_v2_t,
    nvmlMemoryErrorType_t, nvmlPciInfo_t, nvmlProcessInfo_t, nvmlReturn_t, nvmlTemperatureSensors_t, nvmlUtilization_t,
};

use super::{INSUFFICIENT_SIZE, SUCCESS, addr, c_array, nonnull, put, put_slice, put_str, with_state};
use crate::state::{INVALID_ARGUMENT, NOT_SUPPORTED};

/// NVML_STRUCT_VERSION(Memory, 2).
const MEMORY_V2_VERSION: c_uint = (size_of::<nvmlMemory_v2_t>() as c_uint) | (2 << 24);

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetIndex(device: nvmlDevice_t, index: *mut c_uint) -> nvmlReturn_t {
    let r = with_state(|s| s.physical(addr(device), "nvmlDeviceGetIndex").map(|c| c.index as c_uint));
    // SAFETY: `index` is NULL or the caller's writable out-pointer.
    unsafe { put(index, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(device: nvmlDevice_t, name: *mut c_char, length: c_uint) -> nvmlReturn_t {
    let r = with_state(|s| s.device(addr(device), "nvmlDeviceGetName").map(|d| s.name(d)));
    // SAFETY: `name` is NULL or the caller's buffer of `length` bytes.
    unsafe { put_str(name, length, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(device: nvmlDevice_t, uuid: *mut c_char, length: c_uint) -> nvmlReturn_t {
    let r = with_state(|s| s.device(addr(device), "nvmlDeviceGetUUID").map(|d| s.uuid(d)));
    // SAFETY: `uuid` is NULL or the caller's buffer of `length` bytes.
    unsafe { put_str(uuid, length, r) }
}

/// PCI info of the card (a MIG device reports its parent's).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(device: nvmlDevice_t, pci: *mut nvmlPciInfo_t) -> nvmlReturn_t {
    let r = with_state(|s| {
        let p = &s.cards[s.device(addr(device), "nvmlDeviceGetPciInfo_v3")?.card].pci;
        Ok(nvmlPciInfo_t {
            busIdLegacy: c_array(&p.bus_id_legacy),
            domain: p.domain,
            bus: p.bus,
            device: p.device,
            pciDeviceId: p.device_id,
            pciSubSystemId: p.subsystem_id,
            busId: c_array(&p.bus_id),
        })
    });
    // SAFETY: `pci` is NULL or the caller's writable struct.
    unsafe { put(pci, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(device: nvmlDevice_t, memory: *mut nvmlMemory_t) -> nvmlReturn_t {
    let r = with_state(|s| {
        let (total, used) = s.memory(s.device(addr(device), "nvmlDeviceGetMemoryInfo")?);
        Ok(nvmlMemory_t { total, free: total.saturating_sub(used), used })
    });
    // SAFETY: `memory` is NULL or the caller's writable struct.
    unsafe { put(memory, r) }
}

/// Version 2 memory info (the caller sets `version`); nothing is reported as reserved.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let dev = s.device(addr(device), "nvmlDeviceGetMemoryInfo_v2")?;
        nonnull(memory)?;
        // SAFETY: `memory` is non-null and points to the caller's struct, whose version it set.
        if unsafe { (*memory).version } != MEMORY_V2_VERSION {
            return Err(b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        let (total, used) = s.memory(dev);
        Ok(nvmlMemory_v2_t { version: MEMORY_V2_VERSION, total, reserved: 0, free: total.saturating_sub(used), used })
    });
    // SAFETY: `memory` is NULL or the caller's writable struct.
    unsafe { put(memory, r) }
}

/// Utilisation of a whole card; NOT_SUPPORTED for MIG devices and cards with MIG on, as NVML.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: nvmlDevice_t,
    utilization: *mut nvmlUtilization_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let card = s.physical(addr(device), "nvmlDeviceGetUtilizationRates")?;
        if card.mig_enabled {
            return Err(NOT_SUPPORTED);
        }
        Ok(nvmlUtilization_t { gpu: card.spec.utilization_gpu, memory: card.spec.utilization_memory })
    });
    // SAFETY: `utilization` is NULL or the caller's writable struct.
    unsafe { put(utilization, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    sensor: nvmlTemperatureSensors_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let card = s.physical(addr(device), "nvmlDeviceGetTemperature")?;
        if sensor != b::nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU {
            return Err(INVALID_ARGUMENT);
        }
        Ok(card.spec.temperature_c)
    });
    // SAFETY: `temp` is NULL or the caller's writable out-pointer.
    unsafe { put(temp, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(device: nvmlDevice_t, power: *mut c_uint) -> nvmlReturn_t {
    let r = with_state(|s| s.physical(addr(device), "nvmlDeviceGetPowerUsage").map(|c| c.spec.power_mw));
    // SAFETY: `power` is NULL or the caller's writable out-pointer.
    unsafe { put(power, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEnforcedPowerLimit(device: nvmlDevice_t, limit: *mut c_uint) -> nvmlReturn_t {
    let r = with_state(|s| s.physical(addr(device), "nvmlDeviceGetEnforcedPowerLimit").map(|c| c.spec.power_limit_mw));
    // SAFETY: `limit` is NULL or the caller's writable out-pointer.
    unsafe { put(limit, r) }
}

/// Current clocks: graphics, SM and video report the SM clock, MEM the memory clock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: nvmlDevice_t,
    clock_type: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let card = s.physical(addr(device), "nvmlDeviceGetClockInfo")?;
        match clock_type {
            b::nvmlClockType_enum_NVML_CLOCK_GRAPHICS
            | b::nvmlClockType_enum_NVML_CLOCK_SM
            | b::nvmlClockType_enum_NVML_CLOCK_VIDEO => Ok(card.spec.sm_clock_mhz),
            b::nvmlClockType_enum_NVML_CLOCK_MEM => Ok(card.spec.mem_clock_mhz),
            _ => Err(INVALID_ARGUMENT),
        }
    });
    // SAFETY: `clock` is NULL or the caller's writable out-pointer.
    unsafe { put(clock, r) }
}

/// ECC totals: volatile uncorrected from the scenario, every other counter 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error_type: nvmlMemoryErrorType_t,
    counter_type: nvmlEccCounterType_t,
    ecc_counts: *mut c_ulonglong,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let card = s.physical(addr(device), "nvmlDeviceGetTotalEccErrors")?;
        if error_type >= b::nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_COUNT
            || counter_type > b::nvmlEccCounterType_enum_NVML_AGGREGATE_ECC
        {
            return Err(INVALID_ARGUMENT);
        }
        let volatile_uncorrected = error_type == b::nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED
            && counter_type == b::nvmlEccCounterType_enum_NVML_VOLATILE_ECC;
        Ok(if volatile_uncorrected { card.spec.ecc_volatile_uncorrected } else { 0 })
    });
    // SAFETY: `ecc_counts` is NULL or the caller's writable out-pointer.
    unsafe { put(ecc_counts, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeMode(device: nvmlDevice_t, mode: *mut nvmlComputeMode_t) -> nvmlReturn_t {
    let r = with_state(|s| s.physical(addr(device), "nvmlDeviceGetComputeMode").map(|c| c.compute_mode));
    // SAFETY: `mode` is NULL or the caller's writable out-pointer.
    unsafe { put(mode, r) }
}

/// Mutating: counts towards `fail_after_mutations`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceSetComputeMode(device: nvmlDevice_t, mode: nvmlComputeMode_t) -> nvmlReturn_t {
    with_state(|s| s.set_compute_mode(addr(device), mode)).err().unwrap_or(SUCCESS)
}

/// Compute processes: all of a card's (with their GPU/compute instance ids), or one MIG device's.
/// `*info_count` is the array size on input and the process count on output; a NULL or short
/// array gives INSUFFICIENT_SIZE with the count needed (SUCCESS when there are none).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    // SAFETY: the caller's arguments, passed on unchanged under the same contract.
    unsafe { process_list(device, info_count, infos, false, "nvmlDeviceGetComputeRunningProcesses_v3") }
}

/// Processes with an MPS compute context (MPS clients), with the same count protocol.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMPSComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    // SAFETY: as above.
    unsafe { process_list(device, info_count, infos, true, "nvmlDeviceGetMPSComputeRunningProcesses_v3") }
}

/// # Safety
/// `info_count` is NULL or points to the caller's count; `infos` is NULL or holds `*info_count`
/// entries.
unsafe fn process_list(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
    mps: bool,
    name: &str,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let dev = s.device(addr(device), name)?;
        nonnull(info_count)?;
        Ok(s.processes(dev, mps))
    });
    let processes = match r {
        Ok(p) => p,
        Err(e) => return e,
    };
    // SAFETY: `info_count` is non-null (checked above) and the caller's in/out count.
    let capacity = unsafe { info_count.read() } as usize;
    let needed = processes.len();
    // SAFETY: as above.
    unsafe { info_count.write(needed as c_uint) };
    if needed == 0 {
        return SUCCESS;
    }
    if infos.is_null() || capacity < needed {
        return INSUFFICIENT_SIZE;
    }
    let items: Vec<nvmlProcessInfo_t> = processes
        .iter()
        .map(|p| nvmlProcessInfo_t {
            pid: p.pid,
            usedGpuMemory: p.used_mib * 1024 * 1024,
            gpuInstanceId: p.gi,
            computeInstanceId: p.ci,
        })
        .collect();
    // SAFETY: `infos` is non-null and, per `*info_count`, holds at least `needed` entries.
    unsafe { put_slice(infos, &items) };
    SUCCESS
}
