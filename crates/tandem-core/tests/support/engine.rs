//! The engine thread as the app drives it: a test's folders and settings, a reply read to its
//! end, and what the process holds.

use tandem_core::budget::CloudBudget;
use tandem_core::config::Config;
use tandem_core::engine_thread::{EngineThread, ReplyHandle};
use tandem_core::event::{Event, FinishReason, TokenSource};
use tandem_core::message::Message;
use tandem_core::paths::Paths;
use tandem_core::router::RouterKind;
use tandem_core::startup::Settled;
use tandem_fake_cloud::FakeCloud;

/// A test's folders, all under `home`.
pub fn paths(home: &std::path::Path) -> Paths {
    Paths {
        config: home.join("config"),
        data: home.join("data"),
        cache: home.join("cache"),
    }
}

/// The engine thread for `config` (whose cloud is set: no stand-in), files under `home`.
pub fn spawn(config: Config, home: &std::path::Path) -> EngineThread {
    let paths = paths(home);
    EngineThread::spawn(Settled::new(config, &paths).unwrap(), paths).unwrap()
}

/// Settings for `edge` answering through `cloud`, cloud-only until a test says otherwise.
pub fn config(edge: &std::path::Path, cloud: &FakeCloud) -> Config {
    let mut c = Config {
        edge: edge.to_str().unwrap().to_owned(),
        threads: Some(1),
        context: 1024,
        max_tokens: 40,
        budget: CloudBudget::share(1.0),
        ..Config::default()
    };
    c.cloud.url = cloud.base_url();
    c.router.kind = RouterKind::CloudOnly;
    c
}

/// A conversation of user turns only, ending with `last`.
pub fn asking(last: &str) -> Vec<Message> {
    vec![Message::user(last)]
}

/// Reads a reply to its end, calling `each` with every token's source.
pub fn drain(reply: &ReplyHandle, mut each: impl FnMut(usize, TokenSource)) -> FinishReason {
    let mut n = 0;
    for event in reply.events.iter() {
        match event {
            Event::Token { source, .. } => {
                each(n, source);
                n += 1;
            }
            Event::Finished { reason, .. } => return reason,
            _ => {}
        }
    }
    panic!("the reply ended without a finished event");
}

/// Resident memory (KiB) and open file descriptors of this process (the fault matrix's table and
/// the footprint test).
pub fn footprint() -> (u64, usize) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    (rss, fds)
}
