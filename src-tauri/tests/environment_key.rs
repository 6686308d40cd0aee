//! `TANDEM_CLOUD_API_KEY` belongs to the cloud the settings name: "Test connection" on any
//! other URL never sends it. A binary of its own, since it sets a variable for the process.

// This binary uses only the app harness, not the channel constant.
#[allow(dead_code)]
mod support;

use serde_json::json;
use support::App;
use tandem_fake_cloud::{FakeCloud, Script};

#[test]
fn test_connection_never_sends_the_environment_key_to_another_origin() {
    // The only test in this process, set before any thread reads the environment.
    std::env::set_var("TANDEM_CLOUD_API_KEY", "sk-for-the-configured-cloud");
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("config")).unwrap();
    std::fs::write(
        home.path().join("config/config.toml"),
        "[cloud]\nurl = \"https://api.configured.example/v1\"\n",
    )
    .unwrap();
    let app = App::start(home.path());
    // A server that would accept that key: were the key sent, the test would pass.
    let stranger =
        FakeCloud::start(Script::cycle(&["x"]).requiring_key("sk-for-the-configured-cloud"))
            .unwrap();
    let tried = app
        .call(
            "cloud_test",
            json!({"cloud": {"url": stranger.base_url(), "model": null, "mode": "completions"}, "key": null}),
        )
        .unwrap();
    assert_eq!(
        tried["kind"], "cloud_wrong_key",
        "the key went out: {tried}"
    );
}
