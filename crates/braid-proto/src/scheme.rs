//! The one grammar of scheme names: how loss-recovery schemes and schedulers are written in
//! daemon configs, `braid set`, scenario files and help texts alike.
//!
//! A scheme is written `NAME` or `NAME:PARAM`, its parameters in the name (`fec:10`, `rlnc:2`,
//! `wrr:auto`). Each kind keeps one table of [`Spelling`]s (`RecoveryKind::SPELLINGS`,
//! `SchedulerKind::SPELLINGS`): parsing, the list of valid names in error messages and the help
//! texts all read that table, so a new scheme is one new row there (plus its variant).

use std::fmt::{self, Write as _};

/// What follows the `:` of a spelling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Param {
    /// Nothing: the spelling is the bare name.
    None,
    /// A number within `(0, max]`, shown as `placeholder` (`fec:<K>`).
    Number {
        /// How help texts show it, e.g. `K`.
        placeholder: &'static str,
        /// Largest value accepted.
        max: f64,
    },
    /// One fixed word (`wrr:auto`).
    Word(&'static str),
}

/// One way of writing a scheme of kind `K`.
#[derive(Debug, Clone, Copy)]
pub struct Spelling<K> {
    /// The name before any `:`.
    pub name: &'static str,
    /// What follows the `:`, if anything.
    pub param: Param,
    /// One line for help texts.
    pub help: &'static str,
    /// Makes the scheme from the parameter (the number for [`Param::Number`], else 0).
    pub make: fn(f64) -> K,
}

impl<K> Spelling<K> {
    /// The spelling as help texts show it: `oec`, `fec:<K>`, `wrr:auto`.
    pub fn pattern(&self) -> String {
        match self.param {
            Param::None => self.name.to_string(),
            Param::Number { placeholder, .. } => format!("{}:<{placeholder}>", self.name),
            Param::Word(w) => format!("{}:{w}", self.name),
        }
    }

    /// A concrete example of this spelling (`fec:10` for `fec:<K>`), for tests and docs.
    pub fn example(&self) -> String {
        match self.param {
            Param::Number { max, .. } => format!("{}:{}", self.name, (max / 10.0).min(10.0)),
            _ => self.pattern(),
        }
    }
}

/// A scheme name that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemeError {
    /// No spelling has this name.
    #[error("unknown {what} {given:?}: expected one of {valid}")]
    Unknown {
        /// `recovery scheme` or `scheduler`.
        what: &'static str,
        /// As written.
        given: String,
        /// Every valid spelling, comma-separated.
        valid: String,
    },
    /// An older spelling of a scheme that is now written differently.
    #[error("{what} {given:?} is written {new:?} now")]
    Renamed {
        /// `recovery scheme` or `scheduler`.
        what: &'static str,
        /// As written.
        given: String,
        /// The spelling to write instead.
        new: String,
    },
    /// The name is known but its parameter is missing, extra or out of range.
    #[error("{what} {given:?}: {problem}")]
    BadParam {
        /// `recovery scheme` or `scheduler`.
        what: &'static str,
        /// As written.
        given: String,
        /// What is wrong and how to write it.
        problem: String,
    },
}

/// Every spelling of `table`, comma-separated (`none, arq, fec:<K>, ...`).
pub fn list<K>(table: &[Spelling<K>]) -> String {
    table.iter().map(Spelling::pattern).collect::<Vec<_>>().join(", ")
}

/// One line per spelling, the pattern padded to a column, for `--help` texts.
pub fn help<K>(table: &[Spelling<K>]) -> String {
    let width = table.iter().map(|s| s.pattern().len()).max().unwrap_or(0);
    let mut out = String::new();
    for s in table {
        let _ = writeln!(out, "  {:width$}  {}", s.pattern(), s.help);
    }
    out
}

/// Parses `s` by `table`; `what` names the kind in errors (`recovery scheme`, `scheduler`).
pub fn parse<K>(table: &[Spelling<K>], what: &'static str, s: &str) -> Result<K, SchemeError> {
    let (name, arg) = match s.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (s, None),
    };
    let rows: Vec<&Spelling<K>> = table.iter().filter(|r| r.name == name).collect();
    for r in &rows {
        match (r.param, arg) {
            (Param::None, None) => return Ok((r.make)(0.0)),
            (Param::Word(w), Some(a)) if a == w => return Ok((r.make)(0.0)),
            (Param::Number { placeholder, max }, Some(a)) => {
                return match a.parse::<f64>() {
                    Ok(k) if k.is_finite() && k > 0.0 && k <= max => Ok((r.make)(k)),
                    _ => Err(SchemeError::BadParam {
                        what,
                        given: s.to_string(),
                        problem: format!("{placeholder} must be a number within (0, {max}], found {a:?}"),
                    }),
                };
            }
            _ => {}
        }
    }
    if !rows.is_empty() {
        let forms = rows.iter().map(|r| r.pattern()).collect::<Vec<_>>().join(" or ");
        return Err(SchemeError::BadParam { what, given: s.to_string(), problem: format!("write {forms}") });
    }
    if let Some(new) = renamed(table, s) {
        return Err(SchemeError::Renamed { what, given: s.to_string(), new });
    }
    Err(SchemeError::Unknown { what, given: s.to_string(), valid: list(table) })
}

/// The current spelling of an older one: the parameter glued to the name (`fec10`, `rlnc2`) or
/// after a dash (`wrr-auto`), as braid's daemons accepted them before the grammar was one.
fn renamed<K>(table: &[Spelling<K>], s: &str) -> Option<String> {
    table.iter().find_map(|r| {
        let rest = s.strip_prefix(r.name)?;
        let rest = rest.strip_prefix('-').unwrap_or(rest);
        let fits = match r.param {
            Param::Number { .. } => rest.parse::<f64>().is_ok(),
            Param::Word(w) => rest == w,
            Param::None => false,
        };
        fits.then(|| format!("{}:{rest}", r.name))
    })
}

/// Writes a number parameter as parsing reads it back (`10`, `2.5`).
pub(crate) fn write_number(f: &mut fmt::Formatter<'_>, name: &str, k: f64) -> fmt::Result {
    write!(f, "{name}:{k}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RecoveryKind, SchedulerKind};

    fn round_trip<K: std::str::FromStr + fmt::Display>(table: &[Spelling<K>])
    where
        K::Err: fmt::Debug,
    {
        for s in table {
            let ex = s.example();
            let k: K = ex.parse().unwrap();
            assert_eq!(k.to_string(), ex, "{} does not print as it is written", s.pattern());
        }
    }

    #[test]
    fn every_spelling_prints_as_written() {
        round_trip(RecoveryKind::SPELLINGS);
        round_trip(SchedulerKind::SPELLINGS);
    }

    #[test]
    fn old_spellings_name_the_new_one() {
        let e = "fec10".parse::<RecoveryKind>().unwrap_err();
        assert_eq!(e.to_string(), r#"recovery scheme "fec10" is written "fec:10" now"#);
        let e = "rlnc2".parse::<RecoveryKind>().unwrap_err().to_string();
        assert!(e.contains("\"rlnc:2\""), "{e}");
        let e = "wrr-auto".parse::<SchedulerKind>().unwrap_err().to_string();
        assert!(e.contains("\"wrr:auto\""), "{e}");
    }

    #[test]
    fn bad_parameters_and_names_are_explained() {
        let e = "fec".parse::<RecoveryKind>().unwrap_err().to_string();
        assert!(e.contains("fec:<K>"), "{e}");
        let e = "fec:0".parse::<RecoveryKind>().unwrap_err().to_string();
        assert!(e.contains("(0, 1000]"), "{e}");
        assert!("rlnc:101".parse::<RecoveryKind>().is_err());
        assert!("oec:3".parse::<RecoveryKind>().is_err());
        assert!("wrr:manual".parse::<SchedulerKind>().is_err());
        let e = "rs".parse::<RecoveryKind>().unwrap_err().to_string();
        assert!(e.contains("\"rs\"") && e.contains("fec:<K>") && e.contains("fountain"), "{e}");
        let e = "dup".parse::<SchedulerKind>().unwrap_err().to_string();
        assert!(e.contains("min-delay") && e.contains("wrr:auto"), "{e}");
    }

    #[test]
    fn help_lists_every_spelling() {
        let h = help(RecoveryKind::SPELLINGS);
        for s in RecoveryKind::SPELLINGS {
            assert!(h.contains(&s.pattern()));
        }
        assert_eq!(h.lines().count(), RecoveryKind::SPELLINGS.len());
    }
}
