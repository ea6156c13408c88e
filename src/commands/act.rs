//! `tessera drain|undrain|repartition|preempt`: collect once, plan, show the plan, refuse (exit
//! 3) or stop (`--dry-run`), ask y/N unless `--yes`, then audit, execute, audit.

use std::io::{BufRead, IsTerminal, Write};

use chrono::Utc;

use super::{CmdError, first_answers, settings};
use crate::actions::execute::{self, Env, Progress};
use crate::actions::plan::{Options, plan};
use crate::actions::{Action, Target, audit};
use crate::cli::{ActOptions, Global};
use crate::store::Store;

pub fn act(g: &Global, action: Action, how: ActOptions) -> Result<(), CmdError> {
    let cfg = settings(g)?;
    let audit_path = audit::default_path();
    let rt = crate::commands::runtime()?;
    rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let mut store = Store::new();
        let handles = crate::sources::spawn_all(&cfg, &mut store, tx).map_err(CmdError::Usage)?;
        first_answers(&mut store, &mut rx).await;
        let force = matches!(action, Action::Preempt { force: true, .. });
        let mut opts = Options::new(&cfg, force, Utc::now());
        if let (Action::Undrain { target }, Some(path)) = (&action, &audit_path)
            && let Target::Card(r) = Target::parse(target)
        {
            opts.previous_mode = audit::previous_compute_mode(path, &r.to_string());
        }
        let p = plan(&action, store.fleet(), &opts).map_err(CmdError::Usage)?;
        print!("{}", p.render());
        if !p.allowed() {
            // Refused attempts are audited too (best effort: the refusal stands either way).
            if let Some(path) = &audit_path {
                let _ = audit::append(path, &audit::refused(&p));
            }
            return Err(CmdError::Refused(p.blockers.join("; ")));
        }
        if how.dry_run {
            println!("dry run: nothing done");
            return Ok(());
        }
        if !how.yes {
            confirm(&format!("{} {}?", p.action.verb(), p.target))?;
            if let Some(q) = &p.second_confirmation {
                confirm(q)?;
            }
            // The sources kept reporting while the operator read the plan: plan again and run
            // only what was confirmed.
            while let Ok(update) = rx.try_recv() {
                store.apply_deferred(update, Utc::now());
            }
            store.rebuild();
            opts.ctx.now = Utc::now();
            let again = plan(&action, store.fleet(), &opts).map_err(CmdError::Usage)?;
            if again.steps != p.steps || again.blockers != p.blockers {
                print!("the cluster changed while you read the plan; the plan now:\n{}", again.render());
                return Err(CmdError::Failed("not run: the plan changed; run the command again".into()));
            }
        }
        let path =
            audit_path.ok_or_else(|| CmdError::Failed("no audit log path (set XDG_STATE_HOME or HOME)".into()))?;
        // No audit, no action.
        audit::append(&path, &audit::intent(&p)).map_err(CmdError::Failed)?;
        let env = Env {
            read_only: cfg.read_only,
            sim: handles.sim.clone(),
            nvml_lib: cfg.sources.nvml.clone().flatten(),
            command_timeout: cfg.slurm.timeout,
            kubernetes: crate::sources::kubernetes_settings(&cfg),
        };
        let (ptx, mut prx) = tokio::sync::mpsc::unbounded_channel();
        let steps = p.steps.clone();
        let printer = tokio::spawn(async move {
            while let Some(ev) = prx.recv().await {
                match ev {
                    Progress::Started { step } => {
                        let what = steps.get(step).map_or("", |s| s.what.as_str());
                        println!("  [{}/{}] {what} ...", step + 1, steps.len());
                    }
                    Progress::Done { message, .. } => println!("        done: {message}"),
                    Progress::Failed { message, .. } => println!("        FAILED: {message}"),
                }
                let _ = std::io::stdout().flush();
            }
        });
        let outcome = execute::execute(&p, &env, Some(ptx)).await;
        let _ = printer.await;
        let logged = audit::append(&path, &audit::outcome(&p, &outcome));
        println!("{}: {}", if outcome.ok { "done" } else { "failed" }, outcome.reached);
        if let Err(e) = logged {
            return Err(CmdError::Failed(format!("{e} (the action's result: {})", outcome.reached)));
        }
        match outcome.error {
            None => Ok(()),
            Some(e) => Err(CmdError::Failed(e)),
        }
    })
}

/// Ask y/N on the terminal; anything but y/yes is no. Without a terminal, `--yes` is needed.
fn confirm(question: &str) -> Result<(), CmdError> {
    if !std::io::stdin().is_terminal() {
        return Err(CmdError::Usage("no terminal to confirm on: pass --yes (after a --dry-run)".into()));
    }
    print!("{question} [y/N] ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(CmdError::Failed("not confirmed: nothing done".into())),
    }
}
