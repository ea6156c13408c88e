//! The exported NVML C functions and all pointer handling: the crate's only `unsafe` code (this
//! module and its children). Each export computes its answer on the locked global [`State`] and
//! then writes it through the caller's out-pointers.
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod device;
mod events;
mod gpm;
mod instances;
mod mig;
mod monitor;

use std::ffi::{CStr, c_char, c_uint};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use nvml_wrapper_sys::bindings::{self as b, nvmlDevice_t, nvmlReturn_t};

use crate::scenario::Scenario;
use crate::state::{Handle, INVALID_ARGUMENT, LoadError, NvmlResult, State, UNKNOWN};

const SUCCESS: nvmlReturn_t = b::nvmlReturn_enum_NVML_SUCCESS;
const UNINITIALIZED: nvmlReturn_t = b::nvmlReturn_enum_NVML_ERROR_UNINITIALIZED;
const INSUFFICIENT_SIZE: nvmlReturn_t = b::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;

/// The driver state between nvmlInit and the matching nvmlShutdown.
static STATE: Mutex<Option<State>> = Mutex::new(None);

fn lock() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `f` and turns a panic into NVML_ERROR_UNKNOWN (no unwinding across the C boundary).
fn guarded(f: impl FnOnce() -> nvmlReturn_t) -> nvmlReturn_t {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(UNKNOWN)
}

/// Runs `f` on the initialised state: NVML_ERROR_UNINITIALIZED before init, UNKNOWN on a panic.
fn with_state<T>(f: impl FnOnce(&mut State) -> NvmlResult<T>) -> NvmlResult<T> {
    catch_unwind(AssertUnwindSafe(|| match lock().as_mut() {
        Some(state) => f(state),
        None => Err(UNINITIALIZED),
    }))
    .unwrap_or(Err(UNKNOWN))
}

/// The numeric value of an opaque handle.
fn addr<T>(handle: *mut T) -> usize {
    handle.addr()
}

/// The opaque pointer for a handle; callers never dereference it.
fn to_ptr<T>(handle: Handle) -> *mut T {
    ptr::without_provenance_mut(handle.encode())
}

fn nonnull<T>(p: *const T) -> NvmlResult<()> {
    if p.is_null() { Err(INVALID_ARGUMENT) } else { Ok(()) }
}

/// A NUL-terminated, truncated copy of `s` for a fixed-size C char array.
fn c_array<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0; N];
    for (dst, byte) in out.iter_mut().zip(s.bytes().take(N.saturating_sub(1))) {
        *dst = byte as c_char;
    }
    out
}

/// Writes `r`'s value through `out`; returns `r`'s error, or INVALID_ARGUMENT for a NULL `out`.
///
/// # Safety
/// `out` is NULL or valid for writing one `T`.
unsafe fn put<T>(out: *mut T, r: NvmlResult<T>) -> nvmlReturn_t {
    match r {
        Err(e) => e,
        Ok(_) if out.is_null() => INVALID_ARGUMENT,
        Ok(value) => {
            // SAFETY: `out` is non-null and, by this function's contract, valid for writes.
            unsafe { out.write(value) };
            SUCCESS
        }
    }
}

/// Copies `r`'s string and its NUL into `buf` of `len` bytes (INSUFFICIENT_SIZE if it does not fit).
///
/// # Safety
/// `buf` is NULL or valid for writing `len` bytes.
unsafe fn put_str(buf: *mut c_char, len: c_uint, r: NvmlResult<String>) -> nvmlReturn_t {
    match r {
        Err(e) => e,
        Ok(_) if buf.is_null() => INVALID_ARGUMENT,
        Ok(s) if s.len() >= len as usize => INSUFFICIENT_SIZE,
        Ok(s) => {
            // SAFETY: `buf` holds `len` > s.len() bytes by the contract; source and destination are
            // distinct allocations.
            unsafe {
                ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, s.len());
                buf.add(s.len()).write(0);
            }
            SUCCESS
        }
    }
}

/// Writes `items` to the array at `buf`.
///
/// # Safety
/// `buf` is non-null and valid for writing `items.len()` elements.
unsafe fn put_slice<T: Copy>(buf: *mut T, items: &[T]) {
    for (i, item) in items.iter().enumerate() {
        // SAFETY: i < items.len(), which the caller guarantees fits in `buf`.
        unsafe { buf.add(i).write(*item) };
    }
}

fn init() -> nvmlReturn_t {
    guarded(|| {
        let mut guard = lock();
        if let Some(state) = guard.as_mut() {
            state.refs += 1;
            return SUCCESS;
        }
        match Scenario::from_env().map_err(LoadError::Invalid).and_then(State::load) {
            Ok(state) => {
                *guard = Some(state);
                SUCCESS
            }
            Err(e) => {
                eprintln!("fake-nvml: {e}");
                e.code()
            }
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    init()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    init()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    guarded(|| {
        let mut guard = lock();
        let Some(state) = guard.as_mut() else { return UNINITIALIZED };
        state.refs = state.refs.saturating_sub(1);
        if state.refs == 0 {
            *guard = None;
        }
        SUCCESS
    })
}

fn error_string(r: nvmlReturn_t) -> &'static CStr {
    match r {
        b::nvmlReturn_enum_NVML_SUCCESS => c"Success",
        b::nvmlReturn_enum_NVML_ERROR_UNINITIALIZED => c"Uninitialized",
        b::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT => c"Invalid Argument",
        b::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED => c"Not Supported",
        b::nvmlReturn_enum_NVML_ERROR_NO_PERMISSION => c"Insufficient Permissions",
        b::nvmlReturn_enum_NVML_ERROR_ALREADY_INITIALIZED => c"Already Initialized",
        b::nvmlReturn_enum_NVML_ERROR_NOT_FOUND => c"Not Found",
        b::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE => c"Insufficient Size",
        b::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_POWER => c"Insufficient External Power",
        b::nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED => c"Driver Not Loaded",
        b::nvmlReturn_enum_NVML_ERROR_TIMEOUT => c"Timeout",
        b::nvmlReturn_enum_NVML_ERROR_IRQ_ISSUE => c"Interrupt request issue",
        b::nvmlReturn_enum_NVML_ERROR_LIBRARY_NOT_FOUND => c"NVML Shared Library Not Found",
        b::nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND => c"Function Not Found",
        b::nvmlReturn_enum_NVML_ERROR_CORRUPTED_INFOROM => c"Corrupted infoROM",
        b::nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST => c"GPU is lost",
        b::nvmlReturn_enum_NVML_ERROR_RESET_REQUIRED => c"GPU requires restart",
        b::nvmlReturn_enum_NVML_ERROR_OPERATING_SYSTEM => c"The operating system has blocked the request.",
        b::nvmlReturn_enum_NVML_ERROR_LIB_RM_VERSION_MISMATCH => c"RM has detected an NVML/RM version mismatch.",
        b::nvmlReturn_enum_NVML_ERROR_IN_USE => c"In use by another client",
        b::nvmlReturn_enum_NVML_ERROR_MEMORY => c"Insufficient Memory",
        b::nvmlReturn_enum_NVML_ERROR_NO_DATA => c"No data",
        b::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_RESOURCES => c"Insufficient resources",
        b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH => c"Argument version mismatch",
        b::nvmlReturn_enum_NVML_ERROR_NOT_READY => c"Not Ready",
        b::nvmlReturn_enum_NVML_ERROR_GPU_NOT_FOUND => c"GPU not found",
        b::nvmlReturn_enum_NVML_ERROR_INVALID_STATE => c"Invalid state",
        _ => c"Unknown Error",
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    error_string(result).as_ptr()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(version: *mut c_char, length: c_uint) -> nvmlReturn_t {
    let r = with_state(|s| Ok(s.driver_version.clone()));
    // SAFETY: `version` is the caller's buffer of `length` bytes (or NULL, rejected by put_str).
    unsafe { put_str(version, length, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(version: *mut c_char, length: c_uint) -> nvmlReturn_t {
    let r = with_state(|s| Ok(format!("12.{}", s.driver_version)));
    // SAFETY: `version` is the caller's buffer of `length` bytes (or NULL, rejected by put_str).
    unsafe { put_str(version, length, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(device_count: *mut c_uint) -> nvmlReturn_t {
    let r = with_state(|s| Ok(s.device_count()));
    // SAFETY: `device_count` is NULL or the caller's writable out-pointer.
    unsafe { put(device_count, r) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(index: c_uint, device: *mut nvmlDevice_t) -> nvmlReturn_t {
    let r = with_state(|s| {
        nonnull(device)?;
        s.handle_by_index(index).map(to_ptr)
    });
    // SAFETY: `device` is NULL or the caller's writable out-pointer.
    unsafe { put(device, r) }
}

#[cfg(test)]
mod tests;
