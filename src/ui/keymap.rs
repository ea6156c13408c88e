//! The keymap: one table of (keys, intent, description) that the router, the footer hints and
//! the help screen all read, so they cannot disagree.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Intent {
    Quit,
    Suspend,
    Help,
    Filter,
    Command,
    Back,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Open,
    NextView,
    ViewFleet,
    ViewQueue,
    ViewWorkloads,
    ViewSources,
    ViewAdvice,
    ShowAction,
    Sort,
    ReverseSort,
    Drain,
    DrainEvict,
    Undrain,
    Repartition,
    Preempt,
    ForcePreempt,
    ScheduleChange,
    ReplayPause,
    ReplayBack,
    ReplayForward,
    ReplaySlower,
    ReplayFaster,
    ReplayGoto,
}

impl Intent {
    /// Keys that change the cluster: absent read-only.
    pub fn is_action(self) -> bool {
        matches!(
            self,
            Self::Drain
                | Self::DrainEvict
                | Self::Undrain
                | Self::Repartition
                | Self::Preempt
                | Self::ForcePreempt
                | Self::ScheduleChange
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Ctrl(char),
    Code(KeyCode),
}

pub struct Binding {
    pub keys: &'static [Key],
    /// How the keys are written on screen.
    pub label: &'static str,
    pub intent: Intent,
    pub description: &'static str,
    /// Shown in the footer hints (the help screen lists every binding).
    pub footer: bool,
    /// An action key: absent (not routed, not shown) in read-only mode.
    pub action: bool,
}

use Key::{Char, Code, Ctrl};

pub const KEYMAP: &[Binding] = &[
    Binding {
        keys: &[Char('?')],
        label: "?",
        intent: Intent::Help,
        description: "help: every key",
        footer: true,
        action: false,
    },
    Binding {
        keys: &[Char('1')],
        label: "1",
        intent: Intent::ViewFleet,
        description: "fleet view: cards by node",
        footer: true,
        action: false,
    },
    Binding {
        keys: &[Char('2')],
        label: "2",
        intent: Intent::ViewQueue,
        description: "queue view: pending work and demand",
        footer: true,
        action: false,
    },
    Binding {
        keys: &[Char('3')],
        label: "3",
        intent: Intent::ViewWorkloads,
        description: "workloads view: running work",
        footer: true,
        action: false,
    },
    Binding {
        keys: &[Char('4')],
        label: "4",
        intent: Intent::ViewSources,
        description: "sources view: each source's state, last success, counts, full error (:sources)",
        footer: false,
        action: false,
    },
    Binding {
        keys: &[Char('5')],
        label: "5",
        intent: Intent::ViewAdvice,
        description: "advice view: waste, its cost, what to do (:advice)",
        footer: true,
        action: false,
    },
    Binding {
        keys: &[Char('a')],
        label: "a",
        intent: Intent::ShowAction,
        description: "act on the selected advice (Advice view); while an action runs, show its progress again",
        footer: false,
        action: false,
    },
    Binding {
        keys: &[Code(KeyCode::Tab)],
        label: "Tab",
        intent: Intent::NextView,
        description: "next view",
        footer: false,
        action: false,
    },
    Binding {
        keys: &[Char('/')],
        label: "/",
        intent: Intent::Filter,
        description: "filter every list: text and terms (listed below)",
        footer: true,
        action: false,
    },
    Binding {
        keys: &[Char(':')],
        label: ":",
        intent: Intent::Command,
        description: "command: node NAME, fit 3g.40gb|4|WORKLOAD, fleet, queue, workloads, sources, advice, q",
        footer: true,
        action: false,
    },
    Binding {
        keys: &[Char('s')],
        label: "s",
        intent: Intent::Sort,
        description: "sort: cycle node, util, memory, temp, power, free, health; advice: severity or cost first",
        footer: true,
        action: false,
    },
    Binding {
        keys: &[Char('S')],
        label: "S",
        intent: Intent::ReverseSort,
        description: "reverse the sort",
        footer: false,
        action: false,
    },
    Binding {
        keys: &[Code(KeyCode::Enter)],
        label: "Enter",
        intent: Intent::Open,
        description: "open the selected card, a workload (queue, workloads), or a finding in full (advice)",
        footer: true,
        action: false,
    },
    Binding {
        keys: &[Code(KeyCode::Esc)],
        label: "Esc",
        intent: Intent::Back,
        description: "back: close help, clear the filter, leave a card",
        footer: false,
        action: false,
    },
    Binding {
        keys: &[Char('j'), Code(KeyCode::Down)],
        label: "j/↓",
        intent: Intent::Down,
        description: "down (in a card's view: the next card)",
        footer: false,
        action: false,
    },
    Binding {
        keys: &[Char('k'), Code(KeyCode::Up)],
        label: "k/↑",
        intent: Intent::Up,
        description: "up (in a card's view: the previous card)",
        footer: false,
        action: false,
    },
    Binding {
        keys: &[Code(KeyCode::PageDown), Ctrl('d')],
        label: "PgDn/^d",
        intent: Intent::PageDown,
        description: "page down",
        footer: false,
        action: false,
    },
    Binding {
        keys: &[Code(KeyCode::PageUp), Ctrl('u')],
        label: "PgUp/^u",
        intent: Intent::PageUp,
        description: "page up",
        footer: false,
        action: false,
    },
    Binding {
        keys: &[Char('g'), Code(KeyCode::Home)],
        label: "g/Home",
        intent: Intent::Top,
        description: "first row",
        footer: false,
        action: false,
    },
    Binding {
        keys: &[Char('G'), Code(KeyCode::End)],
        label: "G/End",
        intent: Intent::Bottom,
        description: "last row",
        footer: false,
        action: false,
    },
    Binding {
        keys: &[Char('d')],
        label: "d",
        intent: Intent::Drain,
        description: "drain the selected card (no new work), after confirmation",
        footer: true,
        action: true,
    },
    Binding {
        keys: &[Char('D')],
        label: "D",
        intent: Intent::DrainEvict,
        description: "drain a DRA card and evict its pods (DeviceTaintRules NoExecute; asks twice)",
        footer: false,
        action: true,
    },
    Binding {
        keys: &[Char('u')],
        label: "u",
        intent: Intent::Undrain,
        description: "undrain the selected card, after confirmation",
        footer: false,
        action: true,
    },
    Binding {
        keys: &[Char('r')],
        label: "r",
        intent: Intent::Repartition,
        description: "repartition: pick a MIG layout for the selected card",
        footer: true,
        action: true,
    },
    Binding {
        keys: &[Char('p')],
        label: "p",
        intent: Intent::Preempt,
        description: "preempt the selected training workload (workloads view)",
        footer: true,
        action: true,
    },
    Binding {
        keys: &[Char('m')],
        label: "m",
        intent: Intent::ScheduleChange,
        description: "MIG schedule: review the due change shown in the banner, run it for the group",
        footer: false,
        action: true,
    },
    Binding {
        keys: &[Char('P')],
        label: "P",
        intent: Intent::ForcePreempt,
        description: "preempt before the minimum runtime (asks twice)",
        footer: false,
        action: true,
    },
    Binding {
        keys: &[Char('q'), Ctrl('c')],
        label: "q",
        intent: Intent::Quit,
        description: "quit",
        footer: true,
        action: false,
    },
    Binding {
        keys: &[Ctrl('z')],
        label: "Ctrl-Z",
        intent: Intent::Suspend,
        description: "suspend: the shell's prompt until fg (not while an action runs)",
        footer: false,
        action: false,
    },
];

/// The replay's keys: in a replay they come first (`g` goes to a time there; Home still goes
/// to the top), and nowhere else do they exist.
pub const REPLAY_KEYMAP: &[Binding] = &[
    Binding {
        keys: &[Char(' ')],
        label: "space",
        intent: Intent::ReplayPause,
        description: "replay: pause or play",
        footer: true,
        action: false,
    },
    Binding {
        keys: &[Code(KeyCode::Left)],
        label: "←/→",
        intent: Intent::ReplayBack,
        description: "replay: step one frame back (→ one on), pausing",
        footer: true,
        action: false,
    },
    Binding {
        keys: &[Code(KeyCode::Right)],
        label: "→",
        intent: Intent::ReplayForward,
        description: "replay: step one frame on, pausing",
        footer: false,
        action: false,
    },
    Binding {
        keys: &[Char('[')],
        label: "[/]",
        intent: Intent::ReplaySlower,
        description: "replay: speed halved (] doubled), 0.25× to 64×",
        footer: true,
        action: false,
    },
    Binding {
        keys: &[Char(']')],
        label: "]",
        intent: Intent::ReplayFaster,
        description: "replay: speed doubled",
        footer: false,
        action: false,
    },
    Binding {
        keys: &[Char('g')],
        label: "g",
        intent: Intent::ReplayGoto,
        description: "replay: jump to a time (03:12, 2026-11-30 03:12, -10m)",
        footer: true,
        action: false,
    },
];

/// How a binding's keys are written where `replay` may take some of them.
pub fn label(b: &Binding, replay: bool) -> &'static str {
    match b.intent {
        Intent::Top if replay => "Home",
        _ => b.label,
    }
}

fn matches(key: &Key, ev: &KeyEvent) -> bool {
    let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
    match (key, ev.code) {
        (Char(c), KeyCode::Char(e)) => !ctrl && *c == e,
        (Ctrl(c), KeyCode::Char(e)) => ctrl && c.eq_ignore_ascii_case(&e),
        (Code(c), code) => *c == code,
        _ => false,
    }
}

/// The bindings in effect: without the action keys in read-only mode.
pub fn bindings(read_only: bool) -> impl Iterator<Item = &'static Binding> {
    KEYMAP.iter().filter(move |b| !(read_only && b.action))
}

/// The same in a replay (always read-only): the replay's keys first.
pub fn bindings_for(read_only: bool, replay: bool) -> impl Iterator<Item = &'static Binding> {
    REPLAY_KEYMAP.iter().filter(move |_| replay).chain(bindings(read_only || replay))
}

/// The intent a key press means, from the same table the help screen shows.
pub fn route(ev: &KeyEvent, read_only: bool) -> Option<Intent> {
    bindings(read_only).find(|b| b.keys.iter().any(|k| matches(k, ev))).map(|b| b.intent)
}

/// The same in a replay: its keys first.
pub fn route_for(ev: &KeyEvent, read_only: bool, replay: bool) -> Option<Intent> {
    bindings_for(read_only, replay).find(|b| b.keys.iter().any(|k| matches(k, ev))).map(|b| b.intent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, m)
    }

    fn route_rw(ev: &KeyEvent) -> Option<Intent> {
        route(ev, false)
    }

    #[test]
    fn action_keys_do_not_exist_read_only() {
        let d = key(KeyCode::Char('d'), KeyModifiers::NONE);
        assert_eq!(route(&d, false), Some(Intent::Drain));
        assert_eq!(route(&d, true), None);
        assert!(bindings(true).all(|b| !b.action));
    }

    #[test]
    fn routes_from_the_table() {
        assert_eq!(route_rw(&key(KeyCode::Char('q'), KeyModifiers::NONE)), Some(Intent::Quit));
        assert_eq!(route_rw(&key(KeyCode::Char('c'), KeyModifiers::CONTROL)), Some(Intent::Quit));
        assert_eq!(route_rw(&key(KeyCode::Char('c'), KeyModifiers::NONE)), None);
        assert_eq!(route_rw(&key(KeyCode::Down, KeyModifiers::NONE)), Some(Intent::Down));
        assert_eq!(route_rw(&key(KeyCode::Char('G'), KeyModifiers::SHIFT)), Some(Intent::Bottom));
    }

    #[test]
    fn replay_keys_exist_only_in_a_replay_and_g_goes_to_a_time_there() {
        let g = key(KeyCode::Char('g'), KeyModifiers::NONE);
        assert_eq!(route_for(&g, true, false), Some(Intent::Top));
        assert_eq!(route_for(&g, true, true), Some(Intent::ReplayGoto));
        let space = key(KeyCode::Char(' '), KeyModifiers::NONE);
        assert_eq!(route_for(&space, false, false), None);
        assert_eq!(route_for(&space, false, true), Some(Intent::ReplayPause));
        // A replay is read-only: no action key.
        assert_eq!(route_for(&key(KeyCode::Char('d'), KeyModifiers::NONE), false, true), None);
        assert_eq!(route_for(&key(KeyCode::Home, KeyModifiers::NONE), false, true), Some(Intent::Top));
        // No replay key is bound twice, nor shadows another except g.
        let all: Vec<&Key> = REPLAY_KEYMAP.iter().flat_map(|b| b.keys).collect();
        for (i, k) in all.iter().enumerate() {
            assert!(!all[i + 1..].contains(k), "{k:?} bound twice");
            let shadowed = KEYMAP.iter().filter(|b| b.keys.contains(k)).map(|b| b.intent).collect::<Vec<_>>();
            assert!(shadowed.is_empty() || shadowed == [Intent::Top], "{k:?} shadows {shadowed:?}");
        }
    }

    #[test]
    fn no_key_is_bound_twice() {
        let all: Vec<&Key> = KEYMAP.iter().flat_map(|b| b.keys).collect();
        for (i, k) in all.iter().enumerate() {
            assert!(!all[i + 1..].contains(k), "{k:?} bound twice");
        }
    }
}
