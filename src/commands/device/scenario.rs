//! A scenario for the fake NVML library (tests/fake-nvml), taken from what tessera read of
//! real cards: `snapshot --json` and, when given, the probe's call log. UUIDs become stable
//! stand-ins (serials are never read); a value tessera could not read becomes a call the fake
//! answers NOT_SUPPORTED, or NO_PERMISSION where the probe saw that, so the fake shows the
//! same gaps.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// The stand-in UUID of card `index`: the fake library's own default form.
pub fn stand_in_uuid(index: u64) -> String {
    format!("GPU-00000000-0000-0000-0000-{index:012x}")
}

/// Calls a null field of the snapshot stands for.
const FIELD_CALLS: &[(&str, &str)] = &[
    ("temperature_c", "nvmlDeviceGetTemperature"),
    ("power_w", "nvmlDeviceGetPowerUsage"),
    ("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit"),
    ("sm_clock_mhz", "nvmlDeviceGetClockInfo"),
    ("memory_total_mib", "nvmlDeviceGetMemoryInfo_v2"),
    ("compute_mode", "nvmlDeviceGetComputeMode"),
];

/// The scenario: one card per card of the snapshot, in its order.
pub fn scenario(snapshot: &Value, probe: Option<&Value>) -> Value {
    let cards: Vec<Value> = snapshot["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["cards"].as_array().into_iter().flatten())
        .enumerate()
        .map(|(i, c)| card(i as u64, c, probe))
        .collect();
    let driver = probe.and_then(|p| p["driver_version"].as_str()).unwrap_or("550.54.15");
    json!({
        "comment": format!(
            "Captured by tessera device-check scenario from {} card(s) on driver {driver}; UUIDs replaced by stand-ins, serials never read.",
            cards.len()
        ),
        "driver_version": driver,
        "cards": cards,
    })
}

/// Calls the probe saw fail with `kind` (`not_supported`, `no_permission`) on card `index`
/// and never succeed there.
fn failed_calls(probe: Option<&Value>, index: u64, kind: &str) -> BTreeSet<String> {
    probe
        .and_then(|p| p["calls"].as_array())
        .into_iter()
        .flatten()
        .filter(|r| r["card"].as_u64() == Some(index))
        .filter(|r| r[kind].as_u64().unwrap_or(0) > 0 && r["ok"].as_u64().unwrap_or(0) == 0)
        .filter_map(|r| r["call"].as_str().map(str::to_string))
        .collect()
}

/// The fake's card for card `c` of the snapshot, the `position`th: its readings, MIG
/// instances, processes and the calls that fail on it.
fn card(position: u64, c: &Value, probe: Option<&Value>) -> Value {
    let index = c["index"].as_u64().unwrap_or(position);
    let mut m = Map::new();
    readings(&mut m, position, c);
    let mig_on = mig(&mut m, c);
    m.insert("processes".into(), Value::Array(processes(c, mig_on)));
    failing_calls(&mut m, c, probe, index, mig_on);
    Value::Object(m)
}

/// The card's name, stand-in UUID and bus id, and the readings tessera had of it.
fn readings(m: &mut Map<String, Value>, position: u64, c: &Value) {
    m.insert("name".into(), c["model"].clone());
    if let Some(model) = c["gpu_model"].as_str() {
        m.insert("mig_model".into(), json!(model));
    }
    m.insert("uuid".into(), json!(stand_in_uuid(position)));
    if let Some(bus) = c["pci_bus_id"].as_str() {
        m.insert("pci_bus_id".into(), json!(bus));
    }
    let copy = |m: &mut Map<String, Value>, to: &str, v: Option<u64>| {
        if let Some(v) = v {
            m.insert(to.into(), json!(v));
        }
    };
    let int = |k: &str| c[k].as_f64().filter(|v| *v >= 0.0).map(|v| v.round() as u64);
    copy(m, "memory_total_mib", int("memory_total_mib"));
    copy(m, "memory_used_mib", int("memory_used_mib"));
    copy(m, "utilization_gpu", int("utilization_pct"));
    copy(m, "temperature_c", int("temperature_c"));
    copy(m, "power_mw", c["power_w"].as_f64().map(|w| (w * 1000.0).round() as u64));
    copy(m, "power_limit_mw", c["power_limit_w"].as_f64().map(|w| (w * 1000.0).round() as u64));
    copy(m, "sm_clock_mhz", int("sm_clock_mhz"));
    copy(m, "mem_clock_mhz", int("memory_clock_mhz"));
    copy(m, "ecc_volatile_uncorrected", c["health"]["ecc_volatile_uncorrected"].as_u64());
    if let Some(mode) = c["compute_mode"].as_str() {
        m.insert("compute_mode".into(), json!(mode));
    }
}

/// The card's MIG mode and, with MIG on, its instances and whether it has GPM; whether MIG
/// is on.
fn mig(m: &mut Map<String, Value>, c: &Value) -> bool {
    let mig_on = c["mig"]["enabled"].as_bool().unwrap_or(false);
    m.insert("mig_enabled".into(), json!(mig_on));
    if let Some(p) = c["mig"]["pending"].as_bool() {
        m.insert("mig_pending".into(), json!(p));
    }
    let instances: Vec<Value> = c["mig"]["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            json!({
                "profile": i["profile"],
                "start": i["start"],
                "compute_instances": i["compute_instances"].as_array().map_or(1, Vec::len).max(1),
                "memory_used_mib": i["memory_used_mib"].as_u64().unwrap_or(0),
                "gpm_util": i["utilization_pct"].as_f64().unwrap_or(0.0),
            })
        })
        .collect();
    if mig_on {
        // Instance activity comes from GPM only: where tessera measured some, the card has it.
        let gpm = c["mig"]["instances"].as_array().into_iter().flatten().any(|i| i["utilization_pct"].is_number());
        m.insert("gpm".into(), json!(gpm));
        m.insert("instances".into(), Value::Array(instances));
    }
    mig_on
}

/// The card's processes, each in its GPU instance where the card has MIG on.
fn processes(c: &Value, mig_on: bool) -> Vec<Value> {
    // The fake numbers GPU instances 1, 2, ... in the order listed; a real driver's ids are
    // not positional (3, 4, 5, 6 on one capture): a process keeps its instance by position.
    let gi_ids: Vec<Option<u64>> =
        c["mig"]["instances"].as_array().into_iter().flatten().map(|i| i["gi_id"].as_u64()).collect();
    let gi_of = |gi: &Value| {
        let gi = gi.as_u64()?;
        let at = gi_ids.iter().position(|g| *g == Some(gi))?;
        mig_on.then_some(at as u64 + 1)
    };
    c["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let mut o = Map::new();
            o.insert("pid".into(), json!(p["pid"].as_u64()?));
            o.insert("used_mib".into(), json!(p["used_mib"].as_u64().unwrap_or(0)));
            if let Some(gi) = gi_of(&p["gi_id"]) {
                o.insert("gpu_instance_id".into(), json!(gi));
            }
            if p["mps"].as_bool() == Some(true) {
                o.insert("mps".into(), json!(true));
            }
            Some(Value::Object(o))
        })
        .collect()
}

/// The calls that fail on card `index`: NO_PERMISSION where the probe saw it, NOT_SUPPORTED
/// where it saw that or where the snapshot has no value.
fn failing_calls(m: &mut Map<String, Value>, c: &Value, probe: Option<&Value>, index: u64, mig_on: bool) {
    let no_permission = failed_calls(probe, index, "no_permission");
    let mut not_supported = failed_calls(probe, index, "not_supported");
    for (field, call) in FIELD_CALLS {
        if c[*field].is_null() && !no_permission.contains(*call) {
            not_supported.insert((*call).to_string());
        }
    }
    if c["health"]["ecc_volatile_uncorrected"].is_null() && !no_permission.contains("nvmlDeviceGetTotalEccErrors") {
        not_supported.insert("nvmlDeviceGetTotalEccErrors".into());
    }
    if !mig_on && c["utilization_pct"].is_null() && !no_permission.contains("nvmlDeviceGetUtilizationRates") {
        not_supported.insert("nvmlDeviceGetUtilizationRates".into());
    }
    if !not_supported.is_empty() {
        m.insert("not_supported".into(), json!(not_supported));
    }
    if !no_permission.is_empty() {
        m.insert("no_permission".into(), json!(no_permission));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_keep_their_instance_by_position_not_by_the_drivers_id() {
        let snap = json!({"nodes": [{"name": "n", "cards": [{
            "index": 0, "model": "NVIDIA A100-SXM4-80GB", "gpu_model": "A100-80GB", "health": {},
            "mig": {"enabled": true, "pending": true, "instances": [
                {"gi_id": 5, "profile": "3g.40gb", "start": 0, "compute_instances": [{"ci_id": 0}]},
                {"gi_id": 3, "profile": "2g.20gb", "start": 4, "compute_instances": [{"ci_id": 0}]}]},
            "processes": [{"pid": 1, "used_mib": 10, "gi_id": 3}, {"pid": 2, "used_mib": 20, "gi_id": 5}]
        }]}]});
        let c = &scenario(&snap, None)["cards"][0];
        assert_eq!(c["processes"][0]["gpu_instance_id"], 2, "GI 3 is the second instance listed");
        assert_eq!(c["processes"][1]["gpu_instance_id"], 1);
    }

    #[test]
    fn uuids_are_replaced_and_gaps_become_failing_calls() {
        let snap = json!({"nodes": [{"name": "gpu-01", "cards": [{
            "index": 0, "uuid": "GPU-real-secret", "model": "NVIDIA H100 80GB HBM3", "gpu_model": "H100-80GB",
            "pci_bus_id": "00000000:1B:00.0", "memory_total_mib": 81559, "memory_used_mib": 512,
            "utilization_pct": 3.0, "temperature_c": null, "power_w": 120.4, "power_limit_w": 700.0,
            "sm_clock_mhz": 1980, "memory_clock_mhz": 2619, "compute_mode": "default",
            "health": {"ecc_volatile_uncorrected": 0},
            "mig": {"enabled": false, "pending": false, "instances": []},
            "processes": [{"pid": 77, "used_mib": 500, "gi_id": null, "mps": false}]
        }]}]});
        let probe = json!({"driver_version": "570.86.15", "calls": [
            {"call": "nvmlDeviceGetTemperature", "card": 0, "ok": 0, "not_supported": 0, "no_permission": 3},
            {"call": "nvmlGpmQueryDeviceSupport", "card": 0, "ok": 0, "not_supported": 1, "no_permission": 0},
            {"call": "nvmlDeviceGetPowerUsage", "card": 0, "ok": 3, "not_supported": 0, "no_permission": 0}
        ]});
        let s = scenario(&snap, Some(&probe));
        let text = s.to_string();
        assert!(!text.contains("GPU-real-secret"), "{text}");
        let c = &s["cards"][0];
        assert_eq!(c["uuid"], "GPU-00000000-0000-0000-0000-000000000000");
        assert_eq!(c["power_mw"], 120_400);
        assert_eq!(c["no_permission"], json!(["nvmlDeviceGetTemperature"]));
        assert_eq!(c["not_supported"], json!(["nvmlGpmQueryDeviceSupport"]), "temperature is no-permission, not both");
        assert_eq!(s["driver_version"], "570.86.15");
        assert!(c.get("temperature_c").is_none(), "an unknown value is left to the failing call");
        assert_eq!(c["processes"][0], json!({"pid": 77, "used_mib": 500}));
    }
}
