//! Why a scenario file was rejected. Every variant that comes from the file names the key (as a
//! dotted path, `[[link]]` and `[[scheme]]` entries by their `name`) and the 1-based line.

use std::path::PathBuf;

use crate::link::SpecFileError;

/// Errors loading a scenario.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The scenario file itself could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The path as given.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The text is not valid TOML.
    #[error("line {line}: TOML syntax error: {message}")]
    Syntax {
        /// 1-based line of the error.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// A key is unknown, missing, of the wrong type or out of range, or contradicts another key.
    #[error("line {line}: {key}: {message}")]
    Invalid {
        /// Dotted path of the key, e.g. `link.wimax.down.loss.p`.
        key: String,
        /// 1-based line of the key (of its enclosing table when the key is missing).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A file named by a key (trace, schedule, empirical distribution) could not be read or parsed.
    #[error("line {line}: {key}: {source}")]
    File {
        /// Dotted path of the key naming the file.
        key: String,
        /// 1-based line of the key.
        line: usize,
        /// What went wrong reading it.
        source: SpecFileError,
    },
    /// A `[sweep]` key does not address anything in the document.
    #[error("line {line}: sweep key {key:?}: {message}")]
    SweepKey {
        /// The sweep key as written.
        key: String,
        /// 1-based line of the key in `sweep.keys`.
        line: usize,
        /// What it fails to name.
        message: String,
    },
    /// Setting the sweep keys to one of the values gives an invalid scenario.
    #[error("sweep value {value}: {source}")]
    SweepPoint {
        /// The value the keys were set to.
        value: f64,
        /// Why the resulting scenario is invalid.
        source: Box<ScenarioError>,
    },
}

impl ScenarioError {
    /// The 1-based line the error points at, if it comes from the file's text.
    pub fn line(&self) -> Option<usize> {
        match self {
            ScenarioError::Io { .. } => None,
            ScenarioError::Syntax { line, .. }
            | ScenarioError::Invalid { line, .. }
            | ScenarioError::File { line, .. }
            | ScenarioError::SweepKey { line, .. } => Some(*line),
            ScenarioError::SweepPoint { source, .. } => source.line(),
        }
    }

    /// The dotted key the error names, if any.
    pub fn key(&self) -> Option<&str> {
        match self {
            ScenarioError::Io { .. } | ScenarioError::Syntax { .. } => None,
            ScenarioError::Invalid { key, .. }
            | ScenarioError::File { key, .. }
            | ScenarioError::SweepKey { key, .. } => Some(key),
            ScenarioError::SweepPoint { source, .. } => source.key(),
        }
    }
}
