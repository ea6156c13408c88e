//! Event sets: registration of event types per card, and delivery of the scenario's queued XID
//! errors, each exactly once.

use std::collections::BTreeMap;

use nvml_wrapper_sys::bindings::{
    nvmlEventMigConfigChange, nvmlEventTypeClock, nvmlEventTypeDoubleBitEccError, nvmlEventTypePState,
    nvmlEventTypePowerSourceChange, nvmlEventTypeSingleBitEccError, nvmlEventTypeXidCriticalError,
};

use super::{Card, Handle, INVALID_ARGUMENT, NOT_SUPPORTED, NvmlResult, State};

impl State {
    /// Event types a physical card supports.
    pub fn supported_event_types(card: &Card) -> u64 {
        let mig = if card.model.is_some() { nvmlEventMigConfigChange } else { 0 };
        u64::from(
            nvmlEventTypeSingleBitEccError
                | nvmlEventTypeDoubleBitEccError
                | nvmlEventTypePState
                | nvmlEventTypeXidCriticalError
                | nvmlEventTypeClock
                | nvmlEventTypePowerSourceChange
                | mig,
        )
    }

    pub fn create_event_set(&mut self) -> Handle {
        let id = self.next_event_set;
        self.next_event_set += 1;
        self.event_sets.insert(id, BTreeMap::new());
        Handle::EventSet(id)
    }

    fn event_set_id(&self, raw: usize) -> NvmlResult<u32> {
        match Handle::decode(raw) {
            Some(Handle::EventSet(id)) if self.event_sets.contains_key(&id) => Ok(id),
            _ => Err(INVALID_ARGUMENT),
        }
    }

    pub fn free_event_set(&mut self, raw: usize) -> NvmlResult<()> {
        let id = self.event_set_id(raw)?;
        self.event_sets.remove(&id);
        Ok(())
    }

    pub fn register_events(&mut self, raw_dev: usize, types: u64, raw_set: usize) -> NvmlResult<()> {
        let card = self.physical(raw_dev, "nvmlDeviceRegisterEvents")?;
        if types & !Self::supported_event_types(card) != 0 {
            return Err(NOT_SUPPORTED);
        }
        let index = card.index;
        let set = self.event_set_id(raw_set)?;
        *self.event_sets.entry(set).or_default().entry(index).or_default() |= types;
        Ok(())
    }

    /// Takes the first queued XID for a card that registered XID events on this set:
    /// (card, xid), or None when nothing is queued for it.
    pub fn take_event(&mut self, raw_set: usize) -> NvmlResult<Option<(usize, u64)>> {
        let set = &self.event_sets[&self.event_set_id(raw_set)?];
        let xid = u64::from(nvmlEventTypeXidCriticalError);
        let pos = self.events.iter().position(|e| set.get(&e.card).is_some_and(|mask| mask & xid != 0));
        Ok(pos.and_then(|i| self.events.remove(i)).map(|e| (e.card, e.xid)))
    }
}
