//! Exports for event sets (create, register, wait, free).

use std::ffi::{c_uint, c_ulonglong};
use std::time::Duration;

use nvml_wrapper_sys::bindings::{
    self as b, nvmlDevice_t, nvmlEventData_t, nvmlEventSet_t, nvmlEventTypeXidCriticalError, nvmlReturn_t,
};

use super::{SUCCESS, addr, nonnull, put, to_ptr, with_state};
use crate::state::{Handle, NO_ID, State};

/// The longest a wait sleeps when nothing is queued, whatever the caller's timeout.
const MAX_WAIT_MS: u32 = 20;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) -> nvmlReturn_t {
    let r = with_state(|s| {
        nonnull(set)?;
        Ok(to_ptr(s.create_event_set()))
    });
    // SAFETY: `set` is NULL or the caller's writable out-pointer.
    unsafe { put(set, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    device: nvmlDevice_t,
    event_types: *mut c_ulonglong,
) -> nvmlReturn_t {
    let r =
        with_state(|s| s.physical(addr(device), "nvmlDeviceGetSupportedEventTypes").map(State::supported_event_types));
    // SAFETY: `event_types` is NULL or the caller's writable out-pointer.
    unsafe { put(event_types, r) }
}

/// Registers event types of a card on a set; types the card does not support: NOT_SUPPORTED.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    event_types: c_ulonglong,
    set: nvmlEventSet_t,
) -> nvmlReturn_t {
    with_state(|s| s.register_events(addr(device), event_types, addr(set))).err().unwrap_or(SUCCESS)
}

/// Delivers the next queued XID for a card registered on the set; with nothing queued, sleeps
/// min(timeout, 20 ms) and returns NVML_ERROR_TIMEOUT.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeoutms: c_uint,
) -> nvmlReturn_t {
    let r = with_state(|s| {
        nonnull(data)?;
        s.take_event(addr(set))
    });
    match r {
        Err(e) => e,
        Ok(Some((card, xid))) => {
            let event = nvmlEventData_t {
                device: to_ptr(Handle::Device(card)),
                eventType: c_ulonglong::from(nvmlEventTypeXidCriticalError),
                eventData: xid,
                gpuInstanceId: NO_ID,
                computeInstanceId: NO_ID,
            };
            // SAFETY: `data` is non-null (checked above) and the caller's writable struct.
            unsafe { put(data, Ok(event)) }
        }
        Ok(None) => {
            // The state lock is released here: other threads are not blocked while this one waits.
            std::thread::sleep(Duration::from_millis(u64::from(timeoutms.min(MAX_WAIT_MS))));
            b::nvmlReturn_enum_NVML_ERROR_TIMEOUT
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetFree(set: nvmlEventSet_t) -> nvmlReturn_t {
    with_state(|s| s.free_event_set(addr(set))).err().unwrap_or(SUCCESS)
}
