//! A helper thread that runs until its owner drops it: the testbed's gpsd
//! ([`crate::gps::GpsFeed`]) and MPTCP's endpoint manager ([`crate::association::EndpointManager`]).

use anyhow::Context as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// A named thread that is told to stop, and joined, on drop.
pub struct Background {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Starts `work` on a thread called `name`; `work` returns once the flag it is given is set.
    pub fn spawn(name: &str, work: impl FnOnce(&AtomicBool) + Send + 'static) -> anyhow::Result<Background> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || work(&flag))
            .with_context(|| format!("starting the {name} thread"))?;
        Ok(Background { stop, thread: Some(thread) })
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
