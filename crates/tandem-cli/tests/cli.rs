//! The `tandem` binary as a user runs it: flags, `--json` output, errors.

use std::path::PathBuf;
use std::process::Command;
use tandem_fake_cloud::{FakeCloud, Fault, Script};

fn tandem(home: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tandem"));
    c.env("TANDEM_HOME", home)
        .env_remove("TANDEM_CLOUD_API_KEY");
    c
}

fn smollm2() -> Option<PathBuf> {
    tandem_test_peers::model(tandem_test_peers::SMOLLM2)
}

/// A fresh home whose settings have the local stand-in serve `model` (the default is
/// Qwen2.5-Coder-1.5B), on one thread.
fn home_serving(model: &std::path::Path) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("config")).unwrap();
    std::fs::write(
        home.path().join("config/config.toml"),
        format!(
            "threads = 1\n[serve]\nmodel = {:?}\n",
            model.to_str().unwrap()
        ),
    )
    .unwrap();
    home
}

/// `tandem generate --json` with one thread against `fake`, plus `flags`.
fn generate(
    home: &std::path::Path,
    model: &std::path::Path,
    fake: &FakeCloud,
    prompt: &str,
    flags: &[&str],
) -> Command {
    let mut command = tandem(home);
    command
        .args([
            "generate",
            "--json",
            "--threads",
            "1",
            "--prompt",
            prompt,
            "--cloud",
            &fake.base_url(),
            "--edge",
        ])
        .arg(model)
        .args(flags);
    command
}

/// `tandem eval` with one thread of `model` against `fake` on `data` into `out`, plus
/// `flags`; it must succeed. Returns its stdout and `results.json`.
fn eval(
    home: &std::path::Path,
    model: &std::path::Path,
    fake: &FakeCloud,
    data: &std::path::Path,
    out: &std::path::Path,
    flags: &[&str],
) -> (String, serde_json::Value) {
    let output = tandem(home)
        .args([
            "eval",
            "--threads",
            "1",
            "--cloud",
            &fake.base_url(),
            "--edge",
        ])
        .arg(model)
        .arg("--data")
        .arg(data)
        .arg("--out")
        .arg(out)
        .args(flags)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let results = serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap());
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        results.unwrap(),
    )
}

/// The events a successful `--json` run printed: every stdout line must be one JSON object.
fn json_events(output: &std::process::Output) -> Vec<serde_json::Value> {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn generate_json_prints_only_events_and_routes_to_the_cloud() {
    let Some(model) = smollm2() else { return };
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    let output = generate(
        home.path(),
        &model,
        &fake,
        "Tell me about the sea.",
        &[
            "--max-tokens",
            "24",
            "--budget",
            "0.3",
            "--router",
            "cloud-only",
        ],
    )
    .output()
    .unwrap();
    let events = json_events(&output);
    assert_eq!(events.first().unwrap()["type"], "started");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "finished");
    let cloud = last["usage"]["cloud_tokens"].as_u64().unwrap();
    let edge = last["usage"]["edge_tokens"].as_u64().unwrap();
    assert!(cloud > 0 && edge > 0, "{last}");
    assert!(cloud as f64 <= 0.3 * (cloud + edge) as f64 + 4.0, "{last}");
    assert_eq!(
        last["usage"]["cloud_requests"].as_u64().unwrap() as usize,
        fake.requests()
    );
}

/// While a slow request is away the edge drafts, and by default sends the request its draft
/// would make next; where the cloud's answer differs from the draft that request is billed
/// and counted as unused. `--ask-ahead false` sends only the requests the reply uses.
#[test]
fn requests_asked_ahead_are_counted_when_unused_and_ask_ahead_false_sends_none() {
    let Some(model) = smollm2() else { return };
    let finished = |flags: &[&str]| {
        let home = tempfile::tempdir().unwrap();
        let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
        fake.push_faults((0..40).map(|_| Fault::Delay(std::time::Duration::from_millis(150))));
        let mut all = vec![
            "--max-tokens",
            "6",
            "--budget",
            "1",
            "--router",
            "cloud-only",
            "--span",
            "1",
        ];
        all.extend_from_slice(flags);
        let output = generate(home.path(), &model, &fake, "Tell me about the sea.", &all)
            .output()
            .unwrap();
        let usage = json_events(&output).last().unwrap()["usage"].clone();
        assert_eq!(
            usage["cloud_requests"].as_u64(),
            Some(fake.requests() as u64),
            "{usage}"
        );
        usage
    };
    let asked = finished(&[]);
    assert!(
        asked["cloud_requests_unused"].as_u64().unwrap() >= 1,
        "{asked}"
    );
    let only_used = finished(&["--ask-ahead", "false"]);
    assert_eq!(only_used["cloud_requests_unused"], 0, "{only_used}");
    assert_eq!(
        only_used["cloud_requests"], only_used["cloud_tokens"],
        "{only_used}"
    );
}

#[test]
fn a_cloud_past_the_wait_limit_is_named_in_a_notice_and_the_reply_finishes() {
    let Some(model) = smollm2() else { return };
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    fake.push_faults((0..8).map(|_| Fault::Delay(std::time::Duration::from_millis(120))));
    let output = generate(
        home.path(),
        &model,
        &fake,
        "Tell me about the sea.",
        &[
            "--max-tokens",
            "16",
            "--budget",
            "0.3",
            "--router",
            "cloud-only",
            "--max-wait-ms",
            "50",
        ],
    )
    .output()
    .unwrap();
    let events = json_events(&output);
    let slow: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "notice" && e["kind"] == "cloud_slow")
        .collect();
    assert_eq!(slow.len(), 1, "told once: {events:?}");
    let message = slow[0]["message"].as_str().unwrap();
    assert!(message.contains("past your 50 ms limit"), "{message}");
    assert_eq!(events.last().unwrap()["type"], "finished");
}

#[test]
fn budget_zero_makes_no_request() {
    let Some(model) = smollm2() else { return };
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    let output = generate(
        home.path(),
        &model,
        &fake,
        "Hi",
        &["--max-tokens", "16", "--budget", "0"],
    )
    .output()
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(fake.requests(), 0);
}

#[test]
fn unknown_and_unpulled_models_say_what_to_do() {
    let home = tempfile::tempdir().unwrap();
    let output = tandem(home.path())
        .args(["generate", "--edge", "gpt-17", "--prompt", "hi"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("unknown model 'gpt-17'") && stderr.contains("qwen2.5-coder-0.5b"),
        "{stderr}"
    );
    let output = tandem(home.path())
        .args(["generate", "--edge", "qwen2.5-coder-0.5b", "--prompt", "hi"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("tandem models pull qwen2.5-coder-0.5b"),
        "{stderr}"
    );
}

#[test]
fn a_corrupt_model_file_is_named_in_the_error() {
    let home = tempfile::tempdir().unwrap();
    let bad = home.path().join("broken.gguf");
    std::fs::write(&bad, b"GGUF but not really").unwrap();
    let output = tandem(home.path())
        .args(["generate", "--prompt", "hi", "--edge"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("broken.gguf") && stderr.contains("not a usable GGUF"),
        "{stderr}"
    );
}

#[test]
fn chat_flags_out_of_range_or_unknown_are_refused_by_name() {
    let home = tempfile::tempdir().unwrap();
    for (flag, value, said) in [
        ("--temperature", "5", "temperature must be between 0 and 2"),
        (
            "--context-policy",
            "forget",
            "unknown context policy 'forget'",
        ),
    ] {
        let output = tandem(home.path())
            .args(["generate", "--prompt", "hi", flag, value])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains(said),
            "{stderr}"
        );
    }
}

#[test]
fn a_bad_settings_file_is_reported_with_the_key() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("config")).unwrap();
    std::fs::write(
        home.path().join("config/config.toml"),
        "[budget]\nshare = 2\n",
    )
    .unwrap();
    let output = tandem(home.path())
        .args(["generate", "--prompt", "hi"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("share"),
        "{stderr}"
    );
}

#[test]
fn models_list_shows_the_catalogue() {
    let home = tempfile::tempdir().unwrap();
    let output = tandem(home.path())
        .args(["models", "list"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("qwen2.5-coder-0.5b") && stdout.contains("qwen2.5-coder-1.5b"),
        "{stdout}"
    );
}

#[test]
fn a_stored_key_survives_a_restart_and_goes_only_to_its_origin() {
    if std::env::var_os("TANDEM_TEST_KEYRING").is_none() {
        eprintln!("skipped: set TANDEM_TEST_KEYRING inside a D-Bus session with a Secret Service (scripts/test.sh does)");
        return;
    }
    use std::io::Write;
    let home = tempfile::tempdir().unwrap();
    let secret = "sk-test-3f9a1c77d2e8b5a4";
    let fake = FakeCloud::start(Script::cycle(&[" ocean"]).requiring_key(secret)).unwrap();
    // Another endpoint on this machine: same host, another port, so another origin.
    let elsewhere = FakeCloud::start(Script::cycle(&[" sand"])).unwrap();
    let key = |args: &[&str]| {
        let mut command = tandem(home.path());
        command.arg("key").args(args);
        command
    };
    // `tandem key set`, the key typed on standard input.
    let set = |url: &str| {
        let mut set = key(&["set", "--url", url])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        writeln!(set.stdin.take().unwrap(), "{secret}").unwrap();
        set.wait_with_output().unwrap()
    };
    let output = set(&fake.base_url());
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // A new process finds it in the keyring, for that endpoint only.
    let status = key(&["status", "--url", &fake.base_url()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("in the OS keyring for http://127.0.0.1:"),
        "{text}"
    );
    assert!(text.contains("(…b5a4)") && !text.contains(secret), "{text}");
    let status = key(&["status", "--url", &elsewhere.base_url()])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&status.stdout).contains("no API key"));
    // Without a URL and without a configured cloud, the key has no endpoint to belong to.
    let unbound = key(&["status"]).output().unwrap();
    assert!(!unbound.status.success());
    assert!(String::from_utf8_lossy(&unbound.stderr).contains("--url"));
    // A plain-http endpoint on another machine never gets one.
    let refused = set("http://10.0.0.2:8000/v1");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("only sent over https"));
    if let Some(model) = smollm2() {
        let flags = [
            "--max-tokens",
            "8",
            "--budget",
            "1",
            "--router",
            "cloud-only",
        ];
        // Its own endpoint gets the key: the fake accepts only that key.
        let output = generate(home.path(), &model, &fake, "Hi", &flags)
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!all.contains(secret), "the key leaked into the output");
        assert!(!all.contains("cloud_error"), "{all}");
        assert!(fake.requests() > 0);
        // Another origin, listening on this machine, is asked without it.
        let output = generate(home.path(), &model, &elsewhere, "Hi", &flags)
            .output()
            .unwrap();
        assert!(output.status.success());
        let asked = elsewhere.recorded();
        assert!(!asked.is_empty());
        assert!(
            asked.iter().all(|r| r.authorization.is_none()),
            "another origin received an Authorization header"
        );
    }
    let cleared = key(&["clear", "--url", &fake.base_url()]).output().unwrap();
    assert!(String::from_utf8_lossy(&cleared.stdout).contains("removed"));
    let status = key(&["status", "--url", &fake.base_url()])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&status.stdout).contains("no API key"));
}

#[test]
fn what_a_killed_save_left_behind_is_swept_at_start_and_the_saved_files_stay() {
    let Some(model) = smollm2() else { return };
    let home = tempfile::tempdir().unwrap();
    let conversations = home.path().join("data/conversations");
    std::fs::create_dir_all(&conversations).unwrap();
    let stray = conversations.join(".tandem-Xy12ab.tmp");
    let saved = conversations.join("c1.json");
    for path in [&stray, &saved] {
        std::fs::write(path, b"{").unwrap();
        let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(an_hour_ago)
            .unwrap();
    }
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    let output = generate(home.path(), &model, &fake, "Hi", &["--max-tokens", "2"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !stray.exists(),
        "the leftover temporary file is still there"
    );
    assert!(saved.exists());
}

#[test]
fn a_wrong_key_is_a_notice_and_the_reply_finishes_locally() {
    let Some(model) = smollm2() else { return };
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean"]).requiring_key("sk-right")).unwrap();
    let output = generate(
        home.path(),
        &model,
        &fake,
        "Hi",
        &[
            "--max-tokens",
            "12",
            "--budget",
            "1",
            "--router",
            "cloud-only",
        ],
    )
    .env("TANDEM_CLOUD_API_KEY", "sk-wrong-key-value")
    .output()
    .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("refused the API key"), "{stdout}");
    assert!(stdout.contains(r#""type":"finished""#));
    assert!(
        !stdout.contains("sk-wrong-key-value")
            && !String::from_utf8_lossy(&output.stderr).contains("sk-wrong-key-value")
    );
}

#[test]
fn the_daily_spend_cap_holds_across_runs() {
    let Some(model) = smollm2() else { return };
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("config")).unwrap();
    // $0.01 per completion token: each 4-token request costs $0.04, so two fit under $0.10.
    std::fs::write(
        home.path().join("config/config.toml"),
        "[budget]\nmax_share = 1.0\ndaily_spend_cap_usd = 0.1\nprices = { input_per_mtok = 0.0, output_per_mtok = 10000.0 }\n",
    )
    .unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    let run = || {
        let output = generate(
            home.path(),
            &model,
            &fake,
            "Hi",
            &["--max-tokens", "16", "--router", "cloud-only"],
        )
        .output()
        .unwrap();
        json_events(&output).last().unwrap()["usage"].clone()
    };
    let first = run();
    assert!(first["cloud_requests"].as_u64().unwrap() >= 2, "{first}");
    assert!(
        first["est_cost_usd"].as_f64().unwrap() <= 0.1 + 1e-9,
        "never above the cap: {first}"
    );
    let requests_after_first = fake.requests();
    let second = run();
    assert_eq!(
        second["cloud_requests"], 0,
        "the cap was spent by the first run: {second}"
    );
    assert_eq!(fake.requests(), requests_after_first);

    // A ledger that cannot be read fails closed: no cloud until tomorrow, and the user is told.
    std::fs::write(home.path().join("data/spend.json"), b"{not json").unwrap();
    let output = generate(
        home.path(),
        &model,
        &fake,
        "Hi",
        &["--max-tokens", "4", "--router", "cloud-only"],
    )
    .output()
    .unwrap();
    let events = json_events(&output);
    assert!(
        events.iter().any(|e| e["kind"] == "spend_unknown"),
        "{events:?}"
    );
    assert_eq!(events.last().unwrap()["usage"]["cloud_requests"], 0);
    assert_eq!(fake.requests(), requests_after_first);
}

#[test]
fn chat_keeps_the_conversation_and_budget_off_applies_to_the_next_turn() {
    let Some(model) = smollm2() else { return };
    use std::io::Write;
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    let mut chat = tandem(home.path())
        .args([
            "chat",
            "--threads",
            "1",
            "--max-tokens",
            "8",
            "--budget",
            "1",
            "--router",
            "cloud-only",
            "--edge",
        ])
        .arg(&model)
        .args(["--cloud", &fake.base_url()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    write!(
        chat.stdin.take().unwrap(),
        "Hi\n/budget off\nAnd then?\n/budget lots\n/quit\n"
    )
    .unwrap();
    let output = chat.wait_with_output().unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let footers: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(" requests · "))
        .collect();
    assert_eq!(footers.len(), 2, "{stderr}");
    assert!(footers[0].contains("cloud 8 (100%)"), "{}", footers[0]);
    assert!(
        footers[1].contains("cloud 0 (0%)") && footers[1].contains("0 requests"),
        "{}",
        footers[1]
    );
    assert!(
        stderr.contains("cloud budget: off (fully local)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("a cloud share is between 0 and 1") && stderr.contains("not 'lots'"),
        "a bad /budget value is explained: {stderr}"
    );
    assert_eq!(fake.requests(), 2);
    // The first reply shows the cloud's words.
    assert!(String::from_utf8_lossy(&output.stdout).contains("ocean"));
}

#[test]
fn with_no_cloud_configured_the_local_stand_in_serves_and_none_means_local_only() {
    let Some(model) = smollm2() else { return };
    let home = home_serving(&model);
    let run = |cloud: Option<&str>| {
        let mut command = tandem(home.path());
        command
            .args([
                "generate",
                "--json",
                "--max-tokens",
                "8",
                "--budget",
                "1",
                "--router",
                "cloud-only",
            ])
            .args(["--prompt", "Hi", "--edge"])
            .arg(&model);
        if let Some(cloud) = cloud {
            command.args(["--cloud", cloud]);
        }
        let output = command.output().unwrap();
        (
            json_events(&output),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (events, stderr) = run(None);
    let cloud = events[0]["cloud"].as_str().expect("a cloud endpoint");
    assert!(cloud.starts_with("http://127.0.0.1:"), "{cloud}");
    assert!(stderr.contains("local stand-in cloud"), "{stderr}");
    let usage = &events.last().unwrap()["usage"];
    assert!(usage["cloud_tokens"].as_u64().unwrap() > 0, "{usage}");
    assert!(!stderr.contains("cloud_error"));

    let (events, _) = run(Some("none"));
    assert!(events[0]["cloud"].is_null());
    assert_eq!(events.last().unwrap()["usage"]["cloud_requests"], 0);
}

/// Writes `rows` as the JSONL file `--data` reads, one row a line.
fn write_rows(path: &std::path::Path, rows: impl IntoIterator<Item = serde_json::Value>) {
    let lines: Vec<String> = rows.into_iter().map(|row| row.to_string() + "\n").collect();
    std::fs::write(path, lines.concat()).unwrap();
}

/// Ten easy multiple-choice questions in the CommonsenseQA row shape `--data` accepts.
fn ten_questions(dir: &std::path::Path) -> PathBuf {
    let path = dir.join("ten.jsonl");
    let rows = [
        (
            "What colour is the sky on a clear day?",
            ["green", "blue", "red"],
            "B",
        ),
        ("Which animal barks?", ["dog", "cat", "fish"], "A"),
        (
            "What do you drink when thirsty?",
            ["sand", "stone", "water"],
            "C",
        ),
        ("Which is a fruit?", ["apple", "brick", "shoe"], "A"),
        ("What falls from clouds?", ["rain", "bread", "chairs"], "A"),
        ("Which is used to write?", ["spoon", "pen", "plate"], "B"),
        ("What is frozen water?", ["steam", "ice", "oil"], "B"),
        ("Where do fish live?", ["desert", "tree", "water"], "C"),
        ("Which one flies?", ["bird", "rock", "table"], "A"),
        ("What do bees make?", ["milk", "silk", "honey"], "C"),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, (q, texts, key))| {
        serde_json::json!({"id": format!("q{i}"), "question": q,
            "choices": {"label": ["A", "B", "C"], "text": texts}, "answerKey": key})
    });
    write_rows(&path, rows);
    path
}

#[test]
fn eval_on_ten_questions_writes_results_and_a_chart_with_every_run() {
    let Some(model) = smollm2() else { return };
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" B"])).unwrap();
    let data = ten_questions(home.path());
    let out = home.path().join("results");
    let (_, results) = eval(
        home.path(),
        &model,
        &fake,
        &data,
        &out,
        &["--router", "default,entropy", "--budgets", "0,0.2,1"],
    );
    let runs = results["runs"].as_array().unwrap();
    let find = |router: &str, budget: f64| {
        runs.iter()
            .find(|r| {
                r["router"] == router && (r["budget"].as_f64().unwrap() - budget).abs() < 1e-6
            })
            .unwrap_or_else(|| panic!("no {router} run at {budget}: {results}"))
    };
    assert_eq!(
        results["budget_rule"],
        tandem_core::budget::RULE,
        "the app's budget"
    );
    assert_eq!(results["prompt_format"], "letter-text-because/3");
    for key in [
        "router",
        "budget",
        "n",
        "score",
        "score_interval",
        "cost_vs_cloud_only",
        "cloud_share",
        "cloud_requests",
        "cloud_prompt_tokens",
        "cloud_completion_tokens",
        "seconds",
    ] {
        assert!(
            runs.iter().all(|r| r.get(key).is_some()),
            "{key} missing: {results}"
        );
    }
    assert_eq!(
        runs.len(),
        6,
        "edge-only, the first-token and random baselines and two routers at 0.2, cloud-only: {results}"
    );
    let edge_only = find("edge-only", 0.0);
    assert_eq!(edge_only["n"], 10);
    assert_eq!(
        (
            edge_only["cloud_share"].as_f64(),
            edge_only["cloud_requests"].as_u64()
        ),
        (Some(0.0), Some(0))
    );
    let cloud_only = find("cloud-only", 1.0);
    assert_eq!(cloud_only["cloud_share"].as_f64(), Some(1.0));
    // The fake cloud always answers " B" (one token per request by default): cloud-only gets
    // exactly the three B questions.
    assert_eq!(results["metric"], "accuracy");
    assert_eq!(cloud_only["score"].as_f64(), Some(0.3), "{cloud_only}");
    assert_eq!(
        find("default", 0.2)["resolved"],
        "blend",
        "the app's default router, recorded under its alias"
    );
    for router in ["default", "entropy", "first-token", "random"] {
        let run = find(router, 0.2);
        let (cloud, edge) = (
            run["cloud_tokens"].as_f64().unwrap(),
            run["edge_tokens"].as_f64().unwrap(),
        );
        // The run is one account: at most 20% of its tokens plus the two the account
        // starts with.
        assert!(
            cloud > 0.0 && cloud <= 0.2 * (cloud + edge) + 2.0,
            "{router}: {cloud} cloud tokens, {edge} edge tokens"
        );
        let interval = &run["score_interval"];
        let accuracy = run["score"].as_f64().unwrap();
        assert!(interval["low"].as_f64().unwrap() <= accuracy);
        assert!(interval["high"].as_f64().unwrap() >= accuracy);
    }
    // Every router is compared, question by question, with the baselines and the default
    // router at its budget.
    let versus = |router: &str| -> Vec<String> {
        find(router, 0.2)["versus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["baseline"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        versus("entropy"),
        [
            "edge-only",
            "first-token",
            "random",
            "default",
            "cloud-only"
        ]
    );
    assert_eq!(
        versus("default"),
        ["edge-only", "first-token", "random", "cloud-only"]
    );
    // The first-token baseline asks the cloud for a reply's first token only, where the run's
    // account has room for it (short replies at 20% earn less than a token each).
    let first_token = find("first-token", 0.2);
    let cloud_tokens = first_token["cloud_tokens"].as_u64().unwrap();
    assert!((1..=10).contains(&cloud_tokens), "{first_token}");
    assert_eq!(first_token["cloud_requests"].as_u64(), Some(cloud_tokens));
    // Every reply of every run, with the answer read from it: the cloud-only ones say "B".
    let replies: Vec<serde_json::Value> = std::fs::read_to_string(out.join("replies.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 10 * 6);
    let cloud_only: Vec<_> = replies
        .iter()
        .filter(|r| r["router"] == "cloud-only")
        .collect();
    assert_eq!(cloud_only.len(), 10);
    assert!(
        cloud_only.iter().all(|r| r["answer"] == "B"),
        "{cloud_only:?}"
    );
    assert_eq!(cloud_only.iter().filter(|r| r["outcome"] == 1.0).count(), 3);
    // A routed run's broken splices are the questions it got wrong that edge-only and
    // cloud-only both got right.
    let right = |router: &str, question: &serde_json::Value| {
        replies
            .iter()
            .any(|r| r["router"] == router && r["question"] == *question && r["outcome"] == 1.0)
    };
    for router in ["default", "entropy", "first-token", "random"] {
        let broken = replies
            .iter()
            .filter(|r| r["router"] == router && r["outcome"] == 0.0)
            .filter(|r| right("edge-only", &r["question"]) && right("cloud-only", &r["question"]))
            .count() as u64;
        assert_eq!(
            find(router, 0.2)["broken_splices"].as_u64(),
            Some(broken),
            "{router}"
        );
    }
    // Each reply carries its router's score at every token, in [0, 1].
    for reply in replies.iter().filter(|r| r["router"] == "entropy") {
        let scores = reply["scores"].as_array().unwrap();
        let tokens = reply["cloud_tokens"].as_u64().unwrap() as usize;
        assert!(scores.len() >= tokens.max(1), "{reply}");
        assert!(scores
            .iter()
            .all(|s| (0.0..=1.0).contains(&s.as_f64().unwrap())));
        // Which of its positions the cloud wrote: one per cloud token, within the reply.
        let cloud_at = reply["cloud_positions"].as_array().unwrap();
        assert_eq!(cloud_at.len(), tokens, "{reply}");
        assert!(cloud_at
            .iter()
            .all(|p| (p.as_u64().unwrap() as usize) < scores.len()));
        // And what the router saw where it scored: the reply's first position first, then
        // a top-1 probability, a margin no larger than it and an entropy, as the edge had them.
        // (One more than the tokens when the reply ended on the edge's end of turn.)
        let signals = reply["signals"].as_array().unwrap();
        assert!(
            !signals.is_empty() && signals.len() <= scores.len() + 1,
            "{reply}"
        );
        assert_eq!(signals[0][0].as_f64(), Some(0.0), "{reply}");
        for row in signals {
            let [_, top1, margin, entropy] = [0, 1, 2, 3].map(|i| row[i].as_f64().unwrap());
            assert!((0.0..=1.0).contains(&top1) && margin <= top1 + 1e-4 && entropy >= 0.0);
        }
    }
    let svg = std::fs::read_to_string(out.join("chart.svg")).unwrap();
    assert!(svg.contains("entropy") && svg.contains("default") && svg.contains("cloud-only"));
    // The app shows the latest evaluation.
    assert!(home.path().join("data/eval/latest/chart.svg").is_file());
}

#[test]
fn eval_under_a_wait_limit_asks_a_slow_cloud_less_and_records_the_limit() {
    let Some(model) = smollm2() else { return };
    let home = tempfile::tempdir().unwrap();
    // Chat replies of a sentence or more ask more than once each; a choice's reply of three
    // tokens asks only for its opening, slow cloud or not.
    let data = home.path().join("chat.jsonl");
    let questions = [
        "What is the capital of France?",
        "How many legs does a spider have?",
        "Which planet is closest to the sun?",
        "What gas do plants take in?",
        "Who wrote Romeo and Juliet?",
        "What is the largest ocean?",
    ];
    write_rows(
        &data,
        questions.iter().enumerate().map(
            |(i, q)| serde_json::json!({"id": format!("c{i}"), "question": q, "accept": ["the"]}),
        ),
    );
    let requests = |flags: &[&str]| {
        // Every request takes 60 ms: past a 20 ms limit from the first answer on.
        let fake = FakeCloud::start(Script::cycle(&["."])).unwrap();
        fake.push_faults((0..400).map(|_| Fault::Delay(std::time::Duration::from_millis(60))));
        let out = home.path().join(format!("results-{}", flags.len()));
        let budgets = ["--router", "default", "--budgets", "0.3"];
        let (_, results) = eval(
            home.path(),
            &model,
            &fake,
            &data,
            &out,
            &[&budgets, flags].concat(),
        );
        let default = results["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["router"] == "default")
            .unwrap()
            .clone();
        (default["cloud_requests"].as_u64().unwrap(), results)
    };
    let (patient, results) = requests(&[]);
    assert!(results.get("max_wait_ms").is_none(), "{results}");
    let (limited, results) = requests(&["--max-wait-ms", "20"]);
    assert_eq!(results["max_wait_ms"], 20);
    assert!(limited >= 1, "the first request measures the wait");
    assert!(
        limited < patient,
        "{limited} requests under the limit, {patient} without"
    );
}

#[test]
fn eval_scores_open_prompts_by_the_judges_log_probability() {
    let Some(model) = smollm2() else { return };
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" zebra", " 1987", " ,;"])).unwrap();
    let data = home.path().join("open.jsonl");
    // Prompts with short replies: the edge decodes every reply of every run.
    let prompts = [
        "Say hello in one short sentence.",
        "Name three colours.",
        "Write a four-word title for a story about a cat.",
    ];
    write_rows(
        &data,
        prompts
            .iter()
            .enumerate()
            .map(|(i, q)| serde_json::json!({"id": format!("o{i}"), "question": q})),
    );
    let out = home.path().join("results");
    let (stdout, results) = eval(
        home.path(),
        &model,
        &fake,
        &data,
        &out,
        &[
            "--router",
            "entropy",
            "--budgets",
            "0,0.2",
            "--judge",
            model.to_str().unwrap(),
        ],
    );
    assert_eq!(results["metric"], "judge-log-prob", "{results}");
    assert_eq!(results["judge"], model.to_str().unwrap());
    let score = |router: &str| -> f64 {
        let run = results["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["router"] == router)
            .unwrap_or_else(|| panic!("no {router} run: {results}"));
        let score = run["score"].as_f64().unwrap();
        let interval = &run["score_interval"];
        assert!(interval["low"].as_f64().unwrap() <= score + 1e-12);
        assert!(interval["high"].as_f64().unwrap() >= score - 1e-12);
        assert_eq!(run["n"], 3);
        assert!(
            run.get("broken_splices").is_none(),
            "a judged reply is never simply wrong: {run}"
        );
        score
    };
    // The judge is the edge model. The fake cloud's word out of nowhere changes what it
    // scores (and, sent with a stop when two tokens were asked for, ends the reply there).
    let (edge, routed) = (score("edge-only"), score("entropy"));
    assert!(
        edge < 0.0 && routed < 0.0 && (edge - routed).abs() > 1e-3,
        "edge {edge}, routed {routed}"
    );
    assert!(stdout.contains("log-prob"), "{stdout}");
    let replies: Vec<serde_json::Value> = std::fs::read_to_string(out.join("replies.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    for reply in &replies {
        assert!(reply["answer"].is_null() && reply["outcome"].as_f64().unwrap() < 0.0);
    }
    // Every routed reply that took a cloud token reads differently from the edge's own reply
    // to the same prompt, and the judge scores it differently: the score follows the text.
    let of = |router: &str, id: &serde_json::Value| {
        replies
            .iter()
            .find(|r| r["router"] == router && r["question"] == *id)
            .unwrap_or_else(|| panic!("no {router} reply to {id}"))
    };
    let routed: Vec<_> = replies
        .iter()
        .filter(|r| r["router"] == "entropy" && r["cloud_tokens"].as_u64().unwrap() > 0)
        .collect();
    assert!(!routed.is_empty(), "no routed reply took a cloud token");
    for reply in routed {
        let own = of("edge-only", &reply["question"]);
        assert_ne!(reply["reply"], own["reply"], "{reply}");
        assert_ne!(reply["outcome"], own["outcome"], "{reply}");
    }
    let svg = std::fs::read_to_string(out.join("chart.svg")).unwrap();
    assert!(svg.contains("judge log-prob/token"));
}

#[test]
fn open_prompts_are_not_mixed_with_graded_rows_nor_labelled_by_continuation() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("mixed.jsonl");
    std::fs::write(
        &data,
        concat!(
            r#"{"id": "o", "question": "Write a haiku."}"#,
            "\n",
            r#"{"id": "c", "question": "Capital of France?", "accept": ["Paris"]}"#,
            "\n"
        ),
    )
    .unwrap();
    let output = tandem(home.path())
        .args(["eval", "--out", "x", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("evaluate them apart"),
        "{stderr}"
    );
    let output = tandem(home.path())
        .args(["train-router", "--out", "x.safetensors", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("--judged"),
        "{stderr}"
    );
}

#[test]
fn serve_takes_only_json_from_key_holders_and_refuses_huge_bodies() {
    let Some(model) = smollm2() else { return };
    let home = tempfile::tempdir().unwrap();
    let (_server, line) = serve(home.path(), &model, Some("sk-local-test"));
    let base = served_url(&line);
    assert!(line.contains("TANDEM_SERVE_API_KEY"), "{line}");
    // A fresh connection per request: the server closes one whose body it refused to read.
    let http = reqwest::blocking::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let root = base.trim_end_matches("/v1");
    let status = |r: reqwest::blocking::RequestBuilder| r.send().unwrap().status().as_u16();

    assert_eq!(status(http.get(format!("{root}/health"))), 200);
    assert_eq!(status(http.get(format!("{base}/models"))), 401);
    assert_eq!(
        status(http.get(format!("{base}/models")).bearer_auth("sk-wrong")),
        401
    );
    assert_eq!(
        status(
            http.get(format!("{base}/models"))
                .bearer_auth("sk-local-test")
        ),
        200
    );
    // What any web page may send to 127.0.0.1 without asking first.
    let page = http
        .post(format!("{base}/completions"))
        .bearer_auth("sk-local-test")
        .header("Content-Type", "text/plain")
        .body(r#"{"prompt":"hi","max_tokens":1}"#);
    assert_eq!(status(page), 415);
    let huge = format!(r#"{{"prompt":"{}","max_tokens":1}}"#, "a".repeat(3 << 20));
    let huge = http
        .post(format!("{base}/completions"))
        .bearer_auth("sk-local-test")
        .header("Content-Type", "application/json")
        .body(huge)
        .send();
    // Refused from its Content-Length: the 413 arrives, or the connection closes while the
    // client is still uploading. Either way the server read none of it and serves on.
    if let Ok(response) = huge {
        assert_eq!(response.status().as_u16(), 413);
    }
    let fine = http
        .post(format!("{base}/completions"))
        .bearer_auth("sk-local-test")
        .json(&serde_json::json!({"prompt": "Hi", "max_tokens": 2}));
    assert_eq!(status(fine), 200);
}

/// `tandem generate` killed (SIGKILL) at 20 random moments of a priced, routed reply: the
/// spend ledger always reads back (never the "unreadable, counts as capped" state), what it
/// recorded never goes down, and no half-written file is left in the data folder.
#[test]
fn generate_killed_at_twenty_moments_leaves_the_spend_ledger_whole() {
    let Some(model) = smollm2() else { return };
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("config")).unwrap();
    std::fs::write(
        home.path().join("config/config.toml"),
        "[budget]\nmax_share = 0.5\nprices = { input_per_mtok = 1.0, output_per_mtok = 2.0 }\n",
    )
    .unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean", " waves"])).unwrap();
    let ledger = tandem_core::spend::SpendLedger::new(&home.path().join("data"));
    let (mut moments, mut spent) = (tandem_core::sampling::SplitMix64::new(20), 0.0);
    for _ in 0..20 {
        let mut child = generate(
            home.path(),
            &model,
            &fake,
            "Tell me about the sea.",
            &["--max-tokens", "32", "--router", "entropy"],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
        let after_ms = 200 + moments.next_u64() % 1500;
        std::thread::sleep(std::time::Duration::from_millis(after_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        let today = ledger.today();
        assert!(!today.unknown_before, "the ledger became unreadable");
        assert!(today.usd >= spent, "recorded spend went down");
        spent = today.usd;
        // A run killed before it wrote anything (a loaded machine starts slowly) leaves no
        // data folder at all, and so nothing half-written.
        let entries = match std::fs::read_dir(home.path().join("data")) {
            Ok(entries) => entries.map(|e| e.unwrap()).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("reading the data folder: {e}"),
        };
        let stray: Vec<_> = entries
            .iter()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            // A kill between writing `.tandem-*.tmp` and renaming it leaves that file (swept
            // at the next start); any other temporary file would be half-written.
            .filter(|name| name.ends_with(".tmp") && !name.starts_with(".tandem-"))
            .collect();
        assert!(stray.is_empty(), "half-written files: {stray:?}");
    }
    eprintln!("${spent:.6} recorded over 20 killed runs");
}

/// A priced home with a daily cap: `$0.001` a completion token, nothing for the prompt, so a
/// request for a span of 4 is booked at `$0.004`; the cap of `$0.02` holds five of them.
const CAPPED: &str = "[budget]\nmax_share = 1.0\ndaily_spend_cap_usd = 0.02\n\
                      prices = { input_per_mtok = 0.0, output_per_mtok = 1000.0 }\n";
const ONE_REQUEST_USD: f64 = 0.004;

fn capped_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("config")).unwrap();
    std::fs::write(home.path().join("config/config.toml"), CAPPED).unwrap();
    home
}

/// The app's engine and `tandem generate` spend as fast as they can against one ledger
/// under a daily cap, each wanting every token from the cloud: together they pass the cap
/// by at most one request's estimate (each used to read today's spend once per reply, so
/// each could spend the whole cap).
#[test]
fn the_app_and_generate_spending_at_once_keep_the_daily_cap_between_them() {
    let Some(model) = smollm2() else { return };
    let home = capped_home();
    let fake = FakeCloud::start(Script::cycle(&[" ocean", " waves"])).unwrap();
    // Every request takes 150 ms, so both processes are mid-reply together.
    fake.push_faults((0..40).map(|_| Fault::Delay(std::time::Duration::from_millis(150))));
    let flags = [
        "--max-tokens",
        "48",
        "--router",
        "cloud-only",
        "--span",
        "4",
    ];
    let cli = generate(home.path(), &model, &fake, "Tell me about the sea.", &flags)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let paths = tandem_core::paths::Paths {
        config: home.path().join("config"),
        data: home.path().join("data"),
        cache: home.path().join("cache"),
    };
    let mut config = tandem_core::config::Config::load(&paths.config.join("config.toml")).unwrap();
    config.edge = model.to_str().unwrap().to_owned();
    config.threads = Some(1);
    config.max_tokens = 48;
    config.cloud.url = fake.base_url();
    config.router.kind = tandem_core::router::RouterKind::CloudOnly;
    let chat = config.chat_settings();
    let settled = tandem_core::startup::Settled::new(config, &paths).unwrap();
    let app = tandem_core::engine_thread::EngineThread::spawn(settled, paths.clone()).unwrap();
    let reply = app
        .reply(
            vec![tandem_core::message::Message::user(
                "Tell me about the mountains.",
            )],
            tandem_core::history::ReplyMode::Routed,
            chat,
        )
        .unwrap();
    let mut app_cloud_tokens = 0;
    for event in reply.events.iter() {
        if let tandem_core::event::Event::Finished { usage, .. } = event {
            app_cloud_tokens = usage.cloud_tokens;
            break;
        }
    }
    let events = json_events(&cli.wait_with_output().unwrap());
    let cli_cloud_tokens = events.last().unwrap()["usage"]["cloud_tokens"]
        .as_u64()
        .unwrap();
    let today = tandem_core::spend::SpendLedger::new(&paths.data).today();
    eprintln!(
        "spent ${:.4} of $0.02 (cloud tokens: app {app_cloud_tokens}, generate {cli_cloud_tokens}; {} requests)",
        today.usd,
        fake.requests()
    );
    assert!(
        today.usd <= 0.02 + ONE_REQUEST_USD + 1e-9,
        "the cap was passed by more than one request: {today:?}"
    );
    assert!(
        today.usd >= 0.02 - ONE_REQUEST_USD - 1e-9,
        "the cap was not reached: {today:?}"
    );
    assert!(
        today.reserved_usd.abs() < 1e-9,
        "every request was settled: {today:?}"
    );
}

/// `tandem generate` killed (SIGKILL) while a priced request is away: the request's worst
/// case is already in today's spend, since the provider may bill a request it received.
#[test]
fn generate_killed_mid_request_leaves_the_request_counted() {
    let Some(model) = smollm2() else { return };
    let home = capped_home();
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    fake.push_faults([Fault::Delay(std::time::Duration::from_secs(30))]);
    let flags = [
        "--max-tokens",
        "16",
        "--router",
        "cloud-only",
        "--span",
        "4",
    ];
    let mut child = generate(home.path(), &model, &fake, "Tell me about the sea.", &flags)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while fake.requests() == 0 {
        assert!(started.elapsed().as_secs() < 60, "no request was sent");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    let today = tandem_core::spend::SpendLedger::new(&home.path().join("data")).today();
    assert!(
        (today.usd - ONE_REQUEST_USD).abs() < 1e-9
            && (today.reserved_usd - ONE_REQUEST_USD).abs() < 1e-9,
        "the request in flight is not counted: {today:?}"
    );
}

#[test]
fn train_router_judged_reads_the_stand_in_in_process_and_refuses_what_it_cannot_judge() {
    let Some(model) = smollm2() else { return };
    let Some(tiny) = tandem_test_peers::model(tandem_test_peers::TINY) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let data = ten_questions(home.path());
    let features = home.path().join("features");
    let train = |extra: &[&std::ffi::OsStr]| {
        let output = tandem(home.path())
            .args(["train-router", "--judged", "--threads", "1", "--limit", "3"])
            .arg("--edge")
            .arg(&model)
            .arg("--data")
            .arg(&data)
            .arg("--features")
            .arg(&features)
            .arg("--out")
            .arg(home.path().join("router.safetensors"))
            .args(extra)
            .output()
            .unwrap();
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    // A remote cloud cannot be read in-process.
    let url = train(&["--cloud".as_ref(), "http://127.0.0.1:9/v1".as_ref()]);
    assert!(url.contains("not a URL"), "{url}");
    // Another vocabulary: token ids would be compared across two tokenizers.
    let other = train(&["--stand-in".as_ref(), tiny.as_os_str()]);
    assert!(other.contains("does not share"), "{other}");
    assert!(!features.exists(), "nothing collected before the refusal");
    // The edge judging itself: every reply collected, no request, nothing critical, so there
    // is nothing to train on, and it says so.
    let itself = train(&["--stand-in".as_ref(), model.as_os_str()]);
    assert!(itself.contains("no positive records"), "{itself}");
    let set = tandem_eval::features::FeatureSet::read(&features).unwrap();
    let examples: std::collections::BTreeSet<u32> = set.records.iter().map(|r| r.example).collect();
    assert_eq!(examples.len(), 3);
    assert!(set.header.prompt.ends_with("(judged)"));
}

/// `tandem serve` dies with the test, passed or failed.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `tandem serve` on a free loopback port (with `key` as its API key) and returns it
/// with the line it printed once listening.
fn serve(home: &std::path::Path, model: &std::path::Path, key: Option<&str>) -> (Server, String) {
    use std::io::BufRead;
    let mut command = tandem(home);
    command
        .args(["serve", "--port", "0", "--threads", "1", "--context", "512"])
        .arg("--model")
        .arg(model)
        .env_remove("TANDEM_SERVE_API_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    if let Some(key) = key {
        command.env("TANDEM_SERVE_API_KEY", key);
    }
    let mut server = Server(command.spawn().unwrap());
    let mut line = String::new();
    std::io::BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (server, line)
}

/// The base URL in `tandem serve`'s "listening on" line.
fn served_url(line: &str) -> String {
    line.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned()
}

/// Without a key, `tandem serve` answers only requests that name this machine and come from
/// no web page or one on this machine: what a page on another site sends (its own `Host`
/// after a DNS rebinding, its `Origin`, a body with no content type) is refused.
#[test]
fn serve_without_a_key_answers_only_this_machine() {
    let Some(model) = smollm2() else { return };
    let home = tempfile::tempdir().unwrap();
    let (_server, line) = serve(home.path(), &model, None);
    let base = served_url(&line);
    let http = reqwest::blocking::Client::new();
    let status = |r: reqwest::blocking::RequestBuilder| r.send().unwrap().status().as_u16();
    let ask = || {
        http.post(format!("{base}/completions"))
            .json(&serde_json::json!({"prompt": "Hi", "max_tokens": 1}))
    };
    assert_eq!(status(ask()), 200);
    assert_eq!(
        status(ask().header("Origin", format!("http://127.0.0.1:{}", 1420))),
        200
    );
    assert_eq!(status(ask().header("Host", "rebound.example:8081")), 421);
    assert_eq!(status(ask().header("Origin", "https://evil.example")), 403);
    assert_eq!(status(ask().header("Origin", "null")), 403);
    let no_content_type = http
        .post(format!("{base}/completions"))
        .body(r#"{"prompt":"hi","max_tokens":1}"#);
    assert_eq!(status(no_content_type), 415);
}

#[test]
fn serve_refuses_to_listen_beyond_this_machine_without_a_key() {
    let home = tempfile::tempdir().unwrap();
    let out = tandem(home.path())
        .args(["serve", "--host", "0.0.0.0", "--port", "0"])
        .env_remove("TANDEM_SERVE_API_KEY")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("without a key") && said.contains("TANDEM_SERVE_API_KEY"),
        "{said}"
    );
}

/// The stand-in started for a front end answers only that front end: it has a key for this
/// run, handed over in memory and in the child's environment (never in the settings file or
/// on a command line), and a request without it, from another program or user on this
/// machine, is refused.
#[test]
fn the_stand_in_answers_only_the_process_that_started_it() {
    use tandem_core::cloud::{CloudClient, CloudConfig};
    let Some(model) = smollm2() else { return };
    let home = tempfile::tempdir().unwrap();
    let paths = tandem_core::paths::Paths {
        config: home.path().join("config"),
        data: home.path().join("data"),
        cache: home.path().join("cache"),
    };
    let mut config = tandem_core::config::Config {
        edge: model.display().to_string(),
        threads: Some(1),
        context: 512,
        ..Default::default()
    };
    config.serve.model = model.display().to_string();
    // This test binary has no `tandem` beside it.
    std::env::set_var(
        tandem_core::startup::PROGRAM_VAR,
        env!("CARGO_BIN_EXE_tandem"),
    );
    let prepared = tandem_core::startup::prepare(config, &paths).unwrap();
    assert!(prepared.notices.is_empty(), "{:?}", prepared.notices);
    let settled = &prepared.settled.config;
    let url = settled.cloud.url.clone();
    assert!(settled.cloud.api_key.is_some(), "a key for this run");
    let file = home.path().join("saved.toml");
    settled.save(&file).unwrap();
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(
        !saved.contains("tandem-run-"),
        "the key never reaches the file: {saved}"
    );
    let stranger = reqwest::blocking::get(format!("{url}/models")).unwrap();
    assert_eq!(stranger.status(), 401);
    let (client, _) = CloudConfig::from_settings(&url, &settled.cloud);
    let served = CloudClient::new(client).unwrap().check().unwrap();
    assert!(!served.is_empty());
    // Let go of, it stops: nothing is left listening.
    drop(prepared);
    assert!(reqwest::blocking::get(format!("{url}/models")).is_err());
}

/// The stand-in is a child process that must not outlive the front end that started it,
/// even one killed without a chance to stop it: it serves until its standard input closes.
#[test]
fn the_stand_in_stops_when_the_front_end_that_started_it_is_killed() {
    use std::io::{BufRead, BufReader};
    let Some(model) = smollm2() else { return };
    let home = home_serving(&model);
    let mut chat = tandem(home.path())
        .args(["chat", "--edge"])
        .arg(&model)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(chat.stderr.take().unwrap());
    let url = stderr
        .lines()
        .map_while(Result::ok)
        .find_map(|line| {
            let (_, url) = line.split_once("local stand-in cloud: ")?;
            Some(url.rsplit(" on ").next()?.to_owned())
        })
        .expect("the chat names its stand-in");
    let models = format!("{url}/models");
    assert_eq!(reqwest::blocking::get(&models).unwrap().status(), 401);
    chat.kill().unwrap();
    chat.wait().unwrap();
    let gone = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        reqwest::blocking::get(&models).is_err()
    });
    assert!(
        gone,
        "the stand-in at {url} still answers after its parent was killed"
    );
}

/// Without the `tandem` program to run it, the stand-in cannot start: replies are local and
/// the user is told why and what to do.
#[test]
fn a_stand_in_that_cannot_be_run_leaves_replies_local_and_says_why() {
    let Some(model) = smollm2() else { return };
    let home = home_serving(&model);
    let output = tandem(home.path())
        .env(
            tandem_core::startup::PROGRAM_VAR,
            home.path().join("no-such-tandem"),
        )
        .args([
            "generate",
            "--json",
            "--max-tokens",
            "4",
            "--prompt",
            "Hi",
            "--edge",
        ])
        .arg(&model)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("the local stand-in cannot start")
            && stderr.contains("no-such-tandem")
            && stderr.contains("replying locally"),
        "{stderr}"
    );
    let events = json_events(&output);
    assert!(events[0]["cloud"].is_null());
}
