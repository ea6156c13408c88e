//! Config of the scheduler sources: `[slurm]`, `[kubernetes]` and the workload-kind rules
//! `[kinds]`, with their part of the generated example.

use std::path::PathBuf;
use std::time::Duration;

use toml::{Table, Value};

use super::{ConfigError, Reader};
use crate::model::KindRules;
use crate::units::duration;

#[derive(Debug, Clone, PartialEq)]
pub struct Slurm {
    /// Directory of `squeue`, `sinfo`, `scontrol`, `scancel`; `None`: PATH.
    pub commands_dir: Option<PathBuf>,
    pub timeout: Duration,
    /// slurmrestd base URL; when set it is used instead of the commands for reading.
    pub rest_url: Option<String>,
    pub rest_user: Option<String>,
    pub rest_token_file: Option<String>,
    /// Send the JWT to a plain-http `rest_url` (else refused: it would cross the network
    /// readable).
    pub rest_allow_plain_http: bool,
    /// Signal sent to a job asked to checkpoint before it is requeued.
    pub preempt_signal: String,
    /// How long a preempted job gets to checkpoint before the requeue.
    pub preempt_grace: Duration,
}

impl Default for Slurm {
    fn default() -> Self {
        Self {
            commands_dir: None,
            timeout: Duration::from_secs(10),
            rest_url: None,
            rest_user: None,
            rest_token_file: None,
            rest_allow_plain_http: false,
            preempt_signal: "USR1".into(),
            preempt_grace: Duration::from_secs(120),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Kubernetes {
    /// A kubeconfig file; `None`: `$KUBECONFIG`, `~/.kube/config`, or in-cluster.
    pub kubeconfig: Option<PathBuf>,
}

pub(super) fn read_slurm(r: &Reader, t: &Table, s: &mut Slurm) -> Result<(), ConfigError> {
    for (k, v) in t {
        let key = format!("slurm.{k}");
        match k.as_str() {
            "commands_dir" => s.commands_dir = Some(PathBuf::from(r.string(&key, v)?)),
            // Bounded as every source's timeout: a Slurm command that has not answered in an
            // hour never will ("3650d" was taken).
            "timeout" => s.timeout = super::http::timeout(r, &key, v)?,
            "rest_url" => s.rest_url = Some(r.url(&key, v)?),
            "rest_user" => s.rest_user = Some(r.string(&key, v)?),
            "rest_token_file" => s.rest_token_file = Some(r.string(&key, v)?),
            "rest_allow_plain_http" => s.rest_allow_plain_http = r.boolean(&key, v)?,
            "preempt_signal" => {
                let sig = r.string(&key, v)?;
                let name = sig.strip_prefix("SIG").unwrap_or(&sig).to_ascii_uppercase();
                // What scancel --signal takes: a signal name or number.
                let ok = SIGNALS.contains(&name.as_str()) || name.parse::<u8>().is_ok_and(|n| (1..=64).contains(&n));
                if !ok {
                    return Err(r.bad(&key, v, format!("expected a signal name ({}) or number", SIGNALS.join(", "))));
                }
                s.preempt_signal = name;
            }
            "preempt_grace" => s.preempt_grace = r.duration(&key, v)?,
            _ => {
                return Err(r.unknown(
                    &key,
                    &[
                        "commands_dir",
                        "timeout",
                        "rest_url",
                        "rest_user",
                        "rest_token_file",
                        "rest_allow_plain_http",
                        "preempt_signal",
                        "preempt_grace",
                    ],
                ));
            }
        }
    }
    if s.timeout.is_zero() {
        return Err(r.bad("slurm.timeout", &Value::String(duration::format(s.timeout)), "must be above 0"));
    }
    Ok(())
}

pub(super) fn read_kubernetes(r: &Reader, t: &Table, k8s: &mut Kubernetes) -> Result<(), ConfigError> {
    for (k, v) in t {
        let key = format!("kubernetes.{k}");
        match k.as_str() {
            "kubeconfig" => k8s.kubeconfig = Some(PathBuf::from(r.string(&key, v)?)),
            _ => return Err(r.unknown(&key, &["kubeconfig"])),
        }
    }
    Ok(())
}

/// Signal names `scancel --signal` accepts (POSIX names without `SIG`).
const SIGNALS: &[&str] = &[
    "HUP", "INT", "QUIT", "ABRT", "KILL", "USR1", "USR2", "PIPE", "ALRM", "TERM", "CONT", "STOP", "TSTP", "TTIN",
    "TTOU", "URG", "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
];

pub(super) fn read_kinds(r: &Reader, t: &Table, kinds: &mut KindRules) -> Result<(), ConfigError> {
    for (k, v) in t {
        let key = format!("kinds.{k}");
        let list = || -> Result<Vec<String>, ConfigError> {
            let Value::Array(items) = v else { return Err(r.bad(&key, v, "expected a list of strings")) };
            items.iter().map(|i| r.string(&key, i)).collect()
        };
        match k.as_str() {
            "inference" => kinds.inference = list()?,
            "training" => kinds.training = list()?,
            "other" => kinds.other = list()?,
            _ => return Err(r.unknown(&key, &["inference", "training", "other"])),
        }
    }
    Ok(())
}

/// The example config's part for these sections, from the defaults.
pub(super) fn example() -> String {
    let s = Slurm::default();
    let k = KindRules::default();
    let list = |v: &[String]| v.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>().join(", ");
    format!(
        r#"
[slurm]
# Where squeue, sinfo, scontrol and scancel are (default: PATH).
# commands_dir = "/opt/slurm/bin"
# Longest one Slurm command or slurmrestd call may take.
timeout = "{timeout}"
# Read from slurmrestd instead of the commands (actions still use scontrol and scancel).
# rest_url = "http://slurm-ctl.example:6820"
# rest_user = "tessera"
# rest_token_file = "/etc/tessera/slurm-jwt"
# Send the JWT to a plain http:// rest_url (refused otherwise: it would cross the network readable).
# rest_allow_plain_http = false
# Preemption asks the job to checkpoint with this signal, waits preempt_grace, then requeues.
preempt_signal = "{signal}"
preempt_grace = "{grace}"

[kubernetes]
# kubeconfig = "/etc/tessera/kubeconfig"

[kinds]
# Which workloads are inference (never preempted) and which are training: case-insensitive
# substrings of a Slurm partition or QOS, or a Kubernetes PriorityClass or namespace. Checked
# in the order inference, other, training; a GPU workload that matches none is training.
inference = [{inference}]
training = [{training}]
other = []
"#,
        timeout = duration::format(s.timeout),
        signal = s.preempt_signal,
        grace = duration::format(s.preempt_grace),
        inference = list(&k.inference),
        training = list(&k.training),
    )
}
