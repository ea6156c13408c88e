//! A fake NVIDIA Management Library for tessera's tests: a `cdylib` exporting NVML's C functions
//! (real ABI, return codes and struct layouts from `nvml-wrapper-sys`), driven by the JSON
//! scenario named in `FAKE_NVML_SCENARIO`, with MIG rules from data/mig-profiles.json.

pub mod catalog;
mod ffi;
pub mod scenario;
pub mod state;
