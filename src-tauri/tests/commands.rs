//! The app's commands through Tauri's IPC, on the mock runtime (no window, no display).

use tauri::ipc::{CallbackFn, InvokeBody};
use tauri::test::{get_ipc_response, mock_builder, INVOKE_KEY};
use tauri::webview::InvokeRequest;

#[test]
fn the_models_command_lists_the_catalogue_with_download_state() {
    let home = tempfile::tempdir().unwrap();
    std::env::set_var("TANDEM_HOME", home.path());
    let app = tandem_app::build(mock_builder()).unwrap();
    // The mock runtime does not open the configured window; open one with its label.
    let window = tauri::WebviewWindowBuilder::new(&app, "main", Default::default())
        .build()
        .unwrap();
    let response = get_ipc_response(
        &window,
        InvokeRequest {
            cmd: "models".into(),
            callback: CallbackFn(0),
            error: CallbackFn(1),
            url: "tauri://localhost".parse().unwrap(),
            body: InvokeBody::default(),
            headers: Default::default(),
            invoke_key: INVOKE_KEY.to_string(),
        },
    )
    .expect("the command answers");
    let models: Vec<serde_json::Value> = response.deserialize().unwrap();
    let edge = models
        .iter()
        .find(|m| m["name"] == "qwen2.5-coder-0.5b")
        .unwrap();
    assert_eq!(
        edge["pulled"], false,
        "nothing is downloaded in a fresh home"
    );
    assert_eq!(edge["bytes"], 491_400_064u64);
}
