//! Tests of the exported functions called as C would call them: pointer helpers, then one
//! sequential walk through init, queries, MIG, GPM, events and shutdown (one test, as the state is global).

use std::ffi::{CStr, c_char, c_uint};
use std::mem::{size_of, zeroed};
use std::ptr::{null, null_mut};

use nvml_wrapper_sys::bindings::{
    self as b, nvmlDevice_t, nvmlEventData_t, nvmlEventSet_t, nvmlGpmMetricsGet_t, nvmlGpmSample_t, nvmlGpmSupport_t,
    nvmlGpuInstance_t, nvmlGpuInstanceInfo_t, nvmlGpuInstancePlacement_t, nvmlGpuInstanceProfileInfo_t,
    nvmlGpuInstanceProfileInfo_v2_t, nvmlMemory_v2_t, nvmlPciInfo_t, nvmlProcessInfo_t,
};

use super::device::*;
use super::events::*;
use super::gpm::*;
use super::instances::*;
use super::mig::*;
use super::monitor::*;
use super::*;

#[test]
fn c_array_truncates_and_terminates() {
    let a: [c_char; 4] = c_array("abcdef");
    assert_eq!(a, [b'a' as c_char, b'b' as c_char, b'c' as c_char, 0]);
}

#[test]
fn put_str_reports_small_buffers() {
    let mut buf = [1 as c_char; 4];
    // SAFETY: `buf` is a live 4-byte buffer.
    assert_eq!(unsafe { put_str(buf.as_mut_ptr(), 4, Ok("abcd".to_owned())) }, INSUFFICIENT_SIZE);
    // SAFETY: as above.
    assert_eq!(unsafe { put_str(buf.as_mut_ptr(), 4, Ok("abc".to_owned())) }, SUCCESS);
    assert_eq!(buf[3], 0);
}

#[test]
fn handles_round_trip_through_pointers() {
    let h = Handle::Mig { card: 3, gi: 2, ci: 1 };
    assert_eq!(Handle::decode(addr(to_ptr::<u8>(h))), Some(h));
}

fn text(buf: &[c_char]) -> String {
    // SAFETY: the fake wrote a NUL-terminated string into `buf`.
    unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

const SCENARIO: &str = r#"{
  "cards": [{
    "name": "NVIDIA A100-SXM4-80GB", "mig_model": "A100-80GB", "mig_enabled": true, "gpm": true,
    "uuid": "GPU-5a9e0f36-2d1b-4c8e-9f1a-0123456789ab", "pci_bus_id": "00000000:07:00.0",
    "instances": [
      {"profile": "3g.40gb", "start": 0, "memory_used_mib": 2000, "gpm_util": 63.5},
      {"profile": "2g.20gb", "start": 4}
    ],
    "processes": [{"pid": 4242, "used_mib": 3, "gpu_instance_id": 1, "compute_instance_id": 0}]
  }],
  "events": [{"card": 0, "xid": 79}]
}"#;

#[test]
#[allow(clippy::too_many_lines)]
fn the_c_api_end_to_end() {
    let path = std::env::temp_dir().join(format!("fake-nvml-test-{}.json", std::process::id()));
    let written = std::fs::write(&path, SCENARIO);
    assert!(written.is_ok(), "{written:?}");
    // SAFETY: no other test of this binary reads the environment.
    unsafe { std::env::set_var(crate::scenario::SCENARIO_ENV, "/nonexistent/fake-nvml.json") };
    // SAFETY: every call below passes pointers to live locals of the right types and sizes.
    unsafe {
        let mut count: c_uint = 0;
        assert_eq!(nvmlDeviceGetCount_v2(&mut count), UNINITIALIZED);
        assert_eq!(nvmlInit_v2(), b::nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED);
        std::env::set_var(crate::scenario::SCENARIO_ENV, &path);
        assert_eq!(nvmlInit_v2(), SUCCESS);
        assert_eq!(nvmlInitWithFlags(0), SUCCESS);

        let mut buf = [0 as c_char; 96];
        assert_eq!(nvmlSystemGetDriverVersion(buf.as_mut_ptr(), 80), SUCCESS);
        assert_eq!(text(&buf), "550.54.15");
        assert_eq!(nvmlSystemGetDriverVersion(buf.as_mut_ptr(), 4), INSUFFICIENT_SIZE);
        assert_eq!(nvmlDeviceGetCount_v2(&mut count), SUCCESS);
        assert_eq!(count, 1);
        let mut dev: nvmlDevice_t = null_mut();
        assert_eq!(nvmlDeviceGetHandleByIndex_v2(1, &mut dev), INVALID_ARGUMENT);
        assert_eq!(nvmlDeviceGetHandleByIndex_v2(0, null_mut()), INVALID_ARGUMENT);
        assert_eq!(nvmlDeviceGetHandleByIndex_v2(0, &mut dev), SUCCESS);
        assert_eq!(nvmlDeviceGetName(dev, buf.as_mut_ptr(), 96), SUCCESS);
        assert_eq!(text(&buf), "NVIDIA A100-SXM4-80GB");
        let mut pci: nvmlPciInfo_t = zeroed();
        assert_eq!(nvmlDeviceGetPciInfo_v3(dev, &mut pci), SUCCESS);
        assert_eq!((text(&pci.busId), text(&pci.busIdLegacy)), ("00000000:07:00.0".into(), "0000:07:00.0".into()));
        assert_eq!(pci.pciDeviceId, 0x20B2_10DE);

        let mut mem: nvmlMemory_v2_t = zeroed();
        assert_eq!(nvmlDeviceGetMemoryInfo_v2(dev, &mut mem), b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        mem.version = (size_of::<nvmlMemory_v2_t>() as u32) | (2 << 24);
        assert_eq!(nvmlDeviceGetMemoryInfo_v2(dev, &mut mem), SUCCESS);
        assert_eq!(mem.total, 81920 << 20);
        let mut util = zeroed();
        assert_eq!(nvmlDeviceGetUtilizationRates(dev, &mut util), b::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED);

        // Process count query, then the list, as nvml-wrapper does it.
        let mut n: c_uint = 0;
        assert_eq!(nvmlDeviceGetComputeRunningProcesses_v3(dev, &mut n, null_mut()), INSUFFICIENT_SIZE);
        assert_eq!(n, 1);
        let mut procs: [nvmlProcessInfo_t; 6] = zeroed();
        n = 6;
        assert_eq!(nvmlDeviceGetComputeRunningProcesses_v3(dev, &mut n, procs.as_mut_ptr()), SUCCESS);
        assert_eq!((n, procs[0].pid, procs[0].usedGpuMemory, procs[0].gpuInstanceId), (1, 4242, 3 << 20, 1));

        // What monitors call beyond tessera (nvitop's list): the versioned list, the same protocol.
        let mut list: b::nvmlProcessDetailList_t = zeroed();
        assert_eq!(
            nvmlDeviceGetRunningProcessDetailList(dev, &mut list),
            b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        );
        list.version = (size_of::<b::nvmlProcessDetailList_t>() as u32) | (1 << 24);
        assert_eq!(nvmlDeviceGetRunningProcessDetailList(dev, &mut list), INSUFFICIENT_SIZE);
        assert_eq!(list.numProcArrayEntries, 1);
        let mut details: [b::nvmlProcessDetail_v1_t; 1] = zeroed();
        list.procArray = details.as_mut_ptr();
        assert_eq!(nvmlDeviceGetRunningProcessDetailList(dev, &mut list), SUCCESS);
        assert_eq!((details[0].pid, details[0].usedGpuMemory), (4242, 3 << 20));
        list.mode = 1;
        assert_eq!(nvmlDeviceGetRunningProcessDetailList(dev, &mut list), SUCCESS);
        assert_eq!(list.numProcArrayEntries, 0, "no graphics processes");
        let mut temp: b::nvmlTemperature_t = zeroed();
        assert_eq!(nvmlDeviceGetTemperatureV(dev, &mut temp), b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        temp.version = (size_of::<b::nvmlTemperature_t>() as u32) | (1 << 24);
        assert_eq!(nvmlDeviceGetTemperatureV(dev, &mut temp), SUCCESS);
        let mut t: c_uint = 0;
        assert_eq!(nvmlDeviceGetTemperature(dev, b::nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU, &mut t), SUCCESS);
        assert_eq!(temp.temperature as c_uint, t);
        let mut fan: c_uint = 0;
        assert_eq!(nvmlDeviceGetFanSpeed(dev, &mut fan), b::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED, "no fan");
        let mut pstate = 99;
        assert_eq!(nvmlDeviceGetPerformanceState(dev, &mut pstate), SUCCESS);
        assert_eq!(pstate, b::nvmlPStates_enum_NVML_PSTATE_0, "a process runs");
        let mut cuda = 0;
        assert_eq!(nvmlSystemGetCudaDriverVersion(&mut cuda), SUCCESS);
        assert_eq!(cuda, 12_040);
        let (mut enc, mut period) = (9, 0);
        assert_eq!(nvmlDeviceGetEncoderUtilization(dev, &mut enc, &mut period), SUCCESS);
        assert_eq!((enc, period), (0, 167_000));
        let mut samples_n: c_uint = 0;
        assert_eq!(
            nvmlDeviceGetProcessUtilization(dev, null_mut(), &mut samples_n, 0),
            b::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED,
            "not on a MIG card"
        );
        assert_eq!(
            nvmlDeviceGetDriverModel_v2(dev, null_mut(), null_mut()),
            b::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED
        );

        // MIG devices.
        let (mut current, mut pending, mut max) = (0, 0, 0);
        assert_eq!(nvmlDeviceGetMigMode(dev, &mut current, &mut pending), SUCCESS);
        assert_eq!((current, pending), (1, 1));
        assert_eq!(nvmlDeviceGetMaxMigDeviceCount(dev, &mut max), SUCCESS);
        assert_eq!(max, 7);
        let mut mig: nvmlDevice_t = null_mut();
        assert_eq!(nvmlDeviceGetMigDeviceHandleByIndex(dev, 2, &mut mig), b::nvmlReturn_enum_NVML_ERROR_NOT_FOUND);
        assert_eq!(nvmlDeviceGetMigDeviceHandleByIndex(dev, 7, &mut mig), INVALID_ARGUMENT);
        assert_eq!(nvmlDeviceGetMigDeviceHandleByIndex(dev, 0, &mut mig), SUCCESS);
        let (mut is_mig, mut gi_id) = (0, 0);
        assert_eq!(nvmlDeviceIsMigDeviceHandle(mig, &mut is_mig), SUCCESS);
        assert_eq!(nvmlDeviceGetGpuInstanceId(mig, &mut gi_id), SUCCESS);
        assert_eq!((is_mig, gi_id), (1, 1));
        let mut parent: nvmlDevice_t = null_mut();
        assert_eq!(nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &mut parent), SUCCESS);
        assert_eq!(parent, dev);
        assert_eq!(nvmlDeviceGetName(mig, buf.as_mut_ptr(), 96), SUCCESS);
        assert_eq!(text(&buf), "NVIDIA A100-SXM4-80GB MIG 3g.40gb");
        assert_eq!(nvmlDeviceGetMemoryInfo_v2(mig, &mut mem), SUCCESS);
        assert_eq!((mem.total, mem.used), (40960 << 20, 2000 << 20));
        assert_eq!(nvmlDeviceGetTemperature(mig, 0, &mut n), b::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED);

        // GPM: support, samples of GPU instance 1 at least 100 ms apart, metrics.
        let mismatch = b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        let mut support: nvmlGpmSupport_t = zeroed();
        assert_eq!(nvmlGpmQueryDeviceSupport(dev, &mut support), mismatch);
        support.version = b::NVML_GPM_SUPPORT_VERSION;
        assert_eq!(nvmlGpmQueryDeviceSupport(dev, &mut support), SUCCESS);
        assert_eq!(support.isSupportedDevice, 1);
        assert_eq!(nvmlGpmQueryDeviceSupport(mig, &mut support), b::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED);
        let (mut s1, mut s2): (nvmlGpmSample_t, nvmlGpmSample_t) = (null_mut(), null_mut());
        assert_eq!(nvmlGpmSampleAlloc(null_mut()), INVALID_ARGUMENT);
        assert_eq!(nvmlGpmSampleAlloc(&mut s1), SUCCESS);
        assert_eq!(nvmlGpmSampleAlloc(&mut s2), SUCCESS);
        assert!(!s1.is_null() && s1 != s2);
        assert_eq!(nvmlGpmMigSampleGet(dev, 5, s1), INVALID_ARGUMENT);
        assert_eq!(nvmlGpmMigSampleGet(dev, 1, s1), SUCCESS);
        assert_eq!(nvmlGpmMigSampleGet(dev, 1, s2), SUCCESS);
        let mut request: Box<nvmlGpmMetricsGet_t> = Box::new(zeroed());
        request.version = b::NVML_GPM_METRICS_GET_VERSION;
        request.numMetrics = 2;
        (request.sample1, request.sample2) = (s1, s2);
        request.metrics[0].metricId = b::nvmlGpmMetricId_t_NVML_GPM_METRIC_GRAPHICS_UTIL;
        request.metrics[1].metricId = b::nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_UTIL;
        assert_eq!(nvmlGpmMetricsGet(&mut *request), INVALID_ARGUMENT, "samples less than 100 ms apart");
        std::thread::sleep(crate::state::GPM_MIN_INTERVAL);
        assert_eq!(nvmlGpmMigSampleGet(dev, 1, s2), SUCCESS);
        assert_eq!(nvmlGpmMetricsGet(&mut *request), SUCCESS);
        let [gr, sm] = [request.metrics[0], request.metrics[1]];
        assert_eq!((gr.nvmlReturn, gr.value), (SUCCESS, 63.5));
        let info = gr.metricInfo;
        assert_eq!(
            (text_of(info.shortName), text_of(info.longName), text_of(info.unit)),
            ("gr_util".into(), "Graphics engine utilization".into(), "%".into())
        );
        assert_eq!(sm.nvmlReturn, b::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED);
        assert!(
            !sm.metricInfo.shortName.is_null() && !sm.metricInfo.longName.is_null() && !sm.metricInfo.unit.is_null()
        );
        request.numMetrics = 211;
        assert_eq!(nvmlGpmMetricsGet(&mut *request), INVALID_ARGUMENT);
        request.version = 2;
        assert_eq!(nvmlGpmMetricsGet(&mut *request), mismatch);
        assert_eq!(nvmlGpmMetricsGet(null_mut()), INVALID_ARGUMENT);
        assert_eq!(nvmlGpmSampleGet(dev, s1), SUCCESS);
        assert_eq!(nvmlGpmSampleGet(mig, s1), b::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED);
        assert_eq!(nvmlGpmSampleFree(s1), SUCCESS);
        assert_eq!(nvmlGpmSampleFree(s1), INVALID_ARGUMENT);
        assert_eq!(nvmlGpmSampleFree(s2), SUCCESS);

        // GPU instance profiles, placements and instances.
        let mut info: nvmlGpuInstanceProfileInfo_t = zeroed();
        assert_eq!(nvmlDeviceGetGpuInstanceProfileInfo(dev, 2, &mut info), SUCCESS);
        assert_eq!((info.id, info.sliceCount, info.instanceCount, info.memorySizeMB), (9, 3, 2, 40960));
        let mut info2: nvmlGpuInstanceProfileInfo_v2_t = zeroed();
        info2.version = (size_of::<nvmlGpuInstanceProfileInfo_v2_t>() as u32) | (2 << 24);
        assert_eq!(nvmlDeviceGetGpuInstanceProfileInfoV(dev, 2, &mut info2), SUCCESS);
        assert_eq!(text(&info2.name), "MIG 3g.40gb");
        let mut placements: [nvmlGpuInstancePlacement_t; 4] = zeroed();
        n = 0;
        assert_eq!(nvmlDeviceGetGpuInstancePossiblePlacements_v2(dev, 9, null_mut(), &mut n), SUCCESS);
        assert_eq!(n, 2);
        assert_eq!(nvmlDeviceGetGpuInstancePossiblePlacements_v2(dev, 9, placements.as_mut_ptr(), &mut n), SUCCESS);
        assert_eq!((placements[1].start, placements[1].size), (4, 4));
        assert_eq!(nvmlDeviceGetGpuInstanceRemainingCapacity(dev, 9, &mut n), SUCCESS);
        assert_eq!(n, 0);
        let mut gis: [nvmlGpuInstance_t; 2] = [null_mut(); 2];
        n = 0;
        assert_eq!(nvmlDeviceGetGpuInstances(dev, 9, gis.as_mut_ptr(), &mut n), SUCCESS);
        assert_eq!(n, 1);
        let mut gi_info: nvmlGpuInstanceInfo_t = zeroed();
        assert_eq!(nvmlGpuInstanceGetInfo(gis[0], &mut gi_info), SUCCESS);
        assert_eq!((gi_info.id, gi_info.profileId, gi_info.placement.start, gi_info.device), (1, 9, 0, dev));
        assert_eq!(nvmlGpuInstanceDestroy(gis[0]), b::nvmlReturn_enum_NVML_ERROR_IN_USE);
        let mut cis = [null_mut(); 1];
        assert_eq!(nvmlGpuInstanceGetComputeInstances(gis[0], 2, cis.as_mut_ptr(), &mut n), SUCCESS);
        assert_eq!(n, 1);
        assert_eq!(nvmlComputeInstanceDestroy(cis[0]), b::nvmlReturn_enum_NVML_ERROR_IN_USE);
        let mut ci = null_mut();
        assert_eq!(nvmlGpuInstanceGetComputeInstanceById(gis[0], 0, &mut ci), SUCCESS);
        assert_eq!(ci, cis[0]);
        assert_eq!(nvmlGpuInstanceGetComputeInstanceById(gis[0], 1, &mut ci), b::nvmlReturn_enum_NVML_ERROR_NOT_FOUND);
        assert_eq!(nvmlGpuInstanceGetComputeInstanceById(gis[0], 0, null_mut()), INVALID_ARGUMENT);
        let mut gi: nvmlGpuInstance_t = null_mut();
        let at = nvmlGpuInstancePlacement_t { start: 6, size: 1 };
        assert_eq!(nvmlDeviceCreateGpuInstanceWithPlacement(dev, 19, null(), &mut gi), INVALID_ARGUMENT);
        assert_eq!(nvmlDeviceCreateGpuInstanceWithPlacement(dev, 19, &at, &mut gi), SUCCESS);
        assert_eq!(nvmlDeviceCreateGpuInstance(dev, 14, &mut gi), b::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_RESOURCES);
        assert_eq!(nvmlGpuInstanceDestroy(gi), SUCCESS);
        assert_eq!(nvmlGpuInstanceDestroy(gi), INVALID_ARGUMENT);

        // Events: the XID once, then a short timeout.
        let mut set: nvmlEventSet_t = null_mut();
        assert_eq!(nvmlEventSetCreate(&mut set), SUCCESS);
        let xid = u64::from(b::nvmlEventTypeXidCriticalError);
        assert_eq!(nvmlDeviceRegisterEvents(dev, xid, set), SUCCESS);
        let mut data: nvmlEventData_t = zeroed();
        assert_eq!(nvmlEventSetWait_v2(set, &mut data, 10_000), SUCCESS);
        assert_eq!((data.eventType, data.eventData, data.device, data.gpuInstanceId), (xid, 79, dev, 0xFFFF_FFFF));
        let started = std::time::Instant::now();
        assert_eq!(nvmlEventSetWait_v2(set, &mut data, 10_000), b::nvmlReturn_enum_NVML_ERROR_TIMEOUT);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(nvmlEventSetFree(set), SUCCESS);

        assert_eq!(text_of(nvmlErrorString(b::nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST)), "GPU is lost");
        assert_eq!(nvmlShutdown(), SUCCESS);
        assert_eq!(nvmlDeviceGetCount_v2(&mut count), SUCCESS);
        assert_eq!(nvmlShutdown(), SUCCESS);
        assert_eq!(nvmlDeviceGetCount_v2(&mut count), UNINITIALIZED);
        assert_eq!(nvmlShutdown(), UNINITIALIZED);
    }
    let _ = std::fs::remove_file(&path);
}

/// # Safety
/// `p` points to a NUL-terminated string.
unsafe fn text_of(p: *const c_char) -> String {
    // SAFETY: by this function's contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}
