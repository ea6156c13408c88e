//! The resource.k8s.io objects tessera reads (ResourceSlice, ResourceClaim,
//! ResourceClaimTemplate, DeviceClass, DeviceTaintRule), cut down to the fields the mapping
//! uses, names interned while decoding, and every list bounded by the API's own limits (the
//! count past a limit is kept, so the mapping can say so): a hostile slice cannot grow the
//! store past what a valid one holds. Field names from k8s.io/api `resource/v1` and
//! `resource/v1beta2` (v0.36).

use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::NamespaceResourceScope;
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::super::objects::{Qty, nullable};
use super::super::resources;
use super::intern::{Amounts, IName, intern_amounts};

/// The API's limits (k8s.io/api resource/v1 types.go): devices per slice (64 where any
/// device has taints or consumes counters), counter sets per slice, counters per set or per
/// consumption, attributes and capacities per device, consumptions and taints per device.
pub const MAX_DEVICES: usize = 128;
pub const MAX_DEVICES_PARTITIONED: usize = 64;
pub const MAX_COUNTER_SETS: usize = 8;
pub const MAX_COUNTERS: usize = 32;
pub const MAX_ATTRIBUTES: usize = 32;
pub const MAX_CONSUMPTIONS: usize = 2;
pub const MAX_TAINTS: usize = 16;
/// Requests per claim, results per allocation and consumers per claim (`reservedFor`).
pub const MAX_REQUESTS: usize = 32;
pub const MAX_RESULTS: usize = 32;
pub const MAX_RESERVED: usize = 256;
/// Selectors per request or class.
pub const MAX_SELECTORS: usize = 32;

/// A list kept to its first `N` items; `total` counts every item sent.
#[derive(Debug, Clone)]
pub struct Bounded<T, const N: usize> {
    pub items: Vec<T>,
    pub total: usize,
}

impl<T, const N: usize> Default for Bounded<T, N> {
    fn default() -> Self {
        Self { items: Vec::new(), total: 0 }
    }
}

impl<T, const N: usize> Bounded<T, N> {
    pub fn over(&self) -> bool {
        self.total > N
    }
}

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Bounded<T, N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T, const N: usize>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for V<T, N> {
            type Value = Bounded<T, N>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Bounded::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Bounded::default();
                while out.items.len() < N {
                    match seq.next_element::<T>()? {
                        Some(t) => {
                            out.items.push(t);
                            out.total += 1;
                        }
                        None => return Ok(out),
                    }
                }
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    out.total += 1;
                }
                Ok(out)
            }
        }
        d.deserialize_any(V::<T, N>(PhantomData))
    }
}

/// A map of names to quantities (`{"memory": {"value": "81152Mi"}}`), kept to its first `N`
/// entries; a value that is not a whole number is kept as `None`.
#[derive(Debug, Clone)]
pub struct Quantities<const N: usize> {
    /// Shared: the same lists repeat on every device of a kind (intern.rs).
    pub items: Amounts,
    pub total: usize,
}

impl<const N: usize> Default for Quantities<N> {
    fn default() -> Self {
        Self { items: intern_amounts(Vec::new()), total: 0 }
    }
}

impl<const N: usize> Quantities<N> {
    pub fn get(&self, name: &str) -> Option<Option<u64>> {
        self.items.iter().find(|(n, _)| &**n == name).map(|(_, v)| *v)
    }
}

#[derive(Deserialize)]
struct Valued {
    #[serde(default)]
    value: Option<Qty>,
}

impl<'de, const N: usize> Deserialize<'de> for Quantities<N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const N: usize>;
        impl<'de, const N: usize> Visitor<'de> for V<N> {
            type Value = Quantities<N>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of quantities")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Quantities::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let (mut items, mut total) = (Vec::new(), 0);
                while let Some(k) = map.next_key::<IName>()? {
                    total += 1;
                    if items.len() < N {
                        let v = map.next_value::<Valued>()?;
                        items.push((k, v.value.as_ref().and_then(resources::count)));
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Quantities { items: intern_amounts(items), total })
            }
        }
        d.deserialize_any(V::<N>)
    }
}

/// The attributes tessera reads of a device, by their name without the driver's domain;
/// the rest are counted, and attribute values of a type the API does not have are named.
#[derive(Debug, Clone, Default)]
pub struct Attributes {
    /// `type`: `gpu`, `mig`, `vfio`.
    pub kind: Option<IName>,
    pub uuid: Option<IName>,
    pub parent_uuid: Option<IName>,
    pub product: Option<IName>,
    pub profile: Option<IName>,
    pub pci_bus_id: Option<IName>,
    /// Every attribute sent.
    pub total: usize,
    /// Attributes whose value has no type the API knows (`string`, `int`, `bool`,
    /// `version`): (attribute, the type sent), the first few.
    pub unknown: Vec<(IName, IName)>,
}

/// One attribute's value: exactly one of the API's four types.
enum Value {
    Text(IName),
    Other,
    Unknown(IName),
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an attribute value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
                let mut out = Value::Other;
                while let Some(k) = map.next_key::<IName>()? {
                    match &*k {
                        "string" | "version" => {
                            let v = map.next_value::<Option<IName>>()?;
                            if let (Some(v), Value::Other) = (v, &out) {
                                out = Value::Text(v);
                            }
                        }
                        "int" | "bool" => {
                            map.next_value::<IgnoredAny>()?;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            out = Value::Unknown(k);
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Attributes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Attributes;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of attributes")
            }
            fn visit_unit<E>(self) -> Result<Attributes, E> {
                Ok(Attributes::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Attributes, A::Error> {
                let mut out = Attributes::default();
                while let Some(k) = map.next_key::<IName>()? {
                    out.total += 1;
                    if out.total > MAX_ATTRIBUTES * 4 {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                    let v = map.next_value::<Value>()?;
                    let text = match v {
                        Value::Text(t) => t,
                        Value::Other => continue,
                        Value::Unknown(t) => {
                            if out.unknown.len() < 4 {
                                out.unknown.push((k, t));
                            }
                            continue;
                        }
                    };
                    let bare =
                        k.rsplit_once('/').map_or(&*k, |(domain, n)| if domain == "gpu.nvidia.com" { n } else { &k });
                    let slot = match bare {
                        "type" => &mut out.kind,
                        "uuid" => &mut out.uuid,
                        "parentUUID" => &mut out.parent_uuid,
                        "productName" => &mut out.product,
                        "profile" => &mut out.profile,
                        "resource.kubernetes.io/pciBusID" => &mut out.pci_bus_id,
                        _ => continue,
                    };
                    *slot = Some(text);
                }
                Ok(out)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    #[serde(default)]
    pub key: IName,
    #[serde(default)]
    pub value: Option<IName>,
    #[serde(default)]
    pub effect: IName,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Consumption {
    #[serde(default)]
    pub counter_set: IName,
    #[serde(default, deserialize_with = "nullable")]
    pub counters: Quantities<MAX_COUNTERS>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    #[serde(default)]
    pub name: IName,
    #[serde(default, deserialize_with = "nullable")]
    pub attributes: Attributes,
    #[serde(default, deserialize_with = "nullable")]
    pub capacity: Quantities<MAX_ATTRIBUTES>,
    #[serde(default, deserialize_with = "nullable")]
    pub consumes_counters: Bounded<Consumption, MAX_CONSUMPTIONS>,
    #[serde(default, deserialize_with = "nullable")]
    pub taints: Bounded<Taint, MAX_TAINTS>,
}

impl Device {
    /// The capacity `memory` in MiB.
    pub fn memory_mib(&self) -> Option<u64> {
        self.capacity.get("memory").flatten().map(|b| b >> 20)
    }

    /// The memory slices its `memorySliceN` capacities name (static MIG), bit N = slice N.
    pub fn slice_capacities(&self) -> u16 {
        slices(self.capacity.items.iter().map(|(n, v)| (&**n, *v)), "memorySlice")
    }
}

/// Bit N for every `<prefix>N` entry with value 1 (N < 16).
pub fn slices<'a>(items: impl Iterator<Item = (&'a str, Option<u64>)>, prefix: &str) -> u16 {
    let mut mask = 0u16;
    for (name, v) in items {
        let n = name.strip_prefix(prefix).and_then(|n| n.parse::<u8>().ok());
        if let (Some(n), Some(1)) = (n, v)
            && n < 16
        {
            mask |= 1 << n;
        }
    }
    mask
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CounterSet {
    #[serde(default)]
    pub name: IName,
    #[serde(default, deserialize_with = "nullable")]
    pub counters: Quantities<MAX_COUNTERS>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pool {
    #[serde(default)]
    pub name: IName,
    #[serde(default)]
    pub generation: i64,
    #[serde(default)]
    pub resource_slice_count: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SliceSpec {
    #[serde(default)]
    pub driver: IName,
    #[serde(default)]
    pub node_name: Option<IName>,
    #[serde(default, deserialize_with = "nullable")]
    pub pool: Pool,
    #[serde(default, deserialize_with = "nullable")]
    pub devices: Bounded<Device, MAX_DEVICES>,
    #[serde(default, deserialize_with = "nullable")]
    pub shared_counters: Bounded<CounterSet, MAX_COUNTER_SETS>,
}

/// A ResourceSlice.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Slice {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: SliceSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Cel {
    #[serde(default)]
    pub expression: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Selector {
    #[serde(default)]
    pub cel: Option<Cel>,
}

/// One way to satisfy a request: `exactly`, or one of `firstAvailable`'s subrequests.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Exact {
    /// A subrequest's name.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub device_class_name: IName,
    #[serde(default)]
    pub allocation_mode: Option<String>,
    #[serde(default)]
    pub count: Option<i64>,
    #[serde(default, deserialize_with = "nullable")]
    pub selectors: Bounded<Selector, MAX_SELECTORS>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequest {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub exactly: Option<Exact>,
    #[serde(default, deserialize_with = "nullable")]
    pub first_available: Bounded<Exact, 8>,
}

impl DeviceRequest {
    /// The alternatives in the order the scheduler tries them.
    pub fn alternatives(&self) -> impl Iterator<Item = &Exact> {
        self.exactly.iter().chain(self.first_available.items.iter())
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Constraint {
    #[serde(default)]
    pub match_attribute: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub requests: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClaim {
    #[serde(default, deserialize_with = "nullable")]
    pub requests: Bounded<DeviceRequest, MAX_REQUESTS>,
    #[serde(default, deserialize_with = "nullable")]
    pub constraints: Bounded<Constraint, MAX_REQUESTS>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub devices: DeviceClaim,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocatedDevice {
    #[serde(default)]
    pub request: String,
    #[serde(default)]
    pub driver: IName,
    #[serde(default)]
    pub pool: IName,
    #[serde(default)]
    pub device: IName,
    /// Admin access (a monitoring DaemonSet's): the device is reached, not allocated to it.
    #[serde(default)]
    pub admin_access: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct AllocatedDevices {
    #[serde(default, deserialize_with = "nullable")]
    pub results: Bounded<AllocatedDevice, MAX_RESULTS>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct AllocationResult {
    #[serde(default, deserialize_with = "nullable")]
    pub devices: AllocatedDevices,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Consumer {
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimStatus {
    #[serde(default)]
    pub allocation: Option<AllocationResult>,
    #[serde(default, deserialize_with = "nullable")]
    pub reserved_for: Bounded<Consumer, MAX_RESERVED>,
}

/// A ResourceClaim.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Claim {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: ClaimSpec,
    #[serde(default, deserialize_with = "nullable")]
    pub status: ClaimStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TemplateSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub spec: ClaimSpec,
}

/// A ResourceClaimTemplate: the claim a pod's pending claim will be made from.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Template {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: TemplateSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub selectors: Bounded<Selector, MAX_SELECTORS>,
    #[serde(default)]
    pub extended_resource_name: Option<String>,
}

/// A DeviceClass.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Class {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: ClassSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TaintSelector {
    #[serde(default)]
    pub driver: Option<IName>,
    #[serde(default)]
    pub pool: Option<IName>,
    #[serde(default)]
    pub device: Option<IName>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub device_selector: TaintSelector,
    #[serde(default, deserialize_with = "nullable")]
    pub taint: Taint,
}

/// A DeviceTaintRule (resource.k8s.io/v1beta2).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Rule {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: RuleSpec,
}

macro_rules! resource {
    ($t:ty, $version:literal, $kind:literal, $plural:literal, $scope:ty) => {
        impl k8s_openapi::Resource for $t {
            const API_VERSION: &'static str = concat!("resource.k8s.io/", $version);
            const GROUP: &'static str = "resource.k8s.io";
            const KIND: &'static str = $kind;
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }

        impl k8s_openapi::Metadata for $t {
            type Ty = ObjectMeta;
            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

resource!(Slice, "v1", "ResourceSlice", "resourceslices", k8s_openapi::ClusterResourceScope);
resource!(Claim, "v1", "ResourceClaim", "resourceclaims", NamespaceResourceScope);
resource!(Template, "v1", "ResourceClaimTemplate", "resourceclaimtemplates", NamespaceResourceScope);
resource!(Class, "v1", "DeviceClass", "deviceclasses", k8s_openapi::ClusterResourceScope);
resource!(Rule, "v1beta2", "DeviceTaintRule", "devicetaintrules", k8s_openapi::ClusterResourceScope);
