//! Slurm: parsers for what Slurm prints. The source that runs `squeue`/`sinfo --json` is not
//! built yet (`--slurm` exits 2 and says so); these parsers are its first, tested part.

pub mod gres;
