//! Generates Tauri's context (config, capabilities, icons) at compile time.

fn main() {
    tauri_build::build()
}
