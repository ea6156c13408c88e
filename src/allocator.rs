//! The binary's allocator settings: mimalloc (the global allocator in `main.rs`) told to give
//! freed memory back to the kernel at once. The FFI call here is its only `unsafe`.
//!
//! By default mimalloc keeps freed pages for a second before returning them. A console whose
//! sources free a whole copy of a 32,768-card cluster every step, or six flooding targets each
//! growing a body to its share of the memory budget, then holds far more than it uses:
//! 260 MiB resident under a 64 MiB budget (`tests/hostile.rs`), 273 MiB against 186 MiB at
//! 32,768 cards (docs/benchmarks.md).
#![allow(unsafe_code)]

/// `mi_option_purge_delay` in the `mi_option_t` enum of the mimalloc that `libmimalloc-sys`
/// 0.1.49 builds (v3: `include/mimalloc.h`); the crate names no constant for it. Its default,
/// 1000 (milliseconds), is checked by a test, so a new mimalloc that renumbered the enum fails
/// the test instead of setting another option.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Return freed memory to the kernel without delay. Call first thing in `main`.
pub fn purge_at_once() {
    // SAFETY: `mi_option_set` only stores a value in mimalloc's option table (an atomic
    // write); it takes no pointers, and any option number and value is accepted.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) }
}

/// The purge delay in force, milliseconds.
pub fn purge_delay_ms() -> std::ffi::c_long {
    // SAFETY: `mi_option_get` reads mimalloc's option table (initialising it from the
    // environment the first time); it takes no pointers.
    unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_option_set_is_the_purge_delay() {
        // mimalloc's documented default for `purge_delay`, unless the environment set one.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(super::purge_delay_ms(), 1000, "option {} is not mimalloc's purge delay", super::PURGE_DELAY);
        }
        super::purge_at_once();
        assert_eq!(super::purge_delay_ms(), 0);
    }
}
