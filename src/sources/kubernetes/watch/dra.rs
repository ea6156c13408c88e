//! The DRA watches: find which resource.k8s.io kinds the API server serves (v1 since
//! Kubernetes 1.34; DeviceTaintRule in v1beta2 behind the DRADeviceTaintRules gate) and keep
//! one store of each current. A cluster without DRA is looked at again now and then; one
//! without DeviceTaintRules is said in a note, not taken for an error.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::{reflector, watcher};
use kube::{Api, Client};

use super::super::dra::objects::{Claim, Class, Rule, Slice, Template};
use super::super::kept::{self, Kept};
use super::{Dra, DraStores, DraSynced, PAGE, SLICE_PAGE, Shared, Slot, Synced, run};

const GROUP: &str = "resource.k8s.io";
/// How often to look again for DRA where it was not served.
const RECHECK: Duration = Duration::from_secs(300);
/// How soon to try again when looking failed.
const RETRY: Duration = Duration::from_secs(30);

/// What the group serves: the v1 kinds, and DeviceTaintRules.
struct Served {
    v1: bool,
    rules: bool,
}

async fn discover(client: &Client) -> Result<Served, kube::Error> {
    let group = match kube::discovery::group(client, GROUP).await {
        Ok(g) => g,
        Err(kube::Error::Discovery(_)) => return Ok(Served { v1: false, rules: false }),
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Served { v1: false, rules: false }),
        Err(e) => return Err(e),
    };
    let has =
        |version: &str, plural: &str| group.versioned_resources(version).iter().any(|(ar, _)| ar.plural == plural);
    Ok(Served { v1: has("v1", "resourceslices"), rules: has("v1beta2", "devicetaintrules") })
}

/// Slices keep nothing of their metadata but what the store needs and the name.
fn strip_slice(s: &mut Slice) {
    let m = &mut s.metadata;
    m.managed_fields = None;
    m.annotations = None;
    m.labels = None;
    m.owner_references = None;
}

/// Find DRA and watch it; each kind's watch in this one task, so dropping the watches stops
/// them all.
pub(super) async fn task(client: Client, slot: Arc<Mutex<Option<DraStores>>>, shared: Shared, server: Arc<str>) {
    loop {
        match discover(&client).await {
            Ok(Served { v1: true, rules }) => {
                watch(&client, &slot, &shared, &server, rules).await;
                return;
            }
            Ok(Served { v1: false, .. }) => {
                shared.update(|h| h.dra = Dra::Absent);
                tokio::time::sleep(RECHECK).await;
            }
            Err(e) => {
                let message = super::error::describe(&e, &server);
                shared.update(|h| h.dra = Dra::Unknown(message));
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Watch each DRA kind the group serves (DeviceTaintRules where `rules`), their stores in
/// `slot` and their state in `shared`, until the watches end.
async fn watch(client: &Client, slot: &Mutex<Option<DraStores>>, shared: &Shared, server: &Arc<str>, rules: bool) {
    let (slices, w_slices) = reflector::store();
    let (claims, w_claims) = reflector::store();
    let (templates, w_templates) = reflector::store();
    let (classes, w_classes) = reflector::store();
    let (rule_store, w_rules) = reflector::store::<Rule>();
    if let Ok(mut s) = slot.lock() {
        *s = Some(DraStores { slices, claims, templates, classes, rules: rules.then_some(rule_store) });
    }
    let synced = DraSynced { rules: rules.then(Synced::default), ..DraSynced::default() };
    shared.update(|h| h.dra = Dra::Present(Box::new(synced)));
    let cfg = watcher::Config::default().page_size(PAGE);
    let slices = run(
        Api::<Slice>::all(client.clone()),
        watcher::Config::default().page_size(SLICE_PAGE),
        (w_slices, Kept::new(kept::SLICES), ()),
        strip_slice,
        Slot::Slices,
        shared.clone(),
        server.clone(),
    );
    let claims = run(
        Api::<Claim>::all(client.clone()),
        cfg.clone(),
        (w_claims, Kept::new(kept::PODS), ()),
        super::strip_meta::<Claim>,
        Slot::Claims,
        shared.clone(),
        server.clone(),
    );
    let templates = run(
        Api::<Template>::all(client.clone()),
        cfg.clone(),
        (w_templates, Kept::new(kept::PODS), ()),
        super::strip_meta::<Template>,
        Slot::Templates,
        shared.clone(),
        server.clone(),
    );
    let classes = run(
        Api::<Class>::all(client.clone()),
        cfg.clone(),
        (w_classes, Kept::new(kept::CLASSES), ()),
        super::strip_meta::<Class>,
        Slot::DeviceClasses,
        shared.clone(),
        server.clone(),
    );
    let rule_watch = async {
        if rules {
            let store = (w_rules, Kept::new(kept::SLICES), ());
            let api = Api::<Rule>::all(client.clone());
            run(api, cfg.clone(), store, super::strip_meta::<Rule>, Slot::TaintRules, shared.clone(), server.clone())
                .await;
        }
    };
    tokio::join!(slices, claims, templates, classes, rule_watch);
}
