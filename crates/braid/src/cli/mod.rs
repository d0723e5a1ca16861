//! Subcommands.

pub mod daemon;
pub mod provenance;
pub mod sim;
pub mod testbed;

/// An error and its causes as one line, `a: b: c`, for the user. A cause whose text the one
/// before it already ends with is left out: error types that put their source in their own
/// message (`cannot read X: <the OS error>`) and also return it as their source made anyhow's
/// `{:#}` say the OS error three times for a scenario's missing trace file.
pub fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    let mut previous = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.is_empty() {
            out.push_str(&text);
        } else if !previous.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        previous = text;
    }
    out
}

#[cfg(test)]
mod tests;
