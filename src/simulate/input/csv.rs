//! The project's own demand CSV: one job a line under a header, columns found by name (order
//! free, unknown columns ignored, `#` lines and blank lines skipped). docs/simulate.md
//! ("Feeding your own history") is its reference; `scripts/sacct-to-demand` writes it from
//! Slurm's accounting.
//!
//! `submit` (RFC 3339 time, or seconds from the demand's start) and `duration` (seconds, or
//! `90m`, `2h`, `1h30m`) are required; `gpus` (default 1), `fraction` (0–1 of one card) or
//! `gpu_memory` (`15GiB`), `mig_profile` (`1g.10gb`), `class`, `priority`, `checkpoint`,
//! `name`, `model`, `use`, `cpus` and `host_memory` are optional.

use std::io::BufRead;

use chrono::{DateTime, NaiveDateTime, Utc};

use super::{LineError, Parsed, rows};
use crate::simulate::fleet::Model;
use crate::simulate::job::{Class, Job, milli_of_slices};

/// The most GPUs one job may ask for.
pub const MAX_GPUS: u32 = 4096;

/// The compute share a job that gives only `gpu_memory` asks for: one slice of seven, so that
/// its memory decides where it fits.
pub const MEMORY_ONLY_MILLI: u32 = 142;

type Bad = (String, String);

fn bad(field: &str, why: impl std::fmt::Display) -> Bad {
    (field.to_string(), why.to_string())
}

/// A time as the file writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    Seconds(i64),
    /// Unix seconds of an RFC 3339 time (or one without offset, read as UTC).
    Clock(i64),
}

fn submit(text: &str) -> Result<When, String> {
    let t = text.trim();
    if let Ok(s) = t.parse::<f64>() {
        if !(0.0..1e12).contains(&s) {
            return Err(format!("{t}: seconds from the demand's start, from 0"));
        }
        return Ok(When::Seconds(s.round() as i64));
    }
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Ok(When::Clock(d.timestamp()));
    }
    for f in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(d) = NaiveDateTime::parse_from_str(t, f) {
            return Ok(When::Clock(d.and_utc().timestamp()));
        }
    }
    Err(format!("{t:?}: expected an RFC 3339 time (2026-03-01T09:30:00Z) or seconds from the start"))
}

/// Seconds, or a duration with units (`90m`, `1h30m`, `500ms`: rounded up to a second).
fn seconds(text: &str) -> Result<i64, String> {
    let t = text.trim();
    if let Ok(s) = t.parse::<f64>() {
        if !(0.0..=crate::units::duration::MAX.as_secs_f64()).contains(&s) {
            return Err(format!("{t}: seconds from 0 to ten years"));
        }
        return Ok(s.ceil() as i64);
    }
    let d = crate::units::duration::parse(t).map_err(|e| e.to_string())?;
    Ok(d.as_secs() as i64 + i64::from(d.subsec_nanos() > 0))
}

/// A MIG profile's compute share and memory, from the first catalog model that has it.
pub fn mig_profile(name: &str) -> Option<(u32, u64)> {
    crate::model::mig::catalog::catalog()
        .models
        .iter()
        .find_map(|m| m.profile(name).map(|p| (milli_of_slices(p.compute_slices, m.compute_slices), p.planning_mib())))
}

/// What one job asks of a card: its compute share (thousandths) and memory (MiB), from
/// `mig_profile`, `fraction` or `gpu_memory` (a whole card where none is given).
fn share<'a>(get: &impl Fn(&str) -> Result<Option<&'a str>, Bad>, gpus: u32) -> Result<(u32, u64), Bad> {
    let fraction = match get("fraction")? {
        Some(t) => {
            let f: f64 = t.parse().map_err(|_| bad("fraction", format!("{t:?} is not a number from 0 to 1")))?;
            if !(f > 0.0 && f <= 1.0) {
                return Err(bad("fraction", format!("{t}: a share of one GPU, above 0 and at most 1")));
            }
            Some(((f * 1000.0).round() as u32).clamp(1, 1000))
        }
        None => None,
    };
    let memory = match get("gpu_memory")? {
        Some(t) => Some(crate::units::parse_size(t).map_err(|w| bad("gpu_memory", w.to_string()))?.div_ceil(1 << 20)),
        None => None,
    };
    let profile = match get("mig_profile")? {
        Some(p) => {
            if fraction.is_some() || memory.is_some() {
                return Err(bad(
                    "mig_profile",
                    "a MIG profile sets compute and memory: leave fraction and gpu_memory empty",
                ));
            }
            Some(
                mig_profile(p)
                    .ok_or_else(|| bad("mig_profile", format!("{p:?}: no model of the MIG catalog has it")))?,
            )
        }
        None => None,
    };
    let (milli, mem_mib) = match (profile, fraction, memory) {
        (Some((m, mem)), _, _) => (m, mem),
        (None, Some(f), mem) => (f, mem.unwrap_or(0)),
        (None, None, Some(mem)) if gpus == 1 => (MEMORY_ONLY_MILLI, mem),
        (None, None, mem) => (1000, mem.unwrap_or(0)),
    };
    if milli < 1000 && gpus > 1 {
        let field = if profile.is_some() { "mig_profile" } else { "fraction" };
        return Err(bad(field, format!("a share is of one GPU: {gpus} GPUs with a share (write gpus 1)")));
    }
    Ok((milli, mem_mib))
}

/// A job's optional columns beyond its size.
struct Extras {
    class: Class,
    priority: i32,
    checkpoint_s: Option<u32>,
    use_milli: u32,
    cpu_milli: u32,
    host_mem_mib: u64,
    models: Vec<Box<str>>,
}

/// A job's class, priority, checkpoint interval, real use, host CPUs and memory, and models.
fn extras<'a>(get: &impl Fn(&str) -> Result<Option<&'a str>, Bad>) -> Result<Extras, Bad> {
    let class = match get("class")? {
        Some(t) => {
            Class::parse(t).ok_or_else(|| bad("class", format!("{t:?}: expected inference, training or other")))?
        }
        None => Class::Other,
    };
    let priority = match get("priority")? {
        Some(t) => {
            let p: i64 = t.parse().map_err(|_| bad("priority", format!("{t:?} is not a whole number")))?;
            p.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
        }
        None => 0,
    };
    let checkpoint_s = match get("checkpoint")? {
        Some(t) => {
            let s = seconds(t).map_err(|w| bad("checkpoint", w))?;
            Some(u32::try_from(s.max(1)).map_err(|_| bad("checkpoint", format!("{t}: too long an interval")))?)
        }
        None => None,
    };
    let use_milli = match get("use")? {
        Some(t) => {
            let u: f64 = t.parse().map_err(|_| bad("use", format!("{t:?} is not a number from 0 to 1")))?;
            if !(0.0..=1.0).contains(&u) {
                return Err(bad("use", format!("{t}: the share of the request really used, 0 to 1")));
            }
            (u * 1000.0).round() as u32
        }
        None => 1000,
    };
    let cpu_milli = match get("cpus")? {
        Some(t) => {
            let c: f64 = t.parse().map_err(|_| bad("cpus", format!("{t:?} is not a number of cores")))?;
            if !(0.0..4_000_000.0).contains(&c) {
                return Err(bad("cpus", format!("{t}: cores from 0")));
            }
            (c * 1000.0).round() as u32
        }
        None => 0,
    };
    let host_mem_mib = match get("host_memory")? {
        Some(t) => crate::units::parse_size(t).map_err(|w| bad("host_memory", w.to_string()))?.div_ceil(1 << 20),
        None => 0,
    };
    let models = match get("model")? {
        Some(m) => m.split('|').map(str::trim).filter(|m| !m.is_empty()).map(|m| Model::named(m).name).collect(),
        None => Vec::new(),
    };
    Ok(Extras { class, priority, checkpoint_s, use_milli, cpu_milli, host_mem_mib, models })
}

/// The demand CSV's GPU jobs, the rest counted. Times in RFC 3339 are made seconds from the
/// earliest submit (`Parsed::start`); a file uses one kind of time.
pub fn demand_csv(file: &str, r: impl BufRead, skip_bad: bool) -> Result<Parsed, LineError> {
    let mut jobs = Vec::new();
    let mut without_gpu = 0u64;
    let mut clock: Option<bool> = None;
    let (tally, n) = rows(file, r, &["submit", "duration"], skip_bad, |h, row, line| {
        let get = |name: &str| row.get(h.col(name)).map_err(|why| bad(name, why));
        let when = submit(get("submit")?.ok_or_else(|| bad("submit", "empty"))?).map_err(|w| bad("submit", w))?;
        let is_clock = matches!(when, When::Clock(_));
        match clock {
            Some(c) if c != is_clock => {
                let (here, before) =
                    if is_clock { ("an RFC 3339 time", "seconds") } else { ("seconds", "RFC 3339 times") };
                return Err(bad("submit", format!("{here} after {before} on earlier lines: a file uses one kind")));
            }
            _ => {}
        }
        let at = match when {
            When::Seconds(s) | When::Clock(s) => s,
        };
        let duration =
            seconds(get("duration")?.ok_or_else(|| bad("duration", "empty"))?).map_err(|w| bad("duration", w))?;
        let gpus: u32 = match get("gpus")? {
            Some(t) => t.parse().map_err(|_| bad("gpus", format!("{t:?} is not a count of GPUs")))?,
            None => 1,
        };
        if gpus > MAX_GPUS {
            return Err(bad("gpus", format!("{gpus} GPUs in one job (at most {MAX_GPUS})")));
        }
        let (milli, mem_mib) = share(&get, gpus)?;
        let x = extras(&get)?;
        let name: Box<str> = match get("name")? {
            Some(t) => t.into(),
            None => format!("line-{line}").into(),
        };
        clock = Some(is_clock);
        if gpus == 0 {
            without_gpu += 1;
            return Ok(());
        }
        jobs.push(Job {
            name,
            submit: at,
            duration: duration.max(1),
            gpus,
            milli,
            mem_mib,
            class: x.class,
            priority: x.priority,
            checkpoint_s: x.checkpoint_s,
            cpu_milli: x.cpu_milli,
            host_mem_mib: x.host_mem_mib,
            models: x.models,
            use_milli: x.use_milli,
        });
        Ok(())
    })?;
    let mut start = None;
    if clock == Some(true)
        && let Some(zero) = jobs.iter().map(|j| j.submit).min()
    {
        for j in &mut jobs {
            j.submit -= zero;
        }
        start = DateTime::<Utc>::from_timestamp(zero, 0);
    }
    Ok(Parsed {
        jobs,
        without_gpu,
        skipped: tally.skipped,
        first_errors: tally.first,
        rows: n,
        start,
        ..Parsed::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, skip_bad: bool) -> Result<Parsed, LineError> {
        demand_csv("demand.csv", text.as_bytes(), skip_bad)
    }

    #[test]
    fn columns_are_found_by_name_in_any_order() {
        let text = "# a comment\n\nduration,submit,owner,gpus,class,priority,checkpoint\n\
                    2h,0,ana,8,training,5,30m\n90m,600,bo,1,inference,,\n";
        let p = parse(text, false).unwrap_or_default();
        assert_eq!(p.jobs.len(), 2);
        let j = &p.jobs[0];
        assert_eq!(
            (j.submit, j.duration, j.gpus, j.milli, j.class, j.priority),
            (0, 7200, 8, 1000, Class::Training, 5)
        );
        assert_eq!((j.checkpoint_s, &*j.name), (Some(1800), "line-4"));
        let k = &p.jobs[1];
        assert_eq!((k.submit, k.duration, k.class, k.checkpoint_s), (600, 5400, Class::Inference, None));
        assert_eq!(p.start, None);
    }

    #[test]
    fn shares_come_from_a_fraction_memory_or_a_mig_profile() {
        let text = "submit,duration,fraction,gpu_memory,mig_profile\n0,60,0.25,,\n0,60,,15GiB,\n0,60,,,1g.10gb\n\
                    0,60,0.5,20GiB,\n0,60,1,,\n";
        let p = parse(text, false).unwrap_or_default();
        let got: Vec<(u32, u64)> = p.jobs.iter().map(|j| (j.milli, j.mem_mib)).collect();
        let ten = mig_profile("1g.10gb").map(|x| x.1).unwrap_or(0);
        assert!(ten >= 9 * 1024, "{ten}");
        assert_eq!(got, vec![(250, 0), (MEMORY_ONLY_MILLI, 15 * 1024), (142, ten), (500, 20 * 1024), (1000, 0)]);
        assert_eq!(mig_profile("3g.40gb").map(|x| x.0), Some(428));
    }

    #[test]
    fn rfc3339_times_count_from_the_earliest() {
        let text = "submit,duration,gpus\n2026-03-01T10:00:00Z,60,1\n2026-03-01T09:00:00+00:00,60,2\n\
                    2026-03-01 11:00:00,60,0\n";
        let p = parse(text, false).unwrap_or_default();
        assert_eq!(p.jobs.iter().map(|j| j.submit).collect::<Vec<_>>(), vec![3600, 0]);
        assert_eq!(p.without_gpu, 1);
        assert_eq!(p.start.map(|s| s.to_rfc3339()), Some("2026-03-01T09:00:00+00:00".to_string()));
    }

    #[test]
    fn bad_lines_name_the_field_and_skip_bad_counts_them() {
        let text = "submit,duration,gpus,fraction,class,mig_profile\n\
                    0,60,1,,,\n\
                    0,1h,2,0.5,,\n\
                    0,soon,1,,,\n\
                    2026-03-01T10:00:00Z,60,1,,,\n\
                    0,60,1,,admin,\n\
                    0,60,1,,,9g.1tb\n\
                    0,60\n";
        let e = parse(text, false).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("demand.csv:3: field fraction: a share is of one GPU: 2 GPUs with a share (write gpus 1)")
        );
        let p = parse(text, true).unwrap_or_default();
        assert_eq!((p.jobs.len(), p.skipped, p.rows), (1, 6, 7));
        let fields: Vec<&str> = p.first_errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, vec!["fraction", "duration", "submit", "class", "mig_profile"]);
        assert_eq!(p.first_errors[2].line, 5);
        let cut = parse("submit,duration,gpus\n0,60\n", false).err().map(|e| e.to_string());
        assert_eq!(cut.as_deref(), Some("demand.csv:2: field gpus: missing: the line has 2 of 3 fields (cut short?)"));
    }

    #[test]
    fn missing_required_columns_stop_even_with_skip_bad() {
        let e = parse("gpus,duration\n1,60\n", true).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("demand.csv:1: field submit: the header has no submit column"), "{e}");
    }
}
