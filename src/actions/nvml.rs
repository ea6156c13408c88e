//! Running NVML's operations (its plans are `act::nvml`'s): compute mode changes, MIG instance
//! destroy and create, reading the layout back. One call per step, on a blocking thread; raw
//! calls live in `sources/nvml/ffi.rs`. Errors name the NVML call and its error.

use futures_util::future::BoxFuture;
use nvml_wrapper::enum_wrappers::device::ComputeMode as NvmlMode;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml as Library};

use super::{Env, Op, Ran, Runs};
use crate::act::nvml::{Nvml, mode_name};
use crate::model::ComputeMode;
use crate::model::mig::{GpuModel, lookup};
use crate::sources::nvml::ffi::{self, Failed};
use crate::sources::nvml::{OpenError, open, profile_name};

/// An NVML call that failed: the call, its arguments as the plan shows them, NVML's error.
#[derive(Debug, thiserror::Error)]
#[error("{call}({args}): {}", describe(error))]
pub struct CallFailed {
    pub call: &'static str,
    pub args: String,
    #[source]
    pub error: NvmlError,
}

impl CallFailed {
    fn new(call: &'static str, args: impl Into<String>, error: NvmlError) -> Self {
        Self { call, args: args.into(), error }
    }

    /// A failure of `sources::nvml::ffi`'s, with the arguments.
    fn of(f: Failed, args: impl Into<String>) -> Self {
        Self::new(f.call, args, f.error)
    }
}

/// Why an NVML step failed; each names the call, the card and what NVML said.
#[derive(Debug, thiserror::Error)]
pub enum NvmlStepError {
    /// Not one of NVML's operations.
    #[error("not an NVML step: {0:?}")]
    NotNvml(Box<Op>),
    #[error("NVML: {0}")]
    Open(#[source] OpenError),
    /// The blocking thread the step ran on ended before the step did.
    #[error("NVML step stopped: {0}")]
    Stopped(#[source] tokio::task::JoinError),
    #[error(transparent)]
    Call(#[from] CallFailed),
    /// The card is not in MIG mode (`mode`: what NVML says it is).
    #[error("GPU {index} is not in MIG mode (nvmlDeviceGetMigMode says {mode})")]
    NotMig { index: u32, mode: u32 },
    #[error("GPU {index} is in compute mode EXCLUSIVE_THREAD, which tessera cannot restore later: not changing it")]
    ExclusiveThread { index: u32 },
    /// The mode set reads back as another.
    #[error(
        "nvmlDeviceSetComputeMode(GPU {index}) succeeded but the mode reads back as {after:?}, not {}",
        mode_name(*want)
    )]
    ModeNotSet { index: u32, after: NvmlMode, want: ComputeMode },
    /// The card's name (`name`) is not a model of the MIG catalog.
    #[error("GPU {index} ({name}) is not in the MIG catalog")]
    NotInCatalog { index: u32, name: String },
    #[error("{model} has no MIG profile {profile}")]
    NoProfile { model: String, profile: String },
    /// The driver's profile has another size than the catalog's.
    #[error(
        "GPU {index}: NVML profile {nvml_profile} has {driver_slices} compute slices, but {profile} has \
         {catalog_slices}: the catalog does not match this driver"
    )]
    CatalogMismatch { index: u32, nvml_profile: u32, driver_slices: u32, profile: String, catalog_slices: u8 },
    /// The profile cannot be placed at `start`; `allowed` are where it can.
    #[error(
        "{profile} cannot start at slice {start} on GPU {index} (allowed starts: {})",
        allowed.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    BadStart { profile: String, start: u8, index: u32, allowed: Vec<u32> },
    /// The GPU instance was made but the call that reads its id failed.
    #[error("a GPU instance {profile}@{start} was created but its id cannot be read: {failed}")]
    IdUnreadable { profile: String, start: u8, failed: CallFailed },
    /// The compute instance failed and the new GPU instance was destroyed again.
    #[error("created GPU instance {gi} ({profile}@{start}) but {failed}; destroyed GPU instance {gi} again")]
    Undone { gi: u32, profile: String, start: u8, failed: CallFailed },
    /// The compute instance failed and so did destroying the GPU instance again: it remains.
    #[error(
        "created GPU instance {gi} ({profile}@{start}) but {failed}; destroying it again failed too ({undo}): \
         GPU instance {gi} remains, without a compute instance"
    )]
    Left { gi: u32, profile: String, start: u8, failed: CallFailed, undo: Box<CallFailed> },
    #[error("listing GPU instances of GPU {index}: {}", describe(error))]
    List {
        index: u32,
        #[source]
        error: NvmlError,
    },
    /// The layout read back (`shown`) is not the plan's; `problems` say how.
    #[error("layout read back: {shown} does not match the plan: {}", problems.join("; "))]
    Mismatch { shown: String, problems: Vec<String> },
}

impl Runs for Nvml {
    /// On a blocking thread: NVML's calls block.
    fn run<'a>(&'a self, op: &'a Op, env: &'a Env) -> BoxFuture<'a, Ran> {
        let (op, lib) = (op.clone(), env.nvml_lib.clone());
        // The call cannot be stopped once made: it holds the action's lock until it returns,
        // even if tessera leaves meanwhile.
        let hold = env.hold.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let _held = hold;
                run_op(&op, lib.as_deref())
            })
            .await
            .map_err(NvmlStepError::Stopped)?
            .map_err(Into::into)
        })
    }
}

/// What a step says it did: its message and, for a compute mode change, the mode before.
pub type Done = Result<(String, Option<ComputeMode>), NvmlStepError>;

/// Run one NVML step against the library at `lib` (`None`: the system library).
pub fn run_op(op: &Op, lib: Option<&str>) -> Done {
    if !is_nvml(op) {
        return Err(NvmlStepError::NotNvml(Box::new(op.clone())));
    }
    let nvml = open(lib).map_err(NvmlStepError::Open)?;
    let plain = |r: Result<String, NvmlStepError>| r.map(|m| (m, None));
    match op {
        Op::NvmlSetComputeMode { index, mode } => set_compute_mode(&nvml, *index, *mode),
        Op::NvmlDestroyComputeInstance { index, gi, ci } => plain(with_mig(&nvml, *index, |dev| {
            ffi::destroy_compute_instance(&nvml, dev, *gi, *ci)
                .map_err(|f| CallFailed::of(f, format!("GPU {index} GI {gi} CI {ci}")))?;
            Ok(format!("destroyed compute instance {ci} of GPU instance {gi}"))
        })),
        Op::NvmlDestroyGpuInstance { index, gi } => plain(with_mig(&nvml, *index, |dev| {
            ffi::destroy_gpu_instance(&nvml, dev, *gi)
                .map_err(|f| CallFailed::of(f, format!("GPU {index} GI {gi}")))?;
            Ok(format!("destroyed GPU instance {gi}"))
        })),
        Op::NvmlCreateGpuInstance { index, profile, start } => {
            plain(with_mig(&nvml, *index, |dev| create(&nvml, dev, *index, profile, *start)))
        }
        Op::NvmlVerifyLayout { index, layout } => plain(verify(&nvml, *index, layout)),
        other => Err(NvmlStepError::NotNvml(Box::new(other.clone()))),
    }
}

fn is_nvml(op: &Op) -> bool {
    matches!(
        op,
        Op::NvmlSetComputeMode { .. }
            | Op::NvmlDestroyComputeInstance { .. }
            | Op::NvmlDestroyGpuInstance { .. }
            | Op::NvmlCreateGpuInstance { .. }
            | Op::NvmlVerifyLayout { .. }
    )
}

/// NVML's error in words, also for the codes nvml-wrapper does not name.
fn describe(e: &NvmlError) -> String {
    use nvml_wrapper_sys::bindings as b;
    let NvmlError::UnexpectedVariant(code) = e else { return e.to_string() };
    let name = match *code {
        b::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_RESOURCES => {
            "insufficient resources (NVML_ERROR_INSUFFICIENT_RESOURCES)"
        }
        b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH => {
            "argument version mismatch (NVML_ERROR_ARGUMENT_VERSION_MISMATCH)"
        }
        b::nvmlReturn_enum_NVML_ERROR_NOT_READY => "not ready (NVML_ERROR_NOT_READY)",
        b::nvmlReturn_enum_NVML_ERROR_GPU_NOT_FOUND => "GPU not found (NVML_ERROR_GPU_NOT_FOUND)",
        b::nvmlReturn_enum_NVML_ERROR_INVALID_STATE => "invalid state (NVML_ERROR_INVALID_STATE)",
        _ => return format!("NVML error {code}"),
    };
    name.to_string()
}

fn device(nvml: &Library, index: u32) -> Result<Device<'_>, CallFailed> {
    nvml.device_by_index(index).map_err(|e| CallFailed::new("nvmlDeviceGetHandleByIndex", format!("GPU {index}"), e))
}

/// Run `f` on card `index` once it is known to be in MIG mode.
fn with_mig(
    nvml: &Library,
    index: u32,
    f: impl FnOnce(&Device<'_>) -> Result<String, NvmlStepError>,
) -> Result<String, NvmlStepError> {
    let dev = device(nvml, index)?;
    let mode = dev.mig_mode().map_err(|e| CallFailed::new("nvmlDeviceGetMigMode", format!("GPU {index}"), e))?;
    if mode.current != 1 {
        return Err(NvmlStepError::NotMig { index, mode: mode.current });
    }
    f(&dev)
}

fn to_nvml(m: ComputeMode) -> NvmlMode {
    match m {
        ComputeMode::Default => NvmlMode::Default,
        ComputeMode::ExclusiveProcess => NvmlMode::ExclusiveProcess,
        ComputeMode::Prohibited => NvmlMode::Prohibited,
    }
}

/// The mode as tessera models it; EXCLUSIVE_THREAD (removed from drivers long ago) is `None`.
fn from_nvml(m: NvmlMode) -> Option<ComputeMode> {
    match m {
        NvmlMode::Default => Some(ComputeMode::Default),
        NvmlMode::ExclusiveProcess => Some(ComputeMode::ExclusiveProcess),
        NvmlMode::Prohibited => Some(ComputeMode::Prohibited),
        NvmlMode::ExclusiveThread => None,
    }
}

/// Read the mode, set the new one, read it back. Returns the mode before, for undrain.
fn set_compute_mode(nvml: &Library, index: u32, mode: ComputeMode) -> Done {
    let mut dev = device(nvml, index)?;
    let read = |dev: &Device<'_>| {
        dev.compute_mode().map_err(|e| CallFailed::new("nvmlDeviceGetComputeMode", format!("GPU {index}"), e))
    };
    let before = read(&dev)?;
    let previous = from_nvml(before).ok_or(NvmlStepError::ExclusiveThread { index })?;
    dev.set_compute_mode(to_nvml(mode)).map_err(|e| {
        CallFailed::new("nvmlDeviceSetComputeMode", format!("GPU {index}, NVML_COMPUTEMODE_{}", mode_name(mode)), e)
    })?;
    let after = read(&dev)?;
    if from_nvml(after) != Some(mode) {
        return Err(NvmlStepError::ModeNotSet { index, after, want: mode });
    }
    Ok((format!("compute mode {} -> {}", mode_name(previous), mode_name(mode)), Some(previous)))
}

/// The card's catalog model, from the name NVML reports.
fn model_of(dev: &Device<'_>, index: u32) -> Result<&'static GpuModel, NvmlStepError> {
    let name = dev.name().map_err(|e| CallFailed::new("nvmlDeviceGetName", format!("GPU {index}"), e))?;
    lookup(&name).ok_or(NvmlStepError::NotInCatalog { index, name })
}

/// Create GPU instance `profile` at `start`, then one full-size compute instance in it. If the
/// compute instance fails, the new GPU instance is destroyed again (and the message says
/// whether that worked), so a failed step leaves no instance that cannot run work.
fn create(nvml: &Library, dev: &Device<'_>, index: u32, profile: &str, start: u8) -> Result<String, NvmlStepError> {
    let model = model_of(dev, index)?;
    let p = model
        .profile(profile)
        .ok_or_else(|| NvmlStepError::NoProfile { model: model.name.clone(), profile: profile.to_string() })?;
    // The catalog's NVML enum names the profile on the device (as the source does when listing);
    // the device gives its own profile id, and its slice count must agree with the name.
    let info = dev.profile_info(p.nvml_enum_value).map_err(|e| {
        let args = format!("GPU {index}, profile {} = {profile}", p.nvml_enum_value);
        CallFailed::new("nvmlDeviceGetGpuInstanceProfileInfo", args, e)
    })?;
    if info.slice_count != u32::from(p.compute_slices) {
        return Err(NvmlStepError::CatalogMismatch {
            index,
            nvml_profile: p.nvml_enum_value,
            driver_slices: info.slice_count,
            profile: profile.to_string(),
            catalog_slices: p.compute_slices,
        });
    }
    let args = format!("GPU {index}, profile id {}", info.id);
    let placements = ffi::possible_placements(nvml, dev, info.id).map_err(|f| CallFailed::of(f, args.clone()))?;
    let Some(&(at, size)) = placements.iter().find(|(s, _)| *s == u32::from(start)) else {
        let allowed = placements.iter().map(|(s, _)| *s).collect();
        return Err(NvmlStepError::BadStart { profile: profile.to_string(), start, index, allowed });
    };
    let where_ = format!("{args}, start {at}, size {size}");
    let gi = ffi::create_gpu_instance(nvml, dev, info.id, at, size).map_err(|f| match f.call {
        "nvmlDeviceCreateGpuInstanceWithPlacement" => CallFailed::of(f, where_).into(),
        _ => NvmlStepError::IdUnreadable { profile: profile.to_string(), start, failed: CallFailed::of(f, args) },
    })?;
    match ffi::create_full_compute_instance(nvml, dev, gi) {
        Ok((ci, slices)) => Ok(format!(
            "created GPU instance {gi} ({profile}@{start}, slices {at}-{}) with compute instance {} ({slices} compute \
             slices)",
            at + size.saturating_sub(1),
            ci.map_or_else(|| "(id unreadable)".to_string(), |c| c.to_string())
        )),
        Err(f) => {
            let failed = CallFailed::of(f, format!("GPU {index} GI {gi}"));
            let profile = profile.to_string();
            Err(match ffi::destroy_gpu_instance(nvml, dev, gi) {
                Ok(()) => NvmlStepError::Undone { gi, profile, start, failed },
                Err(g) => {
                    let undo = Box::new(CallFailed::of(g, format!("GPU {index} GI {gi}")));
                    NvmlStepError::Left { gi, profile, start, failed, undo }
                }
            })
        }
    }
}

/// Read the card's GPU instances back and compare (profile, start) with the plan's.
fn verify(nvml: &Library, index: u32, want: &[(String, u8)]) -> Result<String, NvmlStepError> {
    let dev = device(nvml, index)?;
    let model = model_of(&dev, index).ok();
    let listed = ffi::gpu_instances(nvml, &dev).map_err(|error| NvmlStepError::List { index, error })?;
    let got: Vec<(String, u8)> =
        listed.iter().map(|g| (profile_name(model, g), u8::try_from(g.start).unwrap_or(u8::MAX))).collect();
    let bare: Vec<String> =
        listed.iter().filter(|g| g.compute_instances.is_empty()).map(|g| format!("GPU instance {}", g.id)).collect();
    let shown = if got.is_empty() { "no GPU instances".to_string() } else { layout_text(&got) };
    let mut problems = Vec::new();
    if let Err(diff) = compare(want, &got) {
        problems.push(diff);
    }
    if !bare.is_empty() {
        problems.push(format!("{} without a compute instance", bare.join(", ")));
    }
    if problems.is_empty() {
        Ok(format!("layout read back: {shown} matches the plan"))
    } else {
        Err(NvmlStepError::Mismatch { shown, problems })
    }
}

fn layout_text(l: &[(String, u8)]) -> String {
    let mut v: Vec<&(String, u8)> = l.iter().collect();
    v.sort_by_key(|(p, s)| (*s, p.clone()));
    v.iter().map(|(p, s)| format!("{p}@{s}")).collect::<Vec<_>>().join(",")
}

/// Compare two layouts as multisets of (profile, start): `Err` names what is missing and
/// what is there unplanned.
fn compare(want: &[(String, u8)], got: &[(String, u8)]) -> Result<(), String> {
    let mut extra: Vec<(String, u8)> = got.to_vec();
    let mut missing = Vec::new();
    for w in want {
        match extra.iter().position(|g| g == w) {
            Some(i) => {
                extra.remove(i);
            }
            None => missing.push(w.clone()),
        }
    }
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("missing {}", layout_text(&missing)));
    }
    if !extra.is_empty() {
        parts.push(format!("not planned {}", layout_text(&extra)));
    }
    if parts.is_empty() { Ok(()) } else { Err(parts.join("; ")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(items: &[(&str, u8)]) -> Vec<(String, u8)> {
        items.iter().map(|(p, s)| ((*p).to_string(), *s)).collect()
    }

    #[test]
    fn layouts_compare_as_multisets() {
        let want = l(&[("3g.40gb", 4), ("4g.40gb", 0)]);
        assert_eq!(compare(&want, &l(&[("4g.40gb", 0), ("3g.40gb", 4)])), Ok(()));
        assert_eq!(compare(&[], &[]), Ok(()));
        assert_eq!(
            compare(&want, &l(&[("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)])),
            Err("missing 3g.40gb@4; not planned 2g.20gb@4,1g.10gb@6".into())
        );
        // Same profiles, another start: both named.
        assert_eq!(
            compare(&l(&[("1g.10gb", 6)]), &l(&[("1g.10gb", 5)])),
            Err("missing 1g.10gb@6; not planned 1g.10gb@5".into())
        );
        // Multiplicity counts.
        assert_eq!(
            compare(&l(&[("1g.10gb", 0), ("1g.10gb", 0)]), &l(&[("1g.10gb", 0)])),
            Err("missing 1g.10gb@0".into())
        );
    }

    #[test]
    fn errors_nvml_wrapper_does_not_name_are_named() {
        assert_eq!(
            describe(&NvmlError::UnexpectedVariant(23)),
            "insufficient resources (NVML_ERROR_INSUFFICIENT_RESOURCES)"
        );
        assert_eq!(describe(&NvmlError::UnexpectedVariant(999)), "NVML error 999");
        assert_eq!(describe(&NvmlError::Unknown), "an internal driver error occurred");
        assert_eq!(describe(&NvmlError::InUse), "operation cannot be performed because the GPU is currently in use");
    }

    #[test]
    fn modes_map_both_ways() {
        for m in [ComputeMode::Default, ComputeMode::ExclusiveProcess, ComputeMode::Prohibited] {
            assert_eq!(from_nvml(to_nvml(m)), Some(m));
        }
        assert_eq!(from_nvml(NvmlMode::ExclusiveThread), None);
        assert_eq!(mode_name(ComputeMode::Prohibited), "PROHIBITED");
    }

    #[test]
    fn a_missing_library_is_an_error_naming_it() {
        let op = Op::NvmlSetComputeMode { index: 0, mode: ComputeMode::Prohibited };
        let r = run_op(&op, Some("/nonexistent/libnvidia-ml.so.1"));
        assert_eq!(r.map_err(|e| e.to_string()), Err("NVML: cannot load /nonexistent/libnvidia-ml.so.1".into()));
        let wait = Op::Wait { seconds: 0, why: "x".into() };
        let r = run_op(&wait, Some("/nonexistent/libnvidia-ml.so.1"));
        assert!(r.is_err_and(|e| e.to_string().starts_with("not an NVML step: Wait")));
    }
}
