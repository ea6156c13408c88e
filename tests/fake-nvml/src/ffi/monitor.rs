//! Exports that monitoring tools call beyond what tessera reads (nvitop 1.7 through
//! nvidia-ml-py, all-smi through nvml-wrapper): fan, P-state, persistence and display state,
//! encoder and decoder use, graphics processes, per-process utilisation, the CUDA driver
//! version, the versioned temperature query, the power management limit, the driver model,
//! confidential-compute memory and the process detail list. A driver with the last but one
//! and without the last had a different `_v3` process layout: nvitop looks at both to choose,
//! so they come together, as in the 550 drivers the scenarios name. With them a peer runs on its normal path against the fake, so
//! tessera and the peer are measured on the same library.

use std::ffi::{c_int, c_uint, c_ulonglong};
use std::mem::size_of;
use std::time::{SystemTime, UNIX_EPOCH};

use nvml_wrapper_sys::bindings::{
    self as b, nvmlConfComputeMemSizeInfo_t, nvmlDevice_t, nvmlDriverModel_t, nvmlEnableState_t,
    nvmlProcessDetail_v1_t, nvmlProcessDetailList_t, nvmlProcessInfo_t, nvmlProcessUtilizationSample_t, nvmlPstates_t,
    nvmlReturn_t, nvmlTemperature_t,
};

use super::{INSUFFICIENT_SIZE, SUCCESS, addr, nonnull, put, put_slice, with_state};
use crate::state::{INVALID_ARGUMENT, NOT_SUPPORTED};

/// NVML_STRUCT_VERSION(Temperature, 1).
const TEMPERATURE_V1_VERSION: c_uint = (size_of::<nvmlTemperature_t>() as c_uint) | (1 << 24);
/// The CUDA version a 550 driver reports (12.4), as NVML encodes it (1000 × major + 10 × minor).
const CUDA_DRIVER_VERSION: c_int = 12_040;
/// NVML_STRUCT_VERSION(ProcessDetailList, 1).
const PROCESS_DETAIL_LIST_V1_VERSION: c_uint = (size_of::<nvmlProcessDetailList_t>() as c_uint) | (1 << 24);
/// NVML_PROCESS_MODE_COMPUTE, _GRAPHICS, _MPS.
const MODE_COMPUTE: c_uint = 0;
const MODE_GRAPHICS: c_uint = 1;
const MODE_MPS: c_uint = 2;
/// NVML's sampling period for encoder and decoder use, in µs.
const CODEC_PERIOD_US: c_uint = 167_000;

/// Fan speed in percent where the scenario gives one; passively cooled data-centre cards (the
/// default) have no fan, and NVML says NOT_SUPPORTED.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFanSpeed(device: nvmlDevice_t, speed: *mut c_uint) -> nvmlReturn_t {
    let r = with_state(|s| s.physical(addr(device), "nvmlDeviceGetFanSpeed")?.spec.fan_speed_pct.ok_or(NOT_SUPPORTED));
    // SAFETY: `speed` is NULL or the caller's writable out-pointer.
    unsafe { put(speed, r) }
}

/// P0 while the card is busy or holds a process, P8 when idle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPerformanceState(
    device: nvmlDevice_t,
    state: *mut nvmlPstates_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let c = s.physical(addr(device), "nvmlDeviceGetPerformanceState")?;
        let busy = c.spec.utilization_gpu > 0 || !c.processes.is_empty();
        Ok(if busy { b::nvmlPStates_enum_NVML_PSTATE_0 } else { b::nvmlPStates_enum_NVML_PSTATE_8 })
    });
    // SAFETY: `state` is NULL or the caller's writable out-pointer.
    unsafe { put(state, r) }
}

/// Persistence mode: on, as data-centre nodes run it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPersistenceMode(
    device: nvmlDevice_t,
    mode: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        s.physical(addr(device), "nvmlDeviceGetPersistenceMode").map(|_| b::nvmlEnableState_enum_NVML_FEATURE_ENABLED)
    });
    // SAFETY: `mode` is NULL or the caller's writable out-pointer.
    unsafe { put(mode, r) }
}

/// No display is attached to a data-centre card.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDisplayActive(
    device: nvmlDevice_t,
    active: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        s.physical(addr(device), "nvmlDeviceGetDisplayActive").map(|_| b::nvmlEnableState_enum_NVML_FEATURE_DISABLED)
    });
    // SAFETY: `active` is NULL or the caller's writable out-pointer.
    unsafe { put(active, r) }
}

/// # Safety
/// `util` and `period` are NULL or the caller's writable out-pointers.
unsafe fn codec(device: nvmlDevice_t, util: *mut c_uint, period: *mut c_uint, func: &str) -> nvmlReturn_t {
    let r = with_state(|s| s.physical(addr(device), func).map(|_| ()));
    if let Err(e) = r {
        return e;
    }
    if nonnull(period).is_err() || nonnull(util).is_err() {
        return INVALID_ARGUMENT;
    }
    // SAFETY: `period` is non-null and the caller's; `util` as the contract says.
    unsafe {
        period.write(CODEC_PERIOD_US);
        put(util, Ok(0))
    }
}

/// Encoder use: 0 % (the scenarios run compute work only).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEncoderUtilization(
    device: nvmlDevice_t,
    utilization: *mut c_uint,
    sampling_period_us: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: the caller's out-pointers, passed on under the same contract.
    unsafe { codec(device, utilization, sampling_period_us, "nvmlDeviceGetEncoderUtilization") }
}

/// Decoder use: 0 %.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDecoderUtilization(
    device: nvmlDevice_t,
    utilization: *mut c_uint,
    sampling_period_us: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: as above.
    unsafe { codec(device, utilization, sampling_period_us, "nvmlDeviceGetDecoderUtilization") }
}

/// Graphics processes: none (compute work only), with NVML's count protocol.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    _infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    let r = with_state(|s| s.device(addr(device), "nvmlDeviceGetGraphicsRunningProcesses_v3").map(|_| ()));
    if let Err(e) = r {
        return e;
    }
    // SAFETY: `info_count` is NULL or the caller's in/out count.
    unsafe { put(info_count, Ok(0)) }
}

/// Per-process utilisation samples newer than `last_seen` (µs since the epoch): each compute
/// process on the card gets an equal share of the card's use. NOT_FOUND when there is no
/// process or no newer sample, NOT_SUPPORTED with MIG on (as NVML); a NULL array asks for the
/// count (INSUFFICIENT_SIZE).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: nvmlDevice_t,
    utilization: *mut nvmlProcessUtilizationSample_t,
    sample_count: *mut c_uint,
    last_seen: c_ulonglong,
) -> nvmlReturn_t {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as c_ulonglong);
    let r = with_state(|s| {
        let c = s.physical(addr(device), "nvmlDeviceGetProcessUtilization")?;
        nonnull(sample_count)?;
        if c.mig_enabled {
            return Err(NOT_SUPPORTED);
        }
        let n = c.processes.len() as c_uint;
        let share = |v: c_uint| v.checked_div(n).unwrap_or(0);
        Ok(c.processes
            .iter()
            .map(|p| nvmlProcessUtilizationSample_t {
                pid: p.pid,
                timeStamp: now,
                smUtil: share(c.spec.utilization_gpu),
                memUtil: share(c.spec.utilization_memory),
                encUtil: 0,
                decUtil: 0,
            })
            .collect::<Vec<_>>())
    });
    let samples = match r {
        Ok(samples) => samples,
        Err(e) => return e,
    };
    if samples.is_empty() || last_seen >= now {
        return b::nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
    }
    // SAFETY: `sample_count` is non-null (checked above) and the caller's in/out count.
    let capacity = unsafe { sample_count.read() } as usize;
    // SAFETY: as above.
    unsafe { sample_count.write(samples.len() as c_uint) };
    if utilization.is_null() || capacity < samples.len() {
        return INSUFFICIENT_SIZE;
    }
    // SAFETY: `utilization` is non-null and, per `*sample_count`, holds `samples.len()` entries.
    unsafe { put_slice(utilization, &samples) };
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> nvmlReturn_t {
    let r = with_state(|_| Ok(CUDA_DRIVER_VERSION));
    // SAFETY: `version` is NULL or the caller's writable out-pointer.
    unsafe { put(version, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> nvmlReturn_t {
    // SAFETY: as above.
    unsafe { nvmlSystemGetCudaDriverVersion(version) }
}

/// The versioned temperature query (the caller sets `version` and the sensor).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperatureV(
    device: nvmlDevice_t,
    temperature: *mut nvmlTemperature_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let c = s.physical(addr(device), "nvmlDeviceGetTemperatureV")?;
        nonnull(temperature)?;
        // SAFETY: `temperature` is non-null and points to the caller's struct, which it filled in.
        let asked = unsafe { temperature.read() };
        if asked.version != TEMPERATURE_V1_VERSION {
            return Err(b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        if asked.sensorType != b::nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU {
            return Err(INVALID_ARGUMENT);
        }
        Ok(nvmlTemperature_t { temperature: c_int::try_from(c.spec.temperature_c).unwrap_or(c_int::MAX), ..asked })
    });
    // SAFETY: `temperature` is NULL or the caller's writable struct.
    unsafe { put(temperature, r) }
}

/// The power management limit: the scenario's limit (nothing else constrains it here).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerManagementLimit(device: nvmlDevice_t, limit: *mut c_uint) -> nvmlReturn_t {
    let r =
        with_state(|s| s.physical(addr(device), "nvmlDeviceGetPowerManagementLimit").map(|c| c.spec.power_limit_mw));
    // SAFETY: `limit` is NULL or the caller's writable out-pointer.
    unsafe { put(limit, r) }
}

/// The driver model is a Windows notion: NOT_SUPPORTED on Linux, as the real driver.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDriverModel(
    device: nvmlDevice_t,
    _current: *mut nvmlDriverModel_t,
    _pending: *mut nvmlDriverModel_t,
) -> nvmlReturn_t {
    with_state(|s| s.physical(addr(device), "nvmlDeviceGetDriverModel").map(|_| ())).err().unwrap_or(NOT_SUPPORTED)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDriverModel_v2(
    device: nvmlDevice_t,
    current: *mut nvmlDriverModel_t,
    pending: *mut nvmlDriverModel_t,
) -> nvmlReturn_t {
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { nvmlDeviceGetDriverModel(device, current, pending) }
}

/// Confidential computing is off on every fake card: NOT_SUPPORTED.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetConfComputeMemSizeInfo(
    device: nvmlDevice_t,
    _info: *mut nvmlConfComputeMemSizeInfo_t,
) -> nvmlReturn_t {
    with_state(|s| s.physical(addr(device), "nvmlDeviceGetConfComputeMemSizeInfo").map(|_| ()))
        .err()
        .unwrap_or(NOT_SUPPORTED)
}

/// Running processes of one mode (compute, graphics: none, MPS) in the versioned list: the
/// caller sets `version` and `mode`; with no array or too short a one the count comes back
/// with INSUFFICIENT_SIZE (SUCCESS and 0 when there are none), as NVML.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRunningProcessDetailList(
    device: nvmlDevice_t,
    list: *mut nvmlProcessDetailList_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let dev = s.device(addr(device), "nvmlDeviceGetRunningProcessDetailList")?;
        nonnull(list)?;
        // SAFETY: `list` is non-null and points to the caller's struct, which it filled in.
        let asked = unsafe { list.read() };
        if asked.version != PROCESS_DETAIL_LIST_V1_VERSION {
            return Err(b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        let processes = match asked.mode {
            MODE_COMPUTE => s.processes(dev, false),
            MODE_GRAPHICS => Vec::new(),
            MODE_MPS => s.processes(dev, true),
            _ => return Err(INVALID_ARGUMENT),
        };
        let items: Vec<nvmlProcessDetail_v1_t> = processes
            .iter()
            .map(|p| nvmlProcessDetail_v1_t {
                pid: p.pid,
                usedGpuMemory: p.used_mib * 1024 * 1024,
                gpuInstanceId: p.gi,
                computeInstanceId: p.ci,
                usedGpuCcProtectedMemory: 0,
            })
            .collect();
        Ok((asked, items))
    });
    let (asked, items) = match r {
        Ok(v) => v,
        Err(e) => return e,
    };
    let fits = !asked.procArray.is_null() && asked.numProcArrayEntries as usize >= items.len();
    // SAFETY: `list` is non-null (checked above) and the caller's writable struct.
    unsafe { (*list).numProcArrayEntries = items.len() as c_uint };
    if items.is_empty() {
        return SUCCESS;
    }
    if !fits {
        return INSUFFICIENT_SIZE;
    }
    // SAFETY: `procArray` is non-null and, per the count the caller gave, holds `items.len()`
    // entries.
    unsafe { put_slice(asked.procArray, &items) };
    SUCCESS
}
