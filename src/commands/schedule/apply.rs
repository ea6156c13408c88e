//! `tessera schedule apply NAME`: the change due now, through the one action runner, confirmed
//! once for the group (and preemption on its own question).

use chrono::Utc;

use super::super::interrupts::Interrupts;
use super::super::settings;
use super::run::execute;
use super::{HOURS, effective, no_schedules};
use crate::cli::Global;
use crate::error::CmdError;
use crate::schedule::timelines;

/// `tessera schedule apply NAME`: the change due now, on every covered card that is ready (idle):
/// each card's repartition planned and guarded by the one action runner, all shown, confirmed
/// once, then run card by card, stopping at the first failure. Under `running = "preempt"`,
/// cards held only by eligible training are drained, the training preempted after its own
/// question, and the cards changed once empty; the rest are listed with why and left.
pub fn apply(g: &Global, name: &str, how: crate::cli::ActOptions) -> Result<(), CmdError> {
    use crate::out::say;
    let cfg = settings(g)?;
    let rt = crate::engine::runtime()?;
    rt.block_on(async {
        let mut engine = crate::engine::Engine::start(&cfg)?;
        engine.runner = engine.runner.clone().asking(super::super::act::asking(&how));
        super::super::act::say_open_intents(&engine.runner);
        engine.first_answers().await;
        let schedules = effective(&cfg, engine.store.simulated()).ok_or_else(|| no_schedules(&cfg))?;
        let Some(s) = schedules.iter().find(|s| s.name == name) else {
            let names: Vec<&str> = schedules.iter().map(|s| s.name.as_str()).collect();
            return Err(CmdError::Usage(format!("no schedule {name:?}; there is {}", names.join(", "))));
        };
        let fleet = engine.store.fleet().clone();
        let now = fleet.taken_at.unwrap_or_else(Utc::now);
        let t = timelines(std::slice::from_ref(s), &fleet, now, cfg.policy.min_runtime, HOURS).remove(0);
        let due: Vec<Due<'_>> = t
            .cards
            .iter()
            .filter_map(|c| c.steps.iter().find(|st| st.due && !st.no_op && st.skipped.is_none()).map(|st| (c, st)))
            .collect();
        let window = t.window_now.clone().unwrap_or_else(|| "none".into());
        for c in &t.conflicts {
            say(&format!("  conflict: {c}\n"));
        }
        if due.is_empty() {
            say(&format!("schedule {name}: nothing due now (window {window}: every covered card has its layout)\n"));
            return Ok(());
        }
        let (plans, by_preempting) = choose(&engine, &fleet, &due)?;
        if plans.is_empty() && by_preempting.is_empty() {
            return Err(CmdError::Refused(format!("schedule {name}: no covered card can take window {window} now")));
        }
        if how.dry_run {
            say("dry run: nothing done\n");
            return Ok(());
        }
        let mut preempted: Vec<&str> =
            by_preempting.iter().flat_map(|(_, st)| st.requires.iter().map(|n| n.workload.as_str())).collect();
        preempted.sort_unstable();
        preempted.dedup();
        if !how.yes {
            confirm(&mut engine, &plans, &preempted, &window, name, by_preempting.len()).await?;
        }
        // The drains, preemptions and give-backs of the cards to preempt are nobody's to answer
        // one by one: one with an open intent is refused and said (unless --despite-open-intent).
        let unasked = crate::actions::run::Asking::Nobody { despite: how.despite_open_intent };
        // From here a quit signal lets the action under way finish and starts no other (a
        // second leaves at once); cards this run drained are given back.
        let mut interrupts = super::super::interrupts::Interrupts::watch()?;
        run_ready(&mut engine, &mut interrupts, &plans).await?;
        engine.runner = engine.runner.clone().asking(unasked);
        let changed =
            plans.len() + preempt_all(&mut engine, &mut interrupts, &by_preempting, name, plans.len()).await?;
        say(&format!(
            "schedule {name}: window {window} applied to {}\n",
            crate::units::count(changed as u64, "card", "cards")
        ));
        Ok(())
    })
}

/// A card with a change due now, and that change.
type Due<'t> = (&'t crate::schedule::CardPlan, &'t crate::schedule::Step);

/// The due cards' plans: those ready now, each planned and guarded by the runner (a refused
/// one is said and left), and those whose holders are all eligible training (`running =
/// "preempt"`), whose drain and preemptions the runner would allow.
fn choose<'t>(
    engine: &crate::engine::Engine,
    fleet: &crate::model::Fleet,
    due: &[Due<'t>],
) -> Result<(Vec<crate::actions::Plan>, Vec<Due<'t>>), CmdError> {
    use crate::actions::Action;
    use crate::out::say;
    let mut plans = Vec::new();
    // Cards whose holders are all eligible training (`running = "preempt"`): drained,
    // preempted after their own confirmation, emptied, then changed.
    let mut by_preempting: Vec<Due<'t>> = Vec::new();
    for &(c, st) in due {
        if st.readiness.starts_with("preempts") {
            // The runner's own plans now, so a guard (read-only, a stale source) says no here.
            let drain = Action::Drain { target: c.card.to_string(), evict: false };
            let mut blocked: Vec<String> = Vec::new();
            for a in std::iter::once(drain)
                .chain(st.requires.iter().map(|n| Action::Preempt { workload: n.workload.clone(), force: false }))
            {
                match engine.runner.propose(&a, fleet) {
                    Ok(p) if !p.allowed() => blocked.push(crate::actions::guard::joined(&p.blockers)),
                    Ok(_) => {}
                    Err(e) => blocked.push(e.to_string()),
                }
            }
            if !blocked.is_empty() {
                say(&format!("  {}: left for later: {}\n", c.card, blocked.join("; ")));
                continue;
            }
            let who: Vec<String> = st.requires.iter().map(|n| format!("{} {}", n.workload, n.name)).collect();
            say(&format!(
                "  {}: drain, preempt {} (checkpoint, requeue), wait for it to empty, repartition to {}, undrain\n",
                c.card,
                who.join(", "),
                st.layout
            ));
            by_preempting.push((c, st));
            continue;
        }
        if !st.readiness.starts_with("ready") {
            say(&format!("  {}: left for later: {}\n", c.card, st.readiness));
            continue;
        }
        let action = Action::Repartition { target: c.card.to_string(), layout: st.layout.clone() };
        let p = engine.runner.propose(&action, fleet)?;
        if !p.allowed() {
            say(&format!("  {}: refused: {}\n", c.card, crate::actions::guard::joined(&p.blockers)));
            continue;
        }
        say(&p.render());
        plans.push(p);
    }
    Ok((plans, by_preempting))
}

/// Ask once for the group, on its own for the preemptions, and each card's own second question;
/// then wait for the sources' answers collected since.
async fn confirm(
    engine: &mut crate::engine::Engine,
    plans: &[crate::actions::Plan],
    preempted: &[&str],
    window: &str,
    name: &str,
    preempting: usize,
) -> Result<(), CmdError> {
    let cards = plans.len() + preempting;
    super::super::act::confirm(&format!("apply window {window} of schedule {name} to {cards} cards?"))?;
    if !preempted.is_empty() {
        // Preemption is asked for on its own: nothing is preempted without a yes to it.
        super::super::act::confirm(&format!(
            "preempt {} (training past the minimum runtime: checkpoint, requeue) for it?",
            preempted.join(", ")
        ))?;
    }
    // A card's own second question (an earlier action on it left half-done, a forced
    // step) is asked for that card.
    for p in plans {
        if let Some(q) = &p.second_confirmation {
            super::super::act::confirm(&format!("{}: {q}", p.target))?;
        }
    }
    super::super::act::fresh_answers(engine).await;
    Ok(())
}

/// Run the ready cards' plans in turn, each approved again by the runner; stop at the first
/// that is not run or fails.
async fn run_ready(
    engine: &mut crate::engine::Engine,
    interrupts: &mut Interrupts,
    plans: &[crate::actions::Plan],
) -> Result<(), CmdError> {
    use crate::actions::run::Approval;
    use crate::out::say;
    for (i, p) in plans.iter().enumerate() {
        let stopped =
            |why: String| CmdError::Failed(format!("stopped before {} ({i} of {} done): {why}", p.target, plans.len()));
        if let Some(sig) = interrupts.received() {
            return Err(stopped(format!("{sig} asked to stop")));
        }
        let approved = match engine.runner.approve(p, engine.store.fleet()) {
            Approval::Go(a) => a,
            Approval::Changed(_) => return Err(stopped("the card changed since the plan; run it again".into())),
            Approval::Refused(e) => return Err(stopped(format!("refused: {e}"))),
            Approval::Gone(e) => return Err(stopped(e.to_string())),
            Approval::NotStarted(e) => return Err(stopped(e.to_string())),
        };
        say(&format!("[{}/{}] {} ...\n", i + 1, plans.len(), p.summary));
        let finished = interrupts.run(&engine.runner, *approved, None).await?;
        let o = finished.outcome;
        say(&format!("        {}: {}\n", if o.ok { "done" } else { "failed" }, o.reached));
        if let Some(e) = finished.audit_error.map(|e| e.to_string()).or(o.error) {
            return Err(CmdError::Failed(format!("stopped at {} ({} of {} done): {e}", p.target, i, plans.len())));
        }
        engine.catch_up();
    }
    Ok(())
}

/// The cards to preempt: drain them all, then per card preempt, wait for it to empty, change
/// it and give it back; the number changed. Cards this run drained are given back on the way
/// out.
async fn preempt_all(
    engine: &mut crate::engine::Engine,
    interrupts: &mut Interrupts,
    by_preempting: &[Due<'_>],
    name: &str,
    before: usize,
) -> Result<usize, CmdError> {
    use crate::actions::Action;
    let mut changed = before;
    // Drain every card first: a job on several of them frees the others when preempted,
    // and nothing else may land there meanwhile. Only cards this run drained are undrained.
    let mut ours: Vec<crate::model::CardRef> = Vec::new();
    for (c, st) in by_preempting {
        let drain = Action::Drain { target: c.card.to_string(), evict: false };
        let why = format!("schedule {name}: window {}", st.window);
        let at = Utc::now().format("%H:%M:%S").to_string();
        if let Some(sig) = interrupts.received() {
            give_back(engine, interrupts, &ours, name).await?;
            return Err(CmdError::Failed(format!(
                "stopped before {}: {sig} asked to stop; {changed} cards changed",
                c.card
            )));
        }
        let went = execute(engine, interrupts, &drain, &why, &at).await;
        match went.map_err(|e| left_drained(e, &ours))? {
            crate::schedule::unattended::Went::Done => ours.push(c.card.clone()),
            crate::schedule::unattended::Went::NothingToDo => {}
            crate::schedule::unattended::Went::NotDone => {
                give_back(engine, interrupts, &ours, name).await?;
                return Err(CmdError::Failed(format!(
                    "stopped at {} (the drain did not happen); {changed} cards changed",
                    c.card
                )));
            }
        }
    }
    for (k, (c, st)) in by_preempting.iter().enumerate() {
        match preempt_then_change(engine, interrupts, c, st, name).await {
            Ok(true) => changed += 1,
            Ok(false) => {}
            Err(e) => {
                let rest: Vec<_> =
                    by_preempting[k..].iter().map(|(c, _)| c.card.clone()).filter(|r| ours.contains(r)).collect();
                give_back(engine, interrupts, &rest, name).await?;
                return Err(CmdError::Failed(format!("{e}; {changed} cards changed")));
            }
        }
        if ours.contains(&c.card) {
            give_back(engine, interrupts, std::slice::from_ref(&c.card), name).await?;
        }
    }
    Ok(changed - before)
}

/// Left at once (a second signal): the cards this run drained and did not give back, named.
fn left_drained(e: CmdError, cards: &[crate::model::CardRef]) -> CmdError {
    if cards.is_empty() {
        return e;
    }
    let names: Vec<String> = cards.iter().map(ToString::to_string).collect();
    CmdError::Failed(format!("{e}; left drained: {} (tessera undrain each)", names.join(", ")))
}

/// How long `apply` waits for a preempted card to empty.
const EMPTY_WITHIN: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Undrain `cards` (drained by this run), saying any that could not be; `Err` when a second
/// signal left at once.
async fn give_back(
    engine: &mut crate::engine::Engine,
    interrupts: &mut Interrupts,
    cards: &[crate::model::CardRef],
    schedule: &str,
) -> Result<(), CmdError> {
    use crate::actions::Action;
    for (k, c) in cards.iter().enumerate() {
        let at = Utc::now().format("%H:%M:%S").to_string();
        let undrain = Action::Undrain { target: c.to_string(), force: false };
        let went = execute(engine, interrupts, &undrain, &format!("schedule {schedule}: given back"), &at).await;
        if went.map_err(|e| left_drained(e, &cards[k..]))? == crate::schedule::unattended::Went::NotDone {
            crate::out::say(&format!("{at} {c} could not be undrained: run tessera undrain {c}\n"));
        }
    }
    Ok(())
}

/// On a drained card: preempt the plan's holders that still hold it (the runner's guards apply:
/// eligible training only), wait for it to empty, repartition. `Ok(false)` when it is left for
/// later (a holder outside the plan, or not empty within 15 minutes); an error stops the group.
/// The caller undrains.
async fn preempt_then_change(
    engine: &mut crate::engine::Engine,
    interrupts: &mut Interrupts,
    c: &crate::schedule::CardPlan,
    st: &crate::schedule::Step,
    schedule: &str,
) -> Result<bool, CmdError> {
    use crate::actions::Action;
    use crate::out::say;
    use crate::schedule::unattended::Went;
    let target = c.card.to_string();
    let why = format!("schedule {schedule}: window {}", st.window);
    let at = || Utc::now().format("%H:%M:%S").to_string();
    let planned: Vec<&str> = st.requires.iter().map(|n| n.workload.as_str()).collect();
    let asked = |i: &mut Interrupts| {
        i.received().map(|sig| CmdError::Failed(format!("stopped at {target}: {sig} asked to stop")))
    };
    for n in &st.requires {
        if let Some(e) = asked(interrupts) {
            return Err(e);
        }
        engine.catch_up();
        let Some(card) = engine.store.fleet().card(&c.card) else {
            return Err(CmdError::Failed(format!("stopped at {target}: the card is gone from every source")));
        };
        // Someone not in the plan holds it now: nothing is preempted for them.
        if card.holders().any(|h| !planned.contains(&h)) {
            say(&format!("{} {target}: a holder not in the plan is on it: left for later\n", at()));
            return Ok(false);
        }
        // A job on several cards was preempted for an earlier one of them already.
        if !card.holders().any(|h| h == n.workload) {
            continue;
        }
        let action = Action::Preempt { workload: n.workload.clone(), force: false };
        if execute(engine, interrupts, &action, &why, &at()).await? == Went::NotDone {
            return Err(CmdError::Failed(format!("stopped at {target}: {} was not preempted", n.workload)));
        }
    }
    let began = std::time::Instant::now();
    loop {
        engine.catch_up();
        let idle = engine.store.fleet().card(&c.card).is_some_and(|k| k.is_idle() && k.processes.is_empty());
        if idle {
            break;
        }
        if began.elapsed() >= EMPTY_WITHIN {
            say(&format!("{} {target} did not empty within 15 min: left for later\n", at()));
            return Ok(false);
        }
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
            _ = interrupts.next() => {}
        }
        if let Some(e) = asked(interrupts) {
            return Err(e);
        }
    }
    let change = Action::Repartition { target: target.clone(), layout: st.layout.clone() };
    match execute(engine, interrupts, &change, &why, &at()).await? {
        Went::Done => Ok(true),
        Went::NothingToDo => Ok(false),
        Went::NotDone => Err(CmdError::Failed(format!("stopped at {target}: the repartition did not happen"))),
    }
}
