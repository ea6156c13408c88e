//! What a pod's claims ask for in the model's terms: whole GPUs (of a model) or a MIG
//! profile. An allocated claim says it by the devices it got; one not allocated yet (or not
//! made yet: a pending pod's template) by its requests: the device class says GPU or MIG,
//! and the common CEL forms (`device.attributes['gpu.nvidia.com'].profile == '1g.10gb'`,
//! `… .productName == '…'`) the profile and model. Claims of other drivers are not GPUs.

use std::collections::HashMap;

use super::index::Devices;
use super::objects::{Claim, ClaimSpec, Exact, Template};
use super::{GPU_DRIVER, Objects};
use crate::model::Request;
use crate::sources::kubernetes::objects::GpuPod;

/// What a device class hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gpu,
    Mig,
}

/// The value compared with `== '…'` after `.<attribute>` in a CEL expression, if it is there.
pub fn cel_equals<'e>(expression: &'e str, attribute: &str) -> Option<&'e str> {
    let at = expression.find(&format!(".{attribute}"))? + attribute.len() + 1;
    let rest = expression[at..].trim_start().strip_prefix("==")?.trim_start();
    let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let rest = &rest[1..];
    rest.find(quote).map(|end| &rest[..end])
}

/// The kind a device class hands out: from its CEL selectors, else by the chart's names.
pub fn class_kind(o: &Objects, class: &str) -> Option<Kind> {
    let of_cel = |e: &str| {
        let ours = e.contains(&format!("'{GPU_DRIVER}'"));
        match cel_equals(e, "type") {
            Some("gpu") if ours => Some(Kind::Gpu),
            Some("mig") if ours => Some(Kind::Mig),
            _ => None,
        }
    };
    let found = o.classes.iter().find(|c| c.metadata.name.as_deref() == Some(class));
    match found {
        Some(c) => c.spec.selectors.items.iter().filter_map(|s| s.cel.as_ref()).find_map(|s| of_cel(&s.expression)),
        None => match class {
            "gpu.nvidia.com" => Some(Kind::Gpu),
            "mig.nvidia.com" => Some(Kind::Mig),
            _ => None,
        },
    }
}

/// What one alternative of a request asks for, added to `out`.
fn add_exact(o: &Objects, e: &Exact, out: &mut Request) -> bool {
    let Some(kind) = class_kind(o, &e.device_class_name) else { return false };
    let n = match e.allocation_mode.as_deref() {
        // `All` takes every matching device: how many is not known from the claim.
        Some("All") => 1,
        _ => u32::try_from(e.count.unwrap_or(1).max(1)).unwrap_or(u32::MAX),
    };
    let cel = || e.selectors.items.iter().filter_map(|s| s.cel.as_ref()).map(|c| c.expression.as_str());
    if out.model.is_none() {
        out.model = cel().find_map(|x| cel_equals(x, "productName")).map(str::to_string);
    }
    match kind {
        Kind::Gpu => out.gpus = Some(out.gpus.unwrap_or(0).saturating_add(n)),
        Kind::Mig => {
            if out.mig_profile.is_none() {
                out.mig_profile = cel().find_map(|x| cel_equals(x, "profile")).map(str::to_string);
                if out.mig_profile.is_some() {
                    out.gpus = Some(n);
                }
            }
        }
    }
    true
}

/// What a claim's spec asks for: the first alternative of each request.
fn of_spec(o: &Objects, spec: &ClaimSpec, out: &mut Request) -> bool {
    let mut any = false;
    for r in &spec.devices.requests.items {
        if let Some(e) = r.alternatives().next() {
            any |= add_exact(o, e, out);
        }
    }
    any
}

/// Claims and templates by (namespace, name), built once an update.
pub struct Lookup<'a> {
    objects: Objects<'a>,
    devices: &'a Devices<'a>,
    claims: HashMap<(&'a str, &'a str), &'a Claim>,
    templates: HashMap<(&'a str, &'a str), &'a Template>,
}

impl<'a> Lookup<'a> {
    pub fn new(objects: Objects<'a>, devices: &'a Devices<'a>) -> Self {
        let key = |m: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            (m.namespace.as_deref().unwrap_or_default(), m.name.as_deref().unwrap_or_default())
        };
        let claims = objects.claims.iter().map(|c| (key(&c.metadata), &**c)).collect();
        let templates = objects.templates.iter().map(|t| (key(&t.metadata), &**t)).collect();
        Self { objects, devices, claims, templates }
    }
}

/// The pod's claims as one request; `None` where none asks for a GPU.
pub fn request(p: &GpuPod, l: &Lookup) -> Option<Request> {
    let o = &l.objects;
    let ns = p.metadata.namespace.as_deref().unwrap_or_default();
    let mut out = Request::default();
    let mut any = false;
    for pc in &p.spec.resource_claims {
        let made = p.status.resource_claim_statuses.iter().find(|s| s.name == pc.name);
        let name = pc.resource_claim_name.as_deref().or_else(|| made.and_then(|m| m.resource_claim_name.as_deref()));
        let claim = name.and_then(|n| l.claims.get(&(ns, n)));
        if let Some(c) = claim {
            match &c.status.allocation {
                Some(a) => any |= of_allocation(l.devices, a, &mut out),
                None => any |= of_spec(o, &c.spec, &mut out),
            }
            continue;
        }
        let template = pc.resource_claim_template_name.as_deref().and_then(|t| l.templates.get(&(ns, t)));
        if let Some(t) = template {
            any |= of_spec(o, &t.spec.spec, &mut out);
        }
    }
    (any && out.wants_gpu()).then_some(out)
}

/// The specs of the pod's claims not allocated yet (or not made yet: their templates').
pub fn unallocated<'a>(p: &GpuPod, l: &Lookup<'a>) -> Vec<&'a ClaimSpec> {
    let ns = p.metadata.namespace.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    for pc in &p.spec.resource_claims {
        let made = p.status.resource_claim_statuses.iter().find(|s| s.name == pc.name);
        let name = pc.resource_claim_name.as_deref().or_else(|| made.and_then(|m| m.resource_claim_name.as_deref()));
        match name.and_then(|n| l.claims.get(&(ns, n))) {
            Some(c) if c.status.allocation.is_none() => out.push(&c.spec),
            Some(_) => {}
            None => {
                let t = pc.resource_claim_template_name.as_deref().and_then(|t| l.templates.get(&(ns, t)));
                out.extend(t.map(|t| &t.spec.spec));
            }
        }
    }
    out
}

/// The objects the lookup was made of.
impl<'a> Lookup<'a> {
    pub fn objects(&self) -> &Objects<'a> {
        &self.objects
    }
}

/// What an allocated claim got: its GPU driver's devices, whole or MIG.
fn of_allocation(devices: &Devices, a: &super::objects::AllocationResult, out: &mut Request) -> bool {
    let mut any = false;
    for r in a.devices.results.items.iter().filter(|r| &*r.driver == GPU_DRIVER) {
        let Some(dev) = devices.get(&r.pool, &r.device) else { continue };
        any = true;
        if out.model.is_none() {
            out.model = dev.attributes.product.as_deref().map(str::to_string);
        }
        match (dev.attributes.kind.as_deref(), dev.attributes.profile.as_deref()) {
            (Some("mig"), Some(p)) if out.mig_profile.is_none() => {
                out.mig_profile = Some(p.to_string());
                out.gpus = Some(1);
            }
            (Some("gpu"), _) => out.gpus = Some(out.gpus.unwrap_or(0).saturating_add(1)),
            _ => {}
        }
    }
    any
}

#[cfg(test)]
mod tests {
    use super::cel_equals;

    #[test]
    fn the_common_cel_forms_are_read() {
        let e = "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'";
        assert_eq!(cel_equals(e, "profile"), Some("1g.10gb"));
        let e = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'";
        assert_eq!(cel_equals(e, "type"), Some("gpu"));
        assert_eq!(cel_equals("device.attributes['x'].productName==\"H100\"", "productName"), Some("H100"));
        assert_eq!(
            cel_equals("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('10Gi')) >= 0", "profile"),
            None
        );
    }
}
