//! The CEL forms read (equalities, capacity comparisons, `&&`), what they say of a device, and
//! the forms that stay unread.

use super::*;

/// A device of the GPU driver with `memory` capacity (as the driver publishes it) and
/// `multiprocessors`.
fn device(kind: &str, memory: &str) -> Device {
    let v = serde_json::json!({
        "name": "gpu-0",
        "attributes": {"type": {"string": kind}, "productName": {"string": "NVIDIA H100 80GB HBM3"}},
        "capacity": {"memory": {"value": memory}, "multiprocessors": {"value": "132"}},
    });
    serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
}

const D: &str = "gpu.nvidia.com";

fn matches(expression: &str, dev: &Device) -> bool {
    let terms = read(expression).unwrap_or_else(|| panic!("not read: {expression}"));
    terms.iter().all(|t| t.matches(D, dev))
}

#[test]
fn equalities_are_read() {
    let t = read("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'");
    assert_eq!(t, Some(vec![Term::Driver(D), Term::Equals { domain: D, attribute: "type", value: "gpu" }]));
    let h100 = device("gpu", "81559Mi");
    assert!(matches("device.attributes[\"gpu.nvidia.com\"].productName == \"NVIDIA H100 80GB HBM3\"", &h100));
    assert!(!matches("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'", &h100));
    assert!(!matches("device.attributes['gpu.nvidia.com'].type == 'mig'", &h100));
    // Another driver's attribute is not this device's.
    assert!(!matches("device.attributes['other.example.com'].type == 'gpu'", &h100));
}

#[test]
fn compare_to_against_a_quantity_is_read_in_every_operator() {
    let h100 = device("gpu", "81559Mi");
    let forty = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi'))";
    for (tail, want) in [
        (">= 0", true),
        ("> 0", true),
        ("== 1", true),
        ("== 0", false),
        ("!= 0", true),
        ("< 0", false),
        ("<= 0", false),
        ("== -1", false),
    ] {
        assert_eq!(matches(&format!("{forty} {tail}"), &h100), want, "{forty} {tail}");
    }
    // Double quotes, as the Kubernetes docs write it; the boundary is inclusive.
    assert!(matches("device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"81559Mi\")) >= 0", &h100));
    assert!(!matches("device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"96Gi\")) >= 0", &h100));
    // Another capacity than memory, a plain number.
    assert!(matches("device.capacity['gpu.nvidia.com'].multiprocessors.compareTo(quantity('100')) > 0", &h100));
    // A capacity the device does not publish does not match.
    assert!(!matches("device.capacity['gpu.nvidia.com'].memorySlice0.compareTo(quantity('1')) >= 0", &h100));
}

#[test]
fn is_greater_than_and_is_less_than_are_read() {
    let mig = device("mig", "9984Mi");
    assert!(matches("device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('10Gi'))", &mig));
    assert!(!matches("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('10Gi'))", &mig));
    assert!(!matches("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('9984Mi'))", &mig));
}

#[test]
fn conjunctions_and_parentheses_are_read_as_all_terms() {
    let e = "device.driver == 'gpu.nvidia.com' && (device.attributes['gpu.nvidia.com'].type == 'mig') && \
             device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('20Gi')) >= 0";
    let terms = read(e).unwrap_or_default();
    assert_eq!(terms.len(), 3, "{terms:?}");
    assert_eq!(terms[2].to_string(), "memory >= 20Gi");
    assert!(terms[2].is_capacity() && !terms[1].is_capacity());
    assert!(!matches(e, &device("mig", "9984Mi")));
    assert!(matches(e, &device("mig", "40448Mi")));
    assert!(!matches(e, &device("gpu", "81559Mi")));
}

#[test]
fn the_comparison_is_said_as_the_quantities_compared() {
    let say = |tail: &str| {
        let e = format!("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) {tail}");
        read(&e).and_then(|t| t.first().map(ToString::to_string)).unwrap_or_default()
    };
    assert_eq!(say(">= 0"), "memory >= 40Gi");
    assert_eq!(say("== 1"), "memory > 40Gi");
    assert_eq!(say("< 0"), "memory < 40Gi");
    assert_eq!(say("!= 1"), "memory <= 40Gi");
    assert_eq!(say(">= -1"), "memory.compareTo(40Gi) >= -1");
    let gt = read("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('40Gi'))");
    assert_eq!(gt.and_then(|t| t.first().map(ToString::to_string)).as_deref(), Some("memory > 40Gi"));
}

#[test]
fn other_forms_stay_unread() {
    for e in [
        // Quantities have no ordering operators in Kubernetes' CEL: the API server rejects this.
        "device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')",
        "device.capacity[\"gpu.nvidia.com\"].memory >= quantity(\"40Gi\")",
        // A disjunction, a negation, an attribute tessera does not know, a function it does not.
        "device.attributes['gpu.nvidia.com'].profile == '1g.10gb' || true",
        "!(device.attributes['gpu.nvidia.com'].type == 'gpu')",
        "device.attributes['gpu.nvidia.com'].type != 'gpu'",
        "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'",
        "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H')",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0 || true",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi'))",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('0.5')) >= 0",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity(x)) >= 0",
        "device.capacity['gpu.nvidia.com'].memory.asApproximateFloat() > 1e9",
        "quantity('40Gi').compareTo(device.capacity['gpu.nvidia.com'].memory) <= 0",
        "device.attributes['gpu.nvidia.com'].type == 'gpu' && ",
        "(device.driver == 'gpu.nvidia.com'",
        "device.driver == 'gpu.nvidia.com' && 'x' in device.attributes['gpu.nvidia.com']",
        "",
    ] {
        assert!(read(e).is_none(), "read: {e}");
    }
}
