//! Two hundred replies in one engine leave resident memory and open file descriptors flat.
//!
//! Both are the whole process's, so this test has a binary to itself: beside the other engine
//! tests (a model loaded in parallel, the fault matrix's sockets) the process grew by 43 MiB
//! while this engine did not.

mod support;

use support::engine::{asking, config, drain, footprint, spawn};
use support::{model, SMOLLM2};
use tandem_core::budget::CloudBudget;
use tandem_core::history::ReplyMode;
use tandem_core::router::RouterKind;
use tandem_fake_cloud::{FakeCloud, Script};

#[test]
fn two_hundred_replies_leave_memory_and_file_descriptors_flat() {
    let Some(edge) = model(SMOLLM2) else { return };
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    let mut config = config(&edge, &fake);
    config.router.kind = RouterKind::Margin;
    config.budget = CloudBudget::share(0.3);
    config.max_tokens = 4;
    let chat = config.chat_settings();
    let worker = spawn(config, home.path());
    let ask = |n: usize| {
        for i in 0..n {
            let reply = worker
                .reply(
                    asking(&format!("Say something about the sea, {i}.")),
                    ReplyMode::Routed,
                    chat.clone(),
                )
                .unwrap();
            drain(&reply, |_, _| {});
        }
    };
    ask(20); // allocator and connection pool warmed up
    let before = footprint();
    ask(200);
    let after = footprint();
    println!(
        "200 replies: resident {} → {} MiB, open file descriptors {} → {}, cloud requests {}",
        before.0 / 1024,
        after.0 / 1024,
        before.1,
        after.1,
        fake.requests()
    );
    // At 30% of 4-token replies: about one request every other reply at least.
    assert!(fake.requests() > 100, "the cloud took part");
    assert!(
        after.1 <= before.1 + 2,
        "file descriptors leak: {before:?} → {after:?}"
    );
    assert!(
        after.0 < before.0 + 32 * 1024,
        "memory grows: {before:?} → {after:?}"
    );
}
