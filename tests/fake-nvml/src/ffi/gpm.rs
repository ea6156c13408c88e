//! Exports for GPM (GPU Performance Monitoring): the support query, sample allocation, whole-card
//! and MIG samples, and metrics between two samples.

use std::ffi::c_uint;
use std::time::Instant;

use nvml_wrapper_sys::bindings::{
    self as b, NVML_GPM_METRICS_GET_VERSION, NVML_GPM_SUPPORT_VERSION, nvmlDevice_t, nvmlGpmMetric_t__bindgen_ty_1,
    nvmlGpmMetricsGet_t, nvmlGpmSample_t, nvmlGpmSupport_t, nvmlReturn_t,
};

use super::{SUCCESS, addr, nonnull, put, to_ptr, with_state};
use crate::state::INVALID_ARGUMENT;

const VERSION_MISMATCH: nvmlReturn_t = b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;

/// SUCCESS with isSupportedDevice = the card's scenario `gpm` (the caller sets `version`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(
    device: nvmlDevice_t,
    gpm_support: *mut nvmlGpmSupport_t,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        let supported = s.gpm_support(addr(device))?;
        nonnull(gpm_support)?;
        // SAFETY: `gpm_support` is non-null and points to the caller's struct, whose version it set.
        if unsafe { (*gpm_support).version } != NVML_GPM_SUPPORT_VERSION {
            return Err(VERSION_MISMATCH);
        }
        Ok(nvmlGpmSupport_t { version: NVML_GPM_SUPPORT_VERSION, isSupportedDevice: c_uint::from(supported) })
    });
    // SAFETY: `gpm_support` is NULL or the caller's writable struct.
    unsafe { put(gpm_support, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(gpm_sample: *mut nvmlGpmSample_t) -> nvmlReturn_t {
    let r = with_state(|s| {
        nonnull(gpm_sample)?;
        s.gpm_alloc_sample().map(to_ptr)
    });
    // SAFETY: `gpm_sample` is NULL or the caller's writable out-pointer.
    unsafe { put(gpm_sample, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmSampleFree(gpm_sample: nvmlGpmSample_t) -> nvmlReturn_t {
    with_state(|s| s.gpm_free_sample(addr(gpm_sample))).err().unwrap_or(SUCCESS)
}

/// A whole-card sample: NOT_SUPPORTED unless the card has `gpm`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmSampleGet(device: nvmlDevice_t, gpm_sample: nvmlGpmSample_t) -> nvmlReturn_t {
    with_state(|s| s.gpm_sample(addr(device), addr(gpm_sample), Instant::now())).err().unwrap_or(SUCCESS)
}

/// A GPU instance's sample: NOT_SUPPORTED without `gpm` or with MIG off, INVALID_ARGUMENT for an
/// unknown GPU instance id.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmMigSampleGet(
    device: nvmlDevice_t,
    gpu_instance_id: c_uint,
    gpm_sample: nvmlGpmSample_t,
) -> nvmlReturn_t {
    with_state(|s| s.gpm_mig_sample(addr(device), gpu_instance_id, addr(gpm_sample), Instant::now()))
        .err()
        .unwrap_or(SUCCESS)
}

/// Metrics between `sample1` and `sample2` (see `State::gpm_metrics`). Every requested metric gets
/// its own nvmlReturn, its value and metricInfo names pointing to static NUL-terminated strings,
/// which callers only read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmMetricsGet(metrics_get: *mut nvmlGpmMetricsGet_t) -> nvmlReturn_t {
    let r = with_state(|s| {
        nonnull(metrics_get)?;
        // SAFETY: `metrics_get` is non-null and points to the caller's initialised request struct.
        let request = unsafe { &*metrics_get };
        if request.version != NVML_GPM_METRICS_GET_VERSION {
            return Err(VERSION_MISMATCH);
        }
        let requested = request.metrics.get(..request.numMetrics as usize).ok_or(INVALID_ARGUMENT)?;
        let ids: Vec<c_uint> = requested.iter().map(|m| m.metricId).collect();
        s.gpm_metrics(addr(request.sample1), addr(request.sample2), &ids)
    });
    let values = match r {
        Ok(v) => v,
        Err(e) => return e,
    };
    // SAFETY: `metrics_get` is non-null (checked above) and the caller's writable struct; no other
    // reference to it is live.
    let request = unsafe { &mut *metrics_get };
    for (metric, v) in request.metrics.iter_mut().zip(values) {
        metric.nvmlReturn = v.ret;
        metric.value = v.value;
        metric.metricInfo = nvmlGpmMetric_t__bindgen_ty_1 {
            shortName: v.info.short_name.as_ptr().cast_mut(),
            longName: v.info.long_name.as_ptr().cast_mut(),
            unit: v.info.unit.as_ptr().cast_mut(),
        };
    }
    SUCCESS
}
