//! The app on Tauri's mock runtime (no window, no display), called the way the web UI calls
//! it: camelCase arguments in, the JSON answer or the `{kind, message}` error out. Shared by
//! the command tests and the fixture writer, so both drive the same real commands.

use serde_json::Value;
use std::path::Path;
use tandem_core::paths::Paths;
use tauri::ipc::{CallbackFn, InvokeBody};
use tauri::test::{get_ipc_response, mock_builder, MockRuntime, INVOKE_KEY};
use tauri::webview::InvokeRequest;
use tauri::WebviewWindow;

/// A channel argument as the JS side sends it (the mock runtime drops what it receives).
pub const CHANNEL: &str = "__CHANNEL__:7";

/// An app on the mock runtime with its data in a home folder, and its main window.
pub struct App {
    _app: tauri::App<MockRuntime>,
    window: WebviewWindow<MockRuntime>,
}

impl App {
    /// Starts the app with its config, data and cache under `home`.
    pub fn start(home: &Path) -> App {
        let paths = Paths {
            config: home.join("config"),
            data: home.join("data"),
            cache: home.join("cache"),
        };
        let app = tandem_app::build(mock_builder(), paths).unwrap();
        // The mock runtime does not open the configured window; open one with its label.
        let window = tauri::WebviewWindowBuilder::new(&app, "main", Default::default())
            .build()
            .unwrap();
        App { _app: app, window }
    }

    /// Calls a command; `Err` holds the error the UI would get.
    pub fn call(&self, cmd: &str, args: Value) -> Result<Value, Value> {
        get_ipc_response(
            &self.window,
            InvokeRequest {
                cmd: cmd.into(),
                callback: CallbackFn(0),
                error: CallbackFn(1),
                url: "tauri://localhost".parse().unwrap(),
                body: InvokeBody::Json(args),
                headers: Default::default(),
                invoke_key: INVOKE_KEY.to_string(),
            },
        )
        .map(|response| response.deserialize::<Value>().unwrap())
    }
}
