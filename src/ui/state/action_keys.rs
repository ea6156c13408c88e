//! What an action key does to the console's state: the card or workload it is on, then a
//! plan request for the loop or the repartition picker.

use super::{Tab, UiState};
use crate::actions::Action;
use crate::model::Fleet;
use crate::ui::dialogs::{Request, picker};
use crate::ui::keymap::Intent;

/// An action key: the card it is on (fleet view or an open card) or the workload
/// (workloads view), then a plan request or the repartition picker.
pub fn on_intent(st: &mut UiState, intent: Intent, fleet: &Fleet) -> Option<Request> {
    if st.settings.read_only {
        st.footer.message = Some("read-only: actions are off".into());
        return None;
    }
    // One action at a time: a new dialog would hide the running one and lose its tracking.
    if st.action_running() {
        st.footer.message = Some("an action is running: a shows its progress; start the next when it ends".into());
        return None;
    }
    if matches!(intent, Intent::Preempt | Intent::ForcePreempt) {
        let id = st.open.workload.clone().or_else(|| {
            (st.tab == Tab::Workloads && st.open.card.is_none())
                .then(|| st.workloads.rows.get(st.workloads.selected).and_then(|&i| fleet.workloads.get(i)))
                .flatten()
                .map(|w| w.id.clone())
        });
        match id {
            Some(workload) => {
                let force = intent == Intent::ForcePreempt;
                return Some(Request::Plan(Action::Preempt { workload, force }));
            }
            None => st.footer.message = Some("preempt: select a workload in the workloads view (3)".into()),
        }
        return None;
    }
    let card = st.open.card.clone().or_else(|| (st.tab == Tab::Fleet).then(|| st.selected_card()).flatten());
    let Some(r) = card else {
        st.footer.message = Some("select a card in the fleet view (1) first".into());
        return None;
    };
    let target = r.to_string();
    match intent {
        Intent::Drain => return Some(Request::Plan(Action::Drain { target, evict: false })),
        Intent::DrainEvict => return Some(Request::Plan(Action::Drain { target, evict: true })),
        Intent::Undrain => return Some(Request::Plan(Action::Undrain { target, force: false })),
        _ => match fleet
            .card(&r)
            .ok_or_else(|| format!("{r} is gone"))
            .and_then(|c| picker(fleet, &r, c).map_err(|e| e.to_string()))
        {
            Ok(m) => st.dialog.modal = Some(m),
            Err(e) => st.footer.message = Some(e),
        },
    }
    None
}
