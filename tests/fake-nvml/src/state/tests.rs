//! Unit tests of the state: scenario loading, handles, MIG rules, failure injection, lost cards,
//! events and GPM.

use std::time::{Duration, Instant};

use nvml_wrapper_sys::bindings::{
    nvmlEventTypePState, nvmlEventTypeXidCriticalError, nvmlGpmMetricId_t_NVML_GPM_METRIC_GRAPHICS_UTIL,
    nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_UTIL, nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST as GPU_IS_LOST,
    nvmlReturn_enum_NVML_ERROR_IN_USE as IN_USE,
    nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_RESOURCES as INSUFFICIENT_RESOURCES, nvmlReturn_enum_NVML_SUCCESS,
};

use super::*;
use crate::catalog::Placement;

fn load(json: &str) -> Result<State, LoadError> {
    State::load(Scenario::parse(json).map_err(LoadError::Invalid)?)
}

fn state(json: &str) -> State {
    load(json).unwrap_or_else(|e| panic!("scenario does not load: {e}"))
}

/// One card of `model` with MIG on and no instances, plus `extra` card fields.
fn mig_card(model: &str, extra: &str) -> State {
    state(&format!(r#"{{"cards": [{{"name": "card", "mig_model": "{model}", "mig_enabled": true {extra}}}]}}"#))
}

fn ok<T>(r: NvmlResult<T>) -> T {
    r.unwrap_or_else(|e| panic!("NVML error {e}"))
}

fn at(start: u32, size: u32) -> Option<Placement> {
    Some(Placement { start, size })
}

// A100-80GB profile ids.
const P1G10_ME: u32 = 20;
const P1G10: u32 = 19;
const P2G20: u32 = 14;
const P3G40: u32 = 9;
const P4G40: u32 = 5;

#[test]
fn handles_round_trip_and_unknown_values_decode_to_none() {
    for h in [
        Handle::Device(0),
        Handle::Device(255),
        Handle::Mig { card: 255, gi: 7, ci: 3 },
        Handle::Gi { card: 9, gi: 14 },
        Handle::Ci { card: 1, gi: 2, ci: 6 },
        Handle::EventSet(42),
        Handle::GpmSample(7),
    ] {
        assert_eq!(Handle::decode(h.encode()), Some(h));
    }
    assert_eq!(Handle::decode(0), None);
    assert_eq!(Handle::decode(0x1000 + MAX_CARDS), None);
    assert_eq!(Handle::decode(usize::MAX), None);
}

#[test]
fn defaults_fill_a_minimal_card() {
    let s = state(r#"{"cards": [{"name": "NVIDIA H100 80GB HBM3", "mig_model": "H100-80GB"}]}"#);
    let c = &s.cards[0];
    assert_eq!(s.driver_version, "550.54.15");
    assert_eq!(c.pci.bus_id, "00000000:01:00.0");
    assert_eq!(c.pci.bus_id_legacy, "0000:01:00.0");
    assert_eq!(c.pci.device_id, 0x2330_10DE);
    assert_eq!(c.compute_mode, 0);
    assert!(!c.mig_enabled && !c.mig_pending);
    assert_eq!(s.memory(Dev { card: 0, mig: None }), (81920 << 20, 0));
}

#[test]
fn scenario_instances_get_ids_in_order_with_full_size_compute_instances() {
    let s = mig_card(
        "A100-80GB",
        r#", "instances": [{"profile": "3g.40gb", "start": 0, "memory_used_mib": 2000},
            {"profile": "2g.20gb", "start": 4}, {"profile": "1g.10gb", "start": 6, "compute_instances": 0}],
            "processes": [{"pid": 7, "used_mib": 100, "gpu_instance_id": 1}]"#,
    );
    let c = &s.cards[0];
    assert_eq!(c.gis.keys().copied().collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(c.gis[&1].placement, Placement { start: 0, size: 4 });
    assert_eq!(c.mig_devices(), [(1, 0), (2, 0)]);
    assert_eq!(c.gis[&1].cis[&0].slices, 3);
    assert_eq!(c.processes[0].ci, 0);
    let mig = Dev { card: 0, mig: Some((1, 0)) };
    assert_eq!(s.memory(mig), ((40 * 1024) << 20, 2000 << 20));
    assert_eq!(s.processes(mig, false).len(), 1);
    assert!(s.processes(mig, true).is_empty(), "no MPS clients");
    assert_eq!(s.name(mig), "card MIG 3g.40gb");
    assert!(s.uuid(mig).starts_with("MIG-"));
}

#[test]
fn overlapping_gpu_instances_are_rejected() {
    let mut s = mig_card("A100-80GB", "");
    let c = &mut s.cards[0];
    ok(c.create_gi(P3G40, at(0, 4)));
    assert_eq!(c.create_gi(P2G20, at(2, 2)), Err(INSUFFICIENT_RESOURCES));
    assert_eq!(c.create_gi(P1G10, at(3, 1)), Err(INSUFFICIENT_RESOURCES));
    assert_eq!(c.create_gi(P2G20, at(4, 2)), Ok(2));
}

#[test]
fn placements_outside_the_profile_and_unknown_profiles_are_invalid() {
    let mut s = mig_card("A100-80GB", "");
    let c = &mut s.cards[0];
    assert_eq!(c.create_gi(P3G40, at(2, 4)), Err(INVALID_ARGUMENT));
    assert_eq!(c.create_gi(P3G40, at(0, 2)), Err(INVALID_ARGUMENT));
    assert_eq!(c.create_gi(P2G20, at(6, 2)), Err(INVALID_ARGUMENT));
    assert_eq!(c.create_gi(99, None), Err(INVALID_ARGUMENT));
    assert!(c.gis.is_empty());
}

#[test]
fn per_profile_counts_are_capped_at_max_count() {
    let mut s = mig_card("A100-80GB", "");
    let c = &mut s.cards[0];
    ok(c.create_gi(P1G10_ME, at(5, 1)));
    assert_eq!(c.remaining_capacity(P1G10_ME), Ok(0));
    assert_eq!(c.create_gi(P1G10_ME, at(3, 1)), Err(INSUFFICIENT_RESOURCES));
    ok(c.create_gi(P4G40, None));
    assert_eq!(c.create_gi(P4G40, None), Err(INSUFFICIENT_RESOURCES));
}

#[test]
fn a_second_media_extension_instance_is_rejected() {
    // A30 has two +me profiles: 1g.6gb+me (id 21) and 2g.12gb+me (id 6).
    let mut s = mig_card("A30-24GB", "");
    let c = &mut s.cards[0];
    ok(c.create_gi(21, at(0, 1)));
    assert_eq!(c.remaining_capacity(6), Ok(0));
    assert_eq!(c.create_gi(6, at(2, 2)), Err(INSUFFICIENT_RESOURCES));
    assert_eq!(c.create_gi(5, at(2, 2)), Ok(2));
}

#[test]
fn auto_placement_takes_the_lowest_free_slot_and_capacity_counts_what_fits() {
    let mut s = mig_card("A100-80GB", "");
    let c = &mut s.cards[0];
    ok(c.create_gi(P1G10, at(1, 1)));
    assert_eq!(c.remaining_capacity(P3G40), Ok(1));
    assert_eq!(c.remaining_capacity(P2G20), Ok(2));
    assert_eq!(c.remaining_capacity(P1G10), Ok(6));
    let gi = ok(c.create_gi(P2G20, None));
    assert_eq!(c.gis[&gi].placement, Placement { start: 2, size: 2 });
    assert_eq!(c.remaining_capacity(P1G10), Ok(4));
    for _ in 0..4 {
        ok(c.create_gi(P1G10, None));
    }
    assert_eq!(c.remaining_capacity(P1G10), Ok(0));
    assert_eq!(c.create_gi(P1G10, None), Err(INSUFFICIENT_RESOURCES));
}

#[test]
fn mig_calls_need_a_mig_capable_card_with_mig_on() {
    let mut s = state(r#"{"cards": [{"name": "a", "mig_model": "A100-80GB"}, {"name": "b"}]}"#);
    assert_eq!(s.cards[0].create_gi(P3G40, None), Err(NOT_SUPPORTED));
    assert_eq!(s.cards[0].max_mig_devices(), Ok(0));
    assert_eq!(s.cards[1].create_gi(P3G40, None), Err(NOT_SUPPORTED));
    assert_eq!(s.cards[1].max_mig_devices(), Err(NOT_SUPPORTED));
    assert_eq!(s.cards[0].profile_by_enum(2).err(), Some(NOT_SUPPORTED));
}

#[test]
fn profile_enums_map_to_the_models_profiles() {
    let s = mig_card("H100-80GB", "");
    let c = &s.cards[0];
    assert_eq!(ok(c.profile_by_enum(2)).name, "3g.40gb");
    assert_eq!(ok(c.profile_by_enum(2)).memory_mib(), 40448);
    assert_eq!(c.profile_by_enum(5).err(), Some(NOT_SUPPORTED));
    assert_eq!(c.profile_by_enum(999).err(), Some(INVALID_ARGUMENT));
}

#[test]
fn destroying_a_gpu_instance_with_compute_instances_is_in_use() {
    let mut s = mig_card("A100-80GB", r#", "instances": [{"profile": "3g.40gb", "start": 0}]"#);
    let c = &mut s.cards[0];
    assert_eq!(c.destroy_gi(1), Err(IN_USE));
    ok(c.destroy_ci(1, 0));
    ok(c.destroy_gi(1));
    assert_eq!(c.destroy_gi(1), Err(INVALID_ARGUMENT));
}

#[test]
fn destroying_a_compute_instance_with_a_process_is_in_use() {
    let mut s = mig_card(
        "A100-80GB",
        r#", "instances": [{"profile": "3g.40gb", "start": 0}],
            "processes": [{"pid": 1, "gpu_instance_id": 1, "compute_instance_id": 0}]"#,
    );
    assert_eq!(s.cards[0].destroy_ci(1, 0), Err(IN_USE));
}

#[test]
fn gpu_and_compute_instance_ids_are_reused_lowest_first() {
    let mut s = mig_card("A100-80GB", "");
    let c = &mut s.cards[0];
    for start in [0, 2, 4] {
        ok(c.create_gi(P2G20, at(start, 2)));
    }
    ok(c.destroy_gi(2));
    assert_eq!(c.create_gi(P1G10, at(6, 1)), Ok(2));
    let g = ok(c.create_gi(P1G10, None));
    assert_eq!(g, 4);
    assert_eq!(c.create_ci(1, 0), Ok(0));
    assert_eq!(c.create_ci(1, 0), Ok(1));
    ok(c.destroy_ci(1, 0));
    assert_eq!(c.create_ci(1, 0), Ok(0));
}

#[test]
fn compute_instance_profiles_follow_the_gpu_instance_size() {
    let mut s = mig_card("A100-80GB", "");
    let c = &mut s.cards[0];
    let gi = ok(c.create_gi(P3G40, None));
    let g = ok(c.gi(gi));
    assert_eq!(g.ci_profile(0), Ok(CiProfile { id: 0, slices: 1, instance_count: 3 }));
    assert_eq!(g.ci_profile(2), Ok(CiProfile { id: 2, slices: 3, instance_count: 1 }));
    assert_eq!(g.ci_profile(3), Err(NOT_SUPPORTED));
    assert_eq!(g.ci_profile(99), Err(INVALID_ARGUMENT));
    for _ in 0..3 {
        ok(c.create_ci(gi, 0));
    }
    let g = ok(c.gi(gi));
    assert_eq!(g.ci_remaining(0), Ok(0));
    assert_eq!(g.ci_remaining(2), Ok(0));
    assert_eq!(g.mig_name(1), "1c.3g.40gb");
    assert_eq!(c.create_ci(gi, 1), Err(INSUFFICIENT_RESOURCES));
}

#[test]
fn mutations_fail_with_unknown_after_the_configured_count() {
    let mut s = state(
        r#"{"fail_after_mutations": 2,
            "cards": [{"name": "a", "mig_model": "A100-80GB", "mig_enabled": true}]}"#,
    );
    ok(s.mutate(|s| s.cards[0].create_gi(P3G40, at(0, 4))));
    // A rejected call does not count.
    assert_eq!(s.mutate(|s| s.cards[0].create_gi(P3G40, at(2, 4))), Err(INVALID_ARGUMENT));
    ok(s.set_compute_mode(Handle::Device(0).encode(), 3));
    assert_eq!(s.mutate(|s| s.cards[0].create_gi(P3G40, at(4, 4))), Err(UNKNOWN));
    assert_eq!(s.set_compute_mode(Handle::Device(0).encode(), 0), Err(UNKNOWN));
    assert_eq!(s.cards[0].gis.len(), 1);
    assert_eq!(s.cards[0].compute_mode, 3);
}

#[test]
fn cards_are_lost_after_the_configured_handle_lookups() {
    let mut s = state(r#"{"cards": [{"name": "a", "lost_after": 1}, {"name": "b", "lost_after": 0}, {"name": "c"}]}"#);
    let h = ok(s.handle_by_index(0)).encode();
    assert!(s.device(h, "nvmlDeviceGetName").is_ok(), "the handle works until the next lookup");
    assert_eq!(s.handle_by_index(0), Err(GPU_IS_LOST));
    assert_eq!(s.device(h, "nvmlDeviceGetName"), Err(GPU_IS_LOST));
    assert_eq!(s.handle_by_index(0), Err(GPU_IS_LOST));
    assert_eq!(s.handle_by_index(1), Err(GPU_IS_LOST));
    for _ in 0..3 {
        ok(s.handle_by_index(2));
    }
    assert_eq!(s.handle_by_index(3), Err(INVALID_ARGUMENT));
    assert_eq!(s.device_count(), 3);
}

#[test]
fn not_supported_lists_match_names_with_and_without_version_suffix() {
    let s =
        state(r#"{"cards": [{"name": "a", "not_supported": ["nvmlDeviceGetPowerUsage", "nvmlDeviceGetMemoryInfo"]}]}"#);
    let h = Handle::Device(0).encode();
    assert_eq!(s.device(h, "nvmlDeviceGetPowerUsage"), Err(NOT_SUPPORTED));
    assert_eq!(s.device(h, "nvmlDeviceGetMemoryInfo_v2"), Err(NOT_SUPPORTED));
    assert!(s.device(h, "nvmlDeviceGetPowerUsage_x").is_ok());
    assert!(s.device(h, "nvmlDeviceGetTemperature").is_ok());
    assert_eq!(s.device(Handle::Device(1).encode(), "nvmlDeviceGetName"), Err(INVALID_ARGUMENT));
    assert_eq!(s.device(Handle::Mig { card: 0, gi: 1, ci: 0 }.encode(), "nvmlDeviceGetName"), Err(INVALID_ARGUMENT));
}

#[test]
fn invalid_scenarios_name_their_problem() {
    let rules = |json: &str| matches!(load(json), Err(LoadError::Rules(_)));
    let invalid = |json: &str| matches!(load(json), Err(LoadError::Invalid(_)));
    let card = |extra: &str| {
        format!(r#"{{"cards": [{{"name": "a", "mig_model": "A100-80GB", "mig_enabled": true{extra}}}]}}"#)
    };
    assert!(rules(&card(r#", "instances": [{"profile": "3g.40gb", "start": 0}, {"profile": "4g.40gb"}]"#)));
    assert!(rules(&card(r#", "instances": [{"profile": "3g.40gb", "start": 2}]"#)));
    assert!(rules(&card(r#", "instances": [{"profile": "9g.1gb"}]"#)));
    assert!(rules(&card(r#", "instances": [{"profile": "3g.40gb", "compute_instances": 4}]"#)));
    assert!(rules(&card(r#", "processes": [{"pid": 1, "gpu_instance_id": 3}]"#)));
    assert!(rules(r#"{"cards": [{"name": "a", "mig_model": "A100-80GB", "instances": [{"profile": "3g.40gb"}]}]}"#));
    assert!(invalid(r#"{"cards": [{"name": "a", "mig_model": "Z9000"}]}"#));
    assert!(invalid(r#"{"cards": [{"name": "a", "compute_mode": "exclusive_thread"}]}"#));
    assert!(invalid(r#"{"cards": [{"name": "a", "pci_bus_id": "07:00"}]}"#));
    assert!(invalid(r#"{"cards": [{"name": "a"}], "events": [{"card": 1, "xid": 79}]}"#));
    assert!(invalid(r#"{"cards": [{"name": "a", "colour": "green"}]}"#));
    assert!(invalid(r#"{"cards": [{"name": "a", "gpm": true, "gpm_util": 5}]}"#));
    assert!(invalid(&card(r#", "instances": [{"profile": "3g.40gb", "gpm": true}]"#)));
    assert!(invalid(&card(r#", "instances": [{"profile": "3g.40gb", "gpm_util": 100.5}]"#)));
    assert!(invalid(&card(r#", "instances": [{"profile": "3g.40gb", "gpm_util": -1}]"#)));
    assert!(invalid(r#"{"cards": [{"mig_model": "A100-80GB"}]}"#));
}

#[test]
fn xid_events_are_delivered_once_to_sets_registered_for_their_card() {
    let mut s = state(
        r#"{"cards": [{"name": "a"}, {"name": "b"}],
            "events": [{"card": 1, "xid": 48}, {"card": 0, "xid": 79}, {"card": 0, "xid": 31}]}"#,
    );
    let xid = u64::from(nvmlEventTypeXidCriticalError);
    let set = s.create_event_set().encode();
    let other = s.create_event_set().encode();
    assert_eq!(s.take_event(set), Ok(None));
    ok(s.register_events(Handle::Device(0).encode(), xid, set));
    ok(s.register_events(Handle::Device(1).encode(), u64::from(nvmlEventTypePState), other));
    assert_eq!(s.take_event(set), Ok(Some((0, 79))));
    assert_eq!(s.take_event(set), Ok(Some((0, 31))));
    assert_eq!(s.take_event(set), Ok(None));
    assert_eq!(s.take_event(other), Ok(None));
    assert_eq!(s.register_events(Handle::Device(0).encode(), 1 << 40, set), Err(NOT_SUPPORTED));
    ok(s.free_event_set(set));
    assert_eq!(s.take_event(set), Err(INVALID_ARGUMENT));
    assert_eq!(s.free_event_set(set), Err(INVALID_ARGUMENT));
}

#[test]
fn the_shipped_fixtures_load() {
    for (name, json, cards) in [
        ("h100x8", include_str!("../../../fixtures/nvml/h100x8.json"), 8),
        ("a100-mixed", include_str!("../../../fixtures/nvml/a100-mixed.json"), 1),
        ("h200-7x1g", include_str!("../../../fixtures/nvml/h200-7x1g.json"), 1),
        ("degraded", include_str!("../../../fixtures/nvml/degraded.json"), 2),
        ("h100-mig-gpm", include_str!("../../../fixtures/nvml/h100-mig-gpm.json"), 1),
    ] {
        let s = load(json).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(s.cards.len(), cards, "{name}");
    }
    let s = state(include_str!("../../../fixtures/nvml/h200-7x1g.json"));
    assert_eq!(s.cards[0].mig_devices().len(), 7);
    assert_eq!(s.cards[0].remaining_capacity(19), Ok(0));
    let s = state(include_str!("../../../fixtures/nvml/h100x8.json"));
    let mut uuids: Vec<_> = s.cards.iter().map(|c| c.uuid.clone()).collect();
    uuids.sort();
    uuids.dedup();
    assert_eq!(uuids.len(), 8);
}

/// The h100-mig-gpm fixture and its card's handle.
fn gpm_fixture() -> (State, usize) {
    (state(include_str!("../../../fixtures/nvml/h100-mig-gpm.json")), Handle::Device(0).encode())
}

fn alloc(s: &mut State) -> usize {
    ok(s.gpm_alloc_sample()).encode()
}

const GR_UTIL: u32 = nvmlGpmMetricId_t_NVML_GPM_METRIC_GRAPHICS_UTIL;
const SM_UTIL: u32 = nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_UTIL;

#[test]
fn gpm_support_follows_the_card_flag_and_samples_need_it() {
    let (s, dev) = gpm_fixture();
    assert_eq!(s.gpm_support(dev), Ok(true));
    let c = &s.cards[0];
    assert_eq!(c.gis.values().map(|g| g.gpm_util).collect::<Vec<_>>(), [63.5, 12.0, 12.0]);
    let mut plain = state(
        r#"{"cards": [{"name": "NVIDIA H100 80GB HBM3", "mig_model": "H100-80GB", "mig_enabled": true,
        "instances": [{"profile": "3g.40gb", "gpm_util": 50}]}]}"#,
    );
    assert_eq!(plain.gpm_support(dev), Ok(false));
    let sample = alloc(&mut plain);
    let now = Instant::now();
    assert_eq!(plain.gpm_sample(dev, sample, now), Err(NOT_SUPPORTED));
    assert_eq!(plain.gpm_mig_sample(dev, 1, sample, now), Err(NOT_SUPPORTED));
    // MIG device handles are not physical cards.
    let mig = Handle::Mig { card: 0, gi: 1, ci: 0 }.encode();
    assert_eq!(s.gpm_support(mig), Err(NOT_SUPPORTED));
    assert_eq!(s.gpm_support(Handle::Device(1).encode()), Err(INVALID_ARGUMENT));
}

#[test]
fn gpm_mig_samples_need_mig_on_and_an_existing_gpu_instance() {
    let (mut s, dev) = gpm_fixture();
    let sample = alloc(&mut s);
    let now = Instant::now();
    assert_eq!(s.gpm_mig_sample(dev, 4, sample, now), Err(INVALID_ARGUMENT));
    assert_eq!(s.gpm_mig_sample(dev, 1, Handle::GpmSample(99).encode(), now), Err(INVALID_ARGUMENT));
    assert_eq!(s.gpm_recorded(sample), Err(INVALID_ARGUMENT), "failed calls leave the sample empty");
    ok(s.gpm_mig_sample(dev, 2, sample, now));
    assert_eq!(ok(s.gpm_recorded(sample)), GpmSample { card: 0, gi: Some(2), at: now, graphics_util: 12.0 });
    let mut off = state(r#"{"cards": [{"name": "a", "mig_model": "H100-80GB", "gpm": true, "utilization_gpu": 40}]}"#);
    let sample = alloc(&mut off);
    assert_eq!(off.gpm_mig_sample(dev, 1, sample, now), Err(NOT_SUPPORTED));
    ok(off.gpm_sample(dev, sample, now));
    assert_eq!(ok(off.gpm_recorded(sample)), GpmSample { card: 0, gi: None, at: now, graphics_util: 40.0 });
}

#[test]
fn gpm_samples_are_allocated_filled_and_freed() {
    let (mut s, dev) = gpm_fixture();
    let (a, b) = (alloc(&mut s), alloc(&mut s));
    assert_ne!(a, b);
    assert_eq!(s.gpm_recorded(a), Err(INVALID_ARGUMENT));
    let t0 = Instant::now();
    ok(s.gpm_mig_sample(dev, 1, a, t0));
    ok(s.gpm_mig_sample(dev, 3, a, t0 + GPM_MIN_INTERVAL));
    assert_eq!(ok(s.gpm_recorded(a)).gi, Some(3), "a second fill replaces the first");
    ok(s.gpm_free_sample(a));
    assert_eq!(s.gpm_free_sample(a), Err(INVALID_ARGUMENT));
    assert_eq!(s.gpm_recorded(a), Err(INVALID_ARGUMENT));
    assert_eq!(s.gpm_mig_sample(dev, 1, a, t0), Err(INVALID_ARGUMENT));
    assert_eq!(Handle::decode(alloc(&mut s)), Some(Handle::GpmSample(3)), "ids are not reused");
    assert_eq!(s.gpm_free_sample(Handle::EventSet(1).encode()), Err(INVALID_ARGUMENT));
}

#[test]
fn gpm_metrics_need_two_samples_of_one_instance_100_ms_apart() {
    let (mut s, dev) = gpm_fixture();
    let [a, b, other, empty] = [(); 4].map(|()| alloc(&mut s));
    let t0 = Instant::now();
    ok(s.gpm_mig_sample(dev, 1, a, t0));
    ok(s.gpm_mig_sample(dev, 2, other, t0 + GPM_MIN_INTERVAL));
    ok(s.gpm_mig_sample(dev, 1, b, t0 + GPM_MIN_INTERVAL - Duration::from_millis(1)));
    assert_eq!(s.gpm_metrics(a, b, &[GR_UTIL]), Err(INVALID_ARGUMENT), "99 ms apart");
    ok(s.gpm_mig_sample(dev, 1, b, t0 + GPM_MIN_INTERVAL));
    assert_eq!(s.gpm_metrics(b, a, &[GR_UTIL]), Err(INVALID_ARGUMENT), "second sample first");
    assert_eq!(s.gpm_metrics(a, a, &[GR_UTIL]), Err(INVALID_ARGUMENT));
    assert_eq!(s.gpm_metrics(a, other, &[GR_UTIL]), Err(INVALID_ARGUMENT), "different GPU instances");
    assert_eq!(s.gpm_metrics(a, empty, &[GR_UTIL]), Err(INVALID_ARGUMENT), "never filled");
    assert_eq!(s.gpm_metrics(a, Handle::GpmSample(99).encode(), &[GR_UTIL]), Err(INVALID_ARGUMENT));
    ok(s.gpm_sample(dev, empty, t0 + GPM_MIN_INTERVAL * 2));
    assert_eq!(s.gpm_metrics(a, empty, &[GR_UTIL]), Err(INVALID_ARGUMENT), "whole card vs GPU instance");

    let values = ok(s.gpm_metrics(a, b, &[GR_UTIL, SM_UTIL, 0]));
    assert_eq!(values.len(), 3);
    assert_eq!((values[0].ret, values[0].value), (nvmlReturn_enum_NVML_SUCCESS, 63.5));
    assert_eq!(values[0].info, metric_info(GR_UTIL));
    assert_eq!(values[0].info.unit, c"%");
    assert_eq!(values[1].ret, NOT_SUPPORTED);
    assert_eq!(values[2].ret, NOT_SUPPORTED);
    assert!(values.iter().all(|v| !v.info.short_name.is_empty() && !v.info.long_name.is_empty()));
    assert_eq!(ok(s.gpm_metrics(a, b, &[])), []);
    ok(s.gpm_mig_sample(dev, 2, a, t0));
    assert_eq!(ok(s.gpm_metrics(a, other, &[GR_UTIL]))[0].value, 12.0);
}

#[test]
fn whole_card_gpm_utilisation_weights_instances_by_compute_slices() {
    let (mut s, dev) = gpm_fixture();
    // (63.5 * 3 + 12 * 2 + 12 * 1) / 7 compute slices.
    let expected = (63.5 * 3.0 + 12.0 * 2.0 + 12.0) / 7.0;
    assert!((s.cards[0].card_graphics_util() - expected).abs() < 1e-9);
    let (a, b) = (alloc(&mut s), alloc(&mut s));
    let t0 = Instant::now();
    ok(s.gpm_sample(dev, a, t0));
    ok(s.gpm_sample(dev, b, t0 + Duration::from_secs(1)));
    assert!((ok(s.gpm_metrics(a, b, &[GR_UTIL]))[0].value - expected).abs() < 1e-9);
}

#[test]
fn gpm_metrics_of_a_lost_card_fail() {
    let mut s = state(
        r#"{"cards": [{"name": "a", "mig_model": "H100-80GB", "mig_enabled": true, "gpm": true, "lost_after": 1,
            "instances": [{"profile": "1g.10gb", "gpm_util": 5}]}]}"#,
    );
    let dev = ok(s.handle_by_index(0)).encode();
    let (a, b) = (alloc(&mut s), alloc(&mut s));
    let t0 = Instant::now();
    ok(s.gpm_mig_sample(dev, 1, a, t0));
    ok(s.gpm_mig_sample(dev, 1, b, t0 + GPM_MIN_INTERVAL));
    assert_eq!(s.handle_by_index(0), Err(GPU_IS_LOST));
    assert_eq!(s.gpm_metrics(a, b, &[GR_UTIL]), Err(GPU_IS_LOST));
    assert_eq!(s.gpm_mig_sample(dev, 1, a, t0), Err(GPU_IS_LOST));
}
