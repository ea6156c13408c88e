//! NVML executor: compute mode for drain/undrain, MIG instance destroy/create with explicit
//! placements, and reading the layout back.

use super::Op;
use crate::model::ComputeMode;

/// Run one NVML step against the library at `lib` (`None`: the system library).
pub fn run_op(op: &Op, lib: Option<&str>) -> Result<(String, Option<ComputeMode>), String> {
    let _ = (op, lib);
    Err("the NVML executor is being built".into())
}
