//! The error a command ends with, and the exit code the command-line contract gives each kind.

/// A failed command, with the exit code the contract gives it.
#[derive(Debug, thiserror::Error)]
pub enum CmdError {
    #[error("{0}")]
    Usage(String),
    /// The config file's error, as it reads (`From<config::ConfigError>` is in `commands`).
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Failed(String),
    #[error("refused: {0}")]
    Refused(String),
    /// `advise --fail-on`: a finding of that severity exists.
    #[error("{0}")]
    Findings(String),
    /// Standard output was closed by its reader (`| head`): end quietly.
    #[error("standard output closed")]
    Closed,
}

impl CmdError {
    /// A failure saying `e` (any error, as it reads).
    pub fn failed(e: impl std::fmt::Display) -> Self {
        Self::Failed(e.to_string())
    }

    /// A usage error saying `e`.
    pub fn usage(e: impl std::fmt::Display) -> Self {
        Self::Usage(e.to_string())
    }

    pub fn code(&self) -> u8 {
        match self {
            Self::Usage(_) | Self::Config(_) => 2,
            Self::Failed(_) => 1,
            Self::Refused(_) => 3,
            Self::Closed => 0,
            Self::Findings(_) => 4,
        }
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
