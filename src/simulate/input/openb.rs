//! The Alibaba GPU cluster trace v2023 (alibaba/clusterdata, `cluster-trace-gpu-v2023`, the
//! trace of "Beware of Fragmentation", USENIX ATC '23): `openb_pod_list_*.csv` as jobs and
//! `openb_node_list_gpu_node.csv` as a fleet. Columns are found by their header names.
//!
//! Pods: `num_gpu` cards; `gpu_milli` the share of the one GPU of a one-GPU pod (1–1000; a
//! pod of more GPUs takes whole cards); `num_gpu` 0 asks for no GPU (counted, kept apart for
//! a packing, where it takes host CPU and memory; a replay leaves it out);
//! `gpu_spec` the allowed models (`|`-separated, empty: any); `qos` LS → inference (never
//! preempted), BE → training (preemptible), Burstable and Guaranteed → other; submit =
//! `creation_time`; duration = `deletion_time − scheduled_time` where it was scheduled (the
//! time it ran), else `deletion_time − creation_time`; `cpu_milli` and `memory_mib` the host's
//! CPU and memory; the real use is the request (the trace has no utilisation). A list without
//! time columns (the paper's `name,cpu_milli,memory_mib,num_gpu,gpu_milli` variants) is read
//! for a packing: every pod at second 0, `timeless` set.
//!
//! Nodes: `sn`, `cpu_milli`, `memory_mib`, `gpu` (count), `model`; nodes without GPUs are left
//! out.

use std::io::BufRead;

use super::{LineError, Parsed, Row, rows};
use crate::simulate::fleet::{Fleet, Model, Node};
use crate::simulate::job::{Class, Job};

/// The most GPUs one row may ask for or one node hold: more is damage, not a pod.
pub const MAX_GPUS: u32 = 4096;

type Bad = (String, String);

fn bad(field: &str, why: impl std::fmt::Display) -> Bad {
    (field.to_string(), why.to_string())
}

/// The field `name` of `row`, required.
fn need<'a>(row: &'a Row, col: Option<usize>, name: &str) -> Result<&'a str, Bad> {
    row.get(col).map_err(|why| bad(name, why))?.ok_or_else(|| bad(name, "empty"))
}

fn number<T: std::str::FromStr>(text: &str, name: &str, what: &str) -> Result<T, Bad> {
    text.trim().parse().map_err(|_| bad(name, format!("{text:?} is not {what}")))
}

/// A time of the trace: whole seconds from its start, not negative.
fn time(text: &str, name: &str) -> Result<i64, Bad> {
    let t: i64 = number(text, name, "a time in whole seconds")?;
    if t < 0 {
        return Err(bad(name, format!("{t}: a time before the trace's start")));
    }
    // About 31,000 years: past it, sums of times could overflow.
    if t > 1_000_000_000_000 {
        return Err(bad(name, format!("{t}: past 10^12 seconds")));
    }
    Ok(t)
}

/// The pods of a trace: its GPU pods as jobs, the others counted.
pub fn openb_pods(file: &str, r: impl BufRead, skip_bad: bool) -> Result<Parsed, LineError> {
    const REQUIRED: [&str; 3] = ["name", "num_gpu", "gpu_milli"];
    let mut jobs = Vec::new();
    let mut cpu_only = Vec::new();
    let mut timeless = false;
    let (tally, n) = rows(file, r, &REQUIRED, skip_bad, |h, row, _| {
        let c = |name: &str| h.col(name);
        timeless = c("creation_time").is_none();
        if !timeless && let Some(missing) = ["deletion_time", "scheduled_time"].into_iter().find(|m| c(m).is_none()) {
            return Err(bad(missing, format!("the header has creation_time but no {missing} column")));
        }
        let name = need(row, c("name"), "name")?;
        let gpus: u32 = number(need(row, c("num_gpu"), "num_gpu")?, "num_gpu", "a count of GPUs")?;
        if gpus > MAX_GPUS {
            return Err(bad("num_gpu", format!("{gpus} GPUs in one pod (at most {MAX_GPUS})")));
        }
        let milli: u32 = number(need(row, c("gpu_milli"), "gpu_milli")?, "gpu_milli", "a share in thousandths")?;
        if gpus == 1 && !(1..=1000).contains(&milli) {
            return Err(bad("gpu_milli", format!("{milli}: a one-GPU pod asks for 1 to 1000 thousandths")));
        }
        let (created, deleted, start) = if timeless { (0, 1, 0) } else { times(row, &c)? };
        let class = match row.get(c("qos")).map_err(|w| bad("qos", w))? {
            Some(q) if q.eq_ignore_ascii_case("LS") => Class::Inference,
            Some(q) if q.eq_ignore_ascii_case("BE") => Class::Training,
            Some(q) if q.eq_ignore_ascii_case("Burstable") || q.eq_ignore_ascii_case("Guaranteed") => Class::Other,
            None => Class::Other,
            Some(q) => return Err(bad("qos", format!("{q:?}: expected LS, BE, Burstable or Guaranteed"))),
        };
        let cpu_milli = match row.get(c("cpu_milli")).map_err(|w| bad("cpu_milli", w))? {
            Some(t) => number(t, "cpu_milli", "thousandths of a core")?,
            None => 0,
        };
        let host_mem_mib = match row.get(c("memory_mib")).map_err(|w| bad("memory_mib", w))? {
            Some(t) => number(t, "memory_mib", "MiB")?,
            None => 0,
        };
        let models = match row.get(c("gpu_spec")).map_err(|w| bad("gpu_spec", w))? {
            Some(spec) => {
                spec.split('|').map(str::trim).filter(|m| !m.is_empty()).map(|m| Model::named(m).name).collect()
            }
            None => Vec::new(),
        };
        let job = Job {
            name: name.into(),
            submit: created,
            duration: (deleted - start).max(1),
            gpus,
            milli: match gpus {
                0 => 0,
                1 => milli,
                _ => 1000,
            },
            mem_mib: 0,
            class,
            priority: 0,
            checkpoint_s: None,
            cpu_milli,
            host_mem_mib,
            models: if gpus == 0 { Vec::new() } else { models },
            use_milli: 1000,
        };
        if gpus == 0 {
            cpu_only.push((jobs.len(), job));
        } else {
            jobs.push(job);
        }
        Ok(())
    })?;
    let without_gpu = cpu_only.len() as u64;
    Ok(Parsed {
        jobs,
        without_gpu,
        skipped: tally.skipped,
        first_errors: tally.first,
        rows: n,
        start: None,
        cpu_only,
        timeless,
    })
}

/// A row's (creation, deletion, start): start is `scheduled_time` where it was scheduled.
fn times(row: &Row, c: &dyn Fn(&str) -> Option<usize>) -> Result<(i64, i64, i64), Bad> {
    let created = time(need(row, c("creation_time"), "creation_time")?, "creation_time")?;
    let deleted = time(need(row, c("deletion_time"), "deletion_time")?, "deletion_time")?;
    let scheduled =
        row.get(c("scheduled_time")).map_err(|w| bad("scheduled_time", w))?.map(|t| time(t, "scheduled_time"));
    let (start, from) = match scheduled.transpose()? {
        Some(s) if s < created => {
            return Err(bad("scheduled_time", format!("{s} before creation_time {created}: times running backwards")));
        }
        Some(s) => (s, "scheduled_time"),
        None => (created, "creation_time"),
    };
    if deleted < start {
        return Err(bad("deletion_time", format!("{deleted} before {from} {start}: times running backwards")));
    }
    Ok((created, deleted, start))
}

/// The node list as a fleet: each node with GPUs, its model, host CPU and memory.
pub fn openb_nodes(file: &str, r: impl BufRead) -> Result<Fleet, LineError> {
    const REQUIRED: [&str; 3] = ["sn", "gpu", "model"];
    let mut fleet = Fleet::default();
    let (_, n) = rows(file, r, &REQUIRED, false, |h, row, _| {
        let c = |name: &str| h.col(name);
        let name = need(row, c("sn"), "sn")?;
        let gpus: u32 = number(need(row, c("gpu"), "gpu")?, "gpu", "a count of GPUs")?;
        if gpus > MAX_GPUS {
            return Err(bad("gpu", format!("{gpus} GPUs on one node (at most {MAX_GPUS})")));
        }
        let cpu_milli = match row.get(c("cpu_milli")).map_err(|w| bad("cpu_milli", w))? {
            Some(t) => number(t, "cpu_milli", "thousandths of a core")?,
            None => 0,
        };
        let mem_mib = match row.get(c("memory_mib")).map_err(|w| bad("memory_mib", w))? {
            Some(t) => number(t, "memory_mib", "MiB")?,
            None => 0,
        };
        if gpus == 0 {
            return Ok(());
        }
        let model = need(row, c("model"), "model")?;
        let m = fleet.model_index(model);
        fleet.nodes.push(Node { cpu_milli, mem_mib, ..Node::new(name, m, gpus) });
        Ok(())
    })?;
    if fleet.nodes.is_empty() {
        let why = format!("no node has a GPU ({} read)", crate::units::count(n, "node", "nodes"));
        return Err(LineError { file: file.to_string(), line: 0, field: "gpu".into(), why });
    }
    Ok(fleet)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n";

    fn pods(body: &str, skip_bad: bool) -> Result<Parsed, LineError> {
        openb_pods("pods.csv", format!("{HEAD}{body}").as_bytes(), skip_bad)
    }

    #[test]
    fn each_column_maps_to_its_field() {
        let body = "p0,12000,16384,1,460,V100M16|V100M32,LS,Running,10,500,40\n\
                    p1,8000,4096,8,1000,,BE,Succeeded,20,90,\n\
                    p2,1000,512,0,0,,Burstable,Running,30,60,30\n";
        let p = pods(body, false).unwrap_or_default();
        assert_eq!((p.jobs.len(), p.without_gpu, p.rows, p.skipped), (2, 1, 3, 0));
        let j = &p.jobs[0];
        assert_eq!((&*j.name, j.submit, j.duration, j.gpus, j.milli), ("p0", 10, 460, 1, 460));
        assert_eq!((j.class, j.cpu_milli, j.host_mem_mib, j.use_milli), (Class::Inference, 12000, 16384, 1000));
        assert_eq!(j.models.iter().map(|m| &**m).collect::<Vec<_>>(), vec!["V100M16", "V100M32"]);
        let k = &p.jobs[1];
        assert_eq!(
            (k.gpus, k.milli, k.duration, k.class),
            (8, 1000, 70, Class::Training),
            "never scheduled: from creation"
        );
        assert!(k.models.is_empty());
    }

    #[test]
    fn cpu_only_pods_are_kept_apart_and_a_list_without_times_is_read() {
        let body = "p0,12000,16384,1,460,,LS,Running,10,500,40\np1,2000,512,0,0,,BE,Running,20,90,20\n";
        let p = pods(body, false).unwrap_or_default();
        assert_eq!((p.jobs.len(), p.without_gpu, p.timeless), (1, 1, false));
        assert_eq!((p.cpu_only[0].0, p.cpu_only[0].1.cpu_milli, p.cpu_only[0].1.gpus), (1, 2000, 0));
        let text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nm0,4000,1024,8,1000\nm1,1000,256,0,0\n";
        let p = openb_pods("multi.csv", text.as_bytes(), false).unwrap_or_default();
        assert_eq!((p.jobs.len(), p.cpu_only.len(), p.timeless), (1, 1, true));
        assert_eq!((p.jobs[0].gpus, p.jobs[0].milli, p.jobs[0].host_mem_mib), (8, 1000, 1024));
        let e = openb_pods("t.csv", &b"name,num_gpu,gpu_milli,creation_time\nx,1,1000,5\n"[..], false)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("field deletion_time: the header has creation_time but no deletion_time column"), "{e}");
    }

    #[test]
    fn times_running_backwards_are_a_bad_line() {
        let e = pods("p0,1,1,1,1000,,LS,Running,100,50,100\n", false).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("pods.csv:2: field deletion_time: 50 before scheduled_time 100: times running backwards")
        );
        let e = pods("p0,1,1,1,1000,,LS,Running,100,500,90\n", false).err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("field scheduled_time") && e.contains("backwards")));
    }

    #[test]
    fn a_truncated_line_names_the_first_missing_field() {
        let e = pods("p0,1,1,1,1000,,LS,Running,100\n", false).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("pods.csv:2: field deletion_time: missing: the line has 9 of 11 fields"), "{e}");
    }

    #[test]
    fn bad_values_name_their_field_and_skip_bad_counts_them() {
        let body = "a,1,1,1,1001,,LS,Running,0,5,0\nb,1,1,x,1,,LS,Running,0,5,0\nc,1,1,1,1,,XX,Running,0,5,0\n\
                    d,1,1,1,500,,LS,Running,0,5,0\n";
        let e = pods(body, false).err().map(|e| e.field);
        assert_eq!(e.as_deref(), Some("gpu_milli"));
        let p = pods(body, true).unwrap_or_default();
        assert_eq!((p.jobs.len(), p.skipped, p.rows), (1, 3, 4));
        let fields: Vec<&str> = p.first_errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, vec!["gpu_milli", "num_gpu", "qos"]);
        assert_eq!(p.first_errors[1].line, 3);
    }

    #[test]
    fn a_header_without_a_needed_column_is_said() {
        let e = openb_pods("p.csv", &b"name,num_gpu\nx,1\n"[..], true).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("p.csv:1: field gpu_milli: the header has no gpu_milli column"), "{e}");
        let e = openb_pods("p.csv", &b""[..], true).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(e, "p.csv:0: empty: no header line");
    }

    #[test]
    fn nodes_become_a_fleet_and_nodes_without_gpus_are_left_out() {
        let text = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,96000,786432,8,V100M32\n\
                    n2,32000,1024,0,\nn3,64000,262144,4,P100\n";
        let f = openb_nodes("nodes.csv", text.as_bytes()).unwrap_or_default();
        assert_eq!((f.nodes.len(), f.gpus(), f.models.len()), (3, 14, 2));
        assert_eq!((f.nodes[1].cpu_milli, f.nodes[1].mem_mib, &*f.models[1].name), (96000, 786432, "V100M32"));
        assert_eq!(f.nodes[2].model, 0);
        let e = openb_nodes("nodes.csv", &b"sn,gpu,model\nn0,0,T4\n"[..]).err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("nodes.csv:0: field gpu: no node has a GPU (1 node read)"));
        let e = openb_nodes("nodes.csv", &b"sn,gpu,model\nn0,two,T4\n"[..]).err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("nodes.csv:2: field gpu: \"two\" is not a count of GPUs"));
    }
}
