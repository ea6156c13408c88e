//! dcgm-exporter's names for the neutral accumulator ([`super::series`]); all-smi's are in
//! [`super::allsmi`].
//!
//! [`map`] turns one scrape (or several concatenated) into nodes, cards and MIG instances,
//! plus the pods and HPC jobs the exporter names on each card or instance ([`Holder`]). It is
//! pure: the scrape itself happens elsewhere. Rules, from dcgm-exporter's behaviour as
//! documented in the reference notes:
//!
//! * A card is node + `gpu` index (else `device="nvidiaN"`). `UUID`/`uuid`, `modelName` and
//!   `pci_bus_id` describe it. Series with no usable index (NVSwitch, NVLink and CPU entities,
//!   label-less dummies) are counted in [`MapStats::unknown_gpu`] and skipped.
//! * The node is the `Hostname`/`hostname` label ([`NodeName::Label`], "unknown" without one),
//!   or a fixed name ([`NodeName::Fixed`]) where the exporter's hostname is its pod name or a
//!   container id; targets that share one host are named by their label ([`NodeName::Shared`]).
//! * A series with `GPU_I_ID` belongs to that GPU instance (`GPU_I_PROFILE` names its profile)
//!   and makes the card a MIG card. DCGM says nothing about placement: `start` is left 0 and
//!   `size` is the catalog's memory slices for the profile where the model and profile are
//!   known (else 0); NVML or the catalog must supply the placement.
//! * `DCGM_FI_DEV_GPU_UTIL` is a percentage for the whole card. `DCGM_FI_PROF_GR_ENGINE_ACTIVE`
//!   is a 0–1 ratio: ×100 it is an instance's activity, and a whole card's only where GPU_UTIL
//!   is missing.
//! * `DCGM_FI_DEV_FB_USED`/`_FREE`/`_RESERVED` (MiB) are per instance on MIG; the total is the
//!   sum of used, free and reserved (where sent), else `DCGM_FI_DEV_FB_TOTAL`. A MIG card's
//!   memory used is the sum over its instances; its total is known only from a parent series
//!   (older exporters sent one).
//! * Device-wide fields (temperature, power, power limit, clocks, last XID, ECC) repeat once
//!   per GPU instance with the parent's value: they are taken once per card (the parent series,
//!   else the lowest instance id that has them), never summed. `DCGM_FI_DEV_XID_ERRORS` is the
//!   last XID, 0 meaning none.
//! * The old 1.x names (`dcgm_gpu_temp`, ...) and `--use-old-namespace` labels (`uuid`,
//!   `pod_name`, `pod_namespace`, `container_name`) are accepted.
//! * Holders come from `pod`/`namespace`/`container`, or from `exported_pod`/
//!   `exported_namespace`/`exported_container` when any of those is set (Prometheus renames the
//!   workload's labels, and `pod` is then the exporter's own pod; the three are taken as a
//!   set so the exporter's namespace is never paired with the workload's pod), and `hpc_job`.
//!   Empty values mean none; a holder needs a pod or an HPC job. One [`Holder`] per card,
//!   instance, pod and HPC job.
//! * DCGM blank sentinels are counted in [`MapStats::blank_sentinels`] and ignored: any value
//!   at or above 9.223372036854775e18 (the int64 blanks such as 9223372036854775794), and for
//!   the fields mapped here any value at or above the FP64 blank 140737488355328.0 (counters
//!   that are not mapped, such as PCIe bytes, can legitimately pass that). NaN and ±Inf in a
//!   mapped field are ignored and added to `stats.parse.bad_values`.
//! * A mapped field seen twice for the same card, instance and holder is a duplicate: the
//!   first value is kept and [`MapStats::duplicates`] counts the rest. The same field repeated
//!   for a different pod (a time-shared GPU, where the exporter writes one series per pod) is
//!   not a duplicate; the first value is kept too. Unknown metric names are ignored.
//!
//! * `vgpu` (`--kubernetes-virtual-gpus`, time-slicing or MPS under the device plugin): the
//!   replica a pod's series is about. Distinct `vgpu` values with a pod are the replicas in use
//!   on that card (past 256 the count is unknown). The exporter cannot export processes (the PID
//!   fields are binary), so contexts per card come from NVML only.
//!
//! Output: nodes sorted by name, cards by index, instances by GPU instance id.

use super::series::Field;
pub use super::series::{Holder, MapStats, Mapped, NodeName, map};

/// Values from here up are DCGM int64 blanks (`DCGM_INT64_BLANK` = 0x7ffffffffffffff0 and the
/// codes above it) whatever the field.
pub(super) const INT64_BLANK: f64 = 9.223372036854775e18;
/// `DCGM_FP64_BLANK`; FP64 fields' blank codes are this and above.
pub(super) const FP64_BLANK: f64 = 140_737_488_355_328.0;

/// The field a metric name feeds: current names and the 1.x compatibility names.
pub(super) fn field(name: &str) -> Option<Field> {
    Some(match name {
        "DCGM_FI_DEV_GPU_UTIL" | "dcgm_gpu_utilization" => Field::GpuUtil,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE" | "dcgm_fi_prof_gr_engine_active" => Field::GrActive,
        "DCGM_FI_DEV_FB_USED" | "dcgm_fb_used" => Field::FbUsed,
        "DCGM_FI_DEV_FB_FREE" | "dcgm_fb_free" => Field::FbFree,
        "DCGM_FI_DEV_FB_RESERVED" => Field::FbReserved,
        "DCGM_FI_DEV_FB_TOTAL" => Field::FbTotal,
        "DCGM_FI_DEV_GPU_TEMP" | "dcgm_gpu_temp" => Field::Temp,
        "DCGM_FI_DEV_POWER_USAGE" | "dcgm_power_usage" => Field::Power,
        "DCGM_FI_DEV_POWER_MGMT_LIMIT" => Field::PowerLimit,
        "DCGM_FI_DEV_SM_CLOCK" | "dcgm_sm_clock" => Field::SmClock,
        "DCGM_FI_DEV_MEM_CLOCK" | "dcgm_memory_clock" => Field::MemClock,
        "DCGM_FI_DEV_XID_ERRORS" | "dcgm_xid_errors" => Field::Xid,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" | "dcgm_ecc_dbe_volatile_total" => Field::EccDbe,
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS" => Field::RemappedRows,
        _ => return None,
    })
}

mod generate;
pub use generate::generate;

#[cfg(test)]
#[path = "dcgm_tests.rs"]
mod tests;
