//! The Kubernetes objects tessera reads, cut down to the fields it maps: serde skips the rest
//! while decoding, so ten thousand pods in the watch stores cost a few megabytes, and
//! quantities decode whether they arrive as strings or as numbers.

use std::borrow::Cow;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, NamespaceResourceScope};
use serde::{Deserialize, Deserializer};

/// `null` where an object or list is expected decodes as empty: some clients write it.
pub fn nullable<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A resource quantity as written: the API server sends strings, manifests and some tools
/// plain numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Qty(pub String);

impl<'de> Deserialize<'de> for Qty {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Int(i64),
            Float(f64),
        }
        Ok(Qty(match Raw::deserialize(d)? {
            Raw::Text(s) => s,
            Raw::Int(i) => i.to_string(),
            Raw::Float(f) => f.to_string(),
        }))
    }
}

pub type ResourceList = BTreeMap<String, Qty>;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

/// The first condition of `type_`.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuNode {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: NodeSpec,
    #[serde(default, deserialize_with = "nullable")]
    pub status: NodeStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    #[serde(default)]
    pub unschedulable: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    #[serde(default, deserialize_with = "nullable")]
    pub capacity: ResourceList,
    #[serde(default, deserialize_with = "nullable")]
    pub allocatable: ResourceList,
    #[serde(default, deserialize_with = "nullable")]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuPod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: PodSpec,
    #[serde(default, deserialize_with = "nullable")]
    pub status: PodStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default)]
    pub node_name: Option<String>,
    #[serde(default)]
    pub priority: Option<i32>,
    #[serde(default)]
    pub priority_class_name: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub affinity: Option<Affinity>,
    #[serde(default, deserialize_with = "nullable")]
    pub containers: Vec<Container>,
    #[serde(default, deserialize_with = "nullable")]
    pub init_containers: Vec<Container>,
    /// Dynamic Resource Allocation: the claims the pod uses, by name in the pod.
    #[serde(default, deserialize_with = "nullable")]
    pub resource_claims: Vec<PodResourceClaim>,
}

/// `spec.resourceClaims[]`: a claim by name, or the template its claim is made from.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodResourceClaim {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub resource_claim_name: Option<String>,
    #[serde(default)]
    pub resource_claim_template_name: Option<String>,
}

/// `status.resourceClaimStatuses[]`: the claim made from a template for the pod.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodResourceClaimStatus {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub resource_claim_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    #[serde(default, deserialize_with = "nullable")]
    pub resources: Resources,
    /// `Always` on an init container makes it a sidecar that runs beside the app containers.
    #[serde(default)]
    pub restart_policy: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    #[serde(default, deserialize_with = "nullable")]
    pub requests: ResourceList,
    #[serde(default, deserialize_with = "nullable")]
    pub limits: ResourceList,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Affinity {
    #[serde(default)]
    pub node_affinity: Option<NodeAffinity>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinity {
    #[serde(default)]
    pub required_during_scheduling_ignored_during_execution: Option<NodeSelector>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelector {
    #[serde(default, deserialize_with = "nullable")]
    pub node_selector_terms: Vec<NodeSelectorTerm>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    #[serde(default, deserialize_with = "nullable")]
    pub match_expressions: Vec<Requirement>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirement {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: String,
    #[serde(default, deserialize_with = "nullable")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub start_time: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "nullable")]
    pub container_statuses: Vec<ContainerStatus>,
    #[serde(default, deserialize_with = "nullable")]
    pub resource_claim_statuses: Vec<PodResourceClaimStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    #[serde(default)]
    pub state: Option<ContainerState>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerState {
    #[serde(default)]
    pub waiting: Option<Waiting>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

/// A Kueue `Workload` (v1beta1 or v1beta2; the fields read here are in both, save the
/// priority class reference, which each version names differently).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KueueWorkload {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: KueueSpec,
    #[serde(default, deserialize_with = "nullable")]
    pub status: KueueStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KueueSpec {
    #[serde(default)]
    pub queue_name: Option<String>,
    #[serde(default)]
    pub priority: Option<i32>,
    /// v1beta1.
    #[serde(default)]
    pub priority_class_name: Option<String>,
    /// v1beta1: `scheduling.k8s.io/priorityclass` or `kueue.x-k8s.io/workloadpriorityclass`.
    #[serde(default)]
    pub priority_class_source: Option<String>,
    /// v1beta2.
    #[serde(default)]
    pub priority_class_ref: Option<PriorityClassRef>,
    #[serde(default)]
    pub active: Option<bool>,
    #[serde(default, deserialize_with = "nullable")]
    pub pod_sets: Vec<PodSet>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PriorityClassRef {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    #[serde(default)]
    pub count: Option<i64>,
    #[serde(default, deserialize_with = "nullable")]
    pub template: PodTemplate,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplate {
    #[serde(default, deserialize_with = "nullable")]
    pub spec: PodSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KueueStatus {
    #[serde(default, deserialize_with = "nullable")]
    pub conditions: Vec<Condition>,
    /// Present once the workload is admitted; only its presence matters here.
    #[serde(default)]
    pub admission: Option<serde_json::Value>,
}

impl k8s_openapi::Resource for GpuNode {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Node";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "nodes";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::Metadata for GpuNode {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl k8s_openapi::Resource for GpuPod {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = NamespaceResourceScope;
}

impl k8s_openapi::Metadata for GpuPod {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The Kueue version is found at run time, so the resource is described by discovery.
impl kube::Resource for KueueWorkload {
    type DynamicType = ApiResource;
    type Scope = NamespaceResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// An object's creation time as chrono sees it.
pub fn created(meta: &ObjectMeta) -> Option<DateTime<Utc>> {
    let t = &meta.creation_timestamp.as_ref()?.0;
    DateTime::from_timestamp(t.as_second(), u32::try_from(t.subsec_nanosecond()).ok()?)
}

/// `NAMESPACE/NAME`.
pub fn key(meta: &ObjectMeta) -> String {
    format!("{}/{}", meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
}
