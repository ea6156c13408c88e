//! The schedule change for a group of cards in the console: the banner's key opens the group
//! plan; the operator types the schedule's name once for the whole group (and answers a second
//! question when training would be preempted); the run's dialog follows it card by card and can
//! be hidden, or stopped after the action under way. Pure: keys in, requests out.

use crossterm::event::{KeyCode, KeyEvent};

use super::modal::{Answer, Modal, Request};
use crate::schedule::group::GroupRun;
use crate::ui::sheet::{Sheet, Tone};

/// A key in a group dialog.
pub fn on_key(modal: &mut Modal, k: &KeyEvent) -> Answer {
    match modal {
        Modal::Group { plan, typed, second, .. } => {
            let cancelled = || Answer::Close(format!("schedule {} change cancelled: nothing done", plan.schedule));
            if k.code == KeyCode::Esc {
                return cancelled();
            }
            if plan.cards.is_empty() {
                return Answer::Stay;
            }
            if *second {
                return match k.code {
                    KeyCode::Char('y') => Answer::Request(Request::RunGroup(plan.clone())),
                    KeyCode::Char('n') => cancelled(),
                    _ => Answer::Stay,
                };
            }
            match k.code {
                KeyCode::Char(c) => typed.push(c),
                KeyCode::Backspace => {
                    typed.pop();
                }
                KeyCode::Enter if *typed == plan.schedule => {
                    // Nothing is preempted without its own yes.
                    if plan.preempts.is_empty() {
                        return Answer::Request(Request::RunGroup(plan.clone()));
                    }
                    *second = true;
                }
                _ => {}
            }
            Answer::Stay
        }
        Modal::GroupRunning { run, .. } => match k.code {
            KeyCode::Esc | KeyCode::Enter if run.finished() => Answer::Close(run.summary()),
            KeyCode::Esc => Answer::Hide,
            KeyCode::Char('x') => {
                run.stop("stopped by the operator");
                Answer::Stay
            }
            _ => Answer::Stay,
        },
        _ => Answer::Stay,
    }
}

/// The confirmation's question, as the dialog shows it.
pub fn prompt(modal: &Modal) -> String {
    match modal {
        Modal::Group { plan, .. } if plan.cards.is_empty() => "no card can take the change now: Esc closes".into(),
        Modal::Group { plan, second: true, .. } => format!(
            "preempt the {} listed (training past the minimum runtime: checkpoint, requeue)?  y/n",
            crate::units::count(plan.preempts.len() as u64, "workload", "workloads")
        ),
        Modal::Group { plan, typed, .. } => {
            let on = crate::units::count(plan.cards.len() as u64, "card", "cards");
            format!("type {} and Enter to run it on {on} (Esc cancels): {typed}", plan.schedule)
        }
        _ => String::new(),
    }
}

/// The group change's confirmation: the schedule, window and time; one line per card (its
/// steps), the cards left for later; the warnings, how it runs, the workloads a second answer
/// would preempt; the question.
pub fn sheet(modal: &Modal) -> Sheet {
    let Modal::Group { plan, second, .. } = modal else { return Sheet::default() };
    let when = if plan.ahead { format!("at {} UTC", plan.at.format("%H:%M")) } else { "due now".into() };
    let head = vec![(
        format!(
            "schedule {}: window {} {when} · running = {} · {} in this run",
            plan.schedule,
            plan.window,
            plan.running.as_str(),
            crate::units::count(plan.cards.len() as u64, "card", "cards")
        ),
        Tone::Title,
    )];
    let mut body: Vec<Vec<(String, Tone)>> = plan
        .cards
        .iter()
        .map(|c| vec![(format!("{:<16} {}", c.card.to_string(), c.steps.join(" → ")), Tone::Text)])
        .collect();
    if !plan.left.is_empty() {
        body.push(vec![(format!("left for later ({}):", plan.left.len()), Tone::Dim)]);
        body.extend(plan.left.iter().map(|(c, why)| vec![(format!("  {:<16} {why}", c.to_string()), Tone::Dim)]));
    }
    // Warnings scroll with the plan (one per node can be many) and must be read too.
    body.extend(plan.warnings.iter().map(|w| vec![(format!("warning: {w}"), Tone::Warning)]));
    let mut foot: Vec<(String, Tone)> = Vec::new();
    foot.push((
        format!(
            "one card at a time; the first failure stops it and gives back its drains · tessera schedule apply {} --dry-run",
            plan.schedule
        ),
        Tone::Dim,
    ));
    // The second question's workloads are part of what is confirmed: they scroll with the
    // plan (there can be more than a dialog holds) and must be read too.
    if *second {
        body.push(vec![(format!("to preempt ({}):", plan.preempts.len()), Tone::Warning)]);
        body.extend(plan.preempts.iter().map(|w| vec![(format!("  preempt {w}"), Tone::Warning)]));
    }
    let tone = if *second {
        Tone::AskWarning
    } else if plan.cards.is_empty() {
        Tone::AskDanger
    } else {
        Tone::Ask
    };
    Sheet { head, body, foot, question: Some((prompt(modal), tone)), noun: "lines" }
}

/// A hidden group run in one line for the footer.
pub fn progress_line(run: &GroupRun) -> Option<String> {
    if run.finished() {
        return None;
    }
    let at = run.at_card().map(|c| format!(" at {c}")).unwrap_or_default();
    let waits = run.waiting.as_ref().map(|w| format!(" · {w}")).unwrap_or_default();
    Some(format!("{}{at}{waits} · a shows it", run.summary()))
}

/// The confirmation of a group plan.
pub fn confirm(plan: crate::schedule::group::GroupPlan) -> Modal {
    Modal::Group { plan: Box::new(plan), typed: String::new(), second: false, scroll: Default::default() }
}

/// The run dialog for a confirmed group plan.
pub fn running(plan: crate::schedule::group::GroupPlan) -> Modal {
    Modal::GroupRunning { run: Box::new(GroupRun::new(plan)), current: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::group::{CardChange, GroupPlan};
    use crossterm::event::KeyModifiers;

    fn plan(preempts: &[&str]) -> Box<GroupPlan> {
        let at = chrono::DateTime::<chrono::Utc>::default();
        Box::new(GroupPlan {
            schedule: "h100".into(),
            window: "day".into(),
            at,
            running: crate::model::schedule::Running::Preempt,
            cards: vec![CardChange {
                card: crate::model::CardRef::new("n", 0),
                at,
                layout: "whole".into(),
                drain: !preempts.is_empty(),
                preempt: Vec::new(),
                repartition: None,
                steps: vec!["repartition to whole".into()],
            }],
            left: Vec::new(),
            preempts: preempts.iter().map(|s| s.to_string()).collect(),
            warnings: Vec::new(),
            ahead: false,
        })
    }

    fn press(m: &mut Modal, keys: &str) -> Answer {
        let mut last = Answer::Stay;
        for c in keys.chars() {
            let code = if c == '\n' { KeyCode::Enter } else { KeyCode::Char(c) };
            last = on_key(m, &KeyEvent::new(code, KeyModifiers::NONE));
        }
        last
    }

    #[test]
    fn the_group_runs_only_after_its_name_is_typed() {
        let mut m = Modal::Group { plan: plan(&[]), typed: String::new(), second: false, scroll: Default::default() };
        assert_eq!(press(&mut m, "y\n"), Answer::Stay, "y is not the name");
        let mut m = Modal::Group { plan: plan(&[]), typed: String::new(), second: false, scroll: Default::default() };
        assert!(matches!(press(&mut m, "h100\n"), Answer::Request(Request::RunGroup(_))));
        let esc = on_key(&mut m, &KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        assert_eq!(esc, Answer::Close("schedule h100 change cancelled: nothing done".into()));
    }

    #[test]
    fn preemption_is_asked_for_on_its_own() {
        let mut m = Modal::Group {
            plan: plan(&["sim:7 llm-ft"]),
            typed: String::new(),
            second: false,
            scroll: Default::default(),
        };
        assert_eq!(press(&mut m, "h100\n"), Answer::Stay);
        assert!(prompt(&m).starts_with("preempt the 1 workload listed"), "{}", prompt(&m));
        assert_eq!(press(&mut m, "n"), Answer::Close("schedule h100 change cancelled: nothing done".into()));
        let mut m = Modal::Group {
            plan: plan(&["sim:7 llm-ft"]),
            typed: String::new(),
            second: false,
            scroll: Default::default(),
        };
        assert!(matches!(press(&mut m, "h100\ny"), Answer::Request(Request::RunGroup(_))));
    }

    #[test]
    fn a_running_group_hides_stops_and_closes_with_its_summary() {
        let mut m = running(*plan(&[]));
        assert_eq!(on_key(&mut m, &KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)), Answer::Hide);
        assert_eq!(press(&mut m, "x"), Answer::Stay);
        let Modal::GroupRunning { run, .. } = &mut m else { panic!("running") };
        let fleet = crate::model::Fleet::default();
        assert_eq!(run.next(&fleet, chrono::DateTime::default()), crate::schedule::group::Next::Finished);
        let closed = on_key(&mut m, &KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert!(
            matches!(closed, Answer::Close(ref s) if s.contains("0 of 1 card changed; stopped by the operator")),
            "{closed:?}"
        );
    }
}
