//! The local stand-in cloud: when no cloud is configured, Tandem serves the configured cloud
//! model (`serve.model`, Qwen2.5-Coder-1.5B by default) on a free port of 127.0.0.1, so
//! routing works out of the box with nothing leaving the machine.
//!
//! It runs as a child process, `tandem serve --stand-in`, so no front end carries an HTTP
//! server of its own (the desktop app least of all): the core starts the `tandem` program
//! installed beside the running one (the `.deb` puts it next to `tandem-app`). The child
//! answers only this run's key, handed over in its environment (never on its command line,
//! which every user of the machine can read), and stops when its standard input closes:
//! when [`StandIn`] is dropped, or when this process dies without dropping it.

use crate::config::Config;
use crate::endpoint::{ApiKey, SERVE_KEY_VAR};
use crate::local::default_threads;
use crate::models::{self, ModelError};
use crate::paths::Paths;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The environment variable naming the `tandem` program that serves the stand-in, where it
/// is not installed beside the running program (tests, development builds).
pub const PROGRAM_VAR: &str = "TANDEM_BIN";

/// How long a stopping stand-in may take to finish before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Why the stand-in could not start (replies are then local).
#[derive(Debug, thiserror::Error)]
pub enum StandInError {
    /// Its model has not been downloaded.
    #[error(
        "no cloud is configured and the local stand-in ({name}) is not downloaded: \
         run `tandem models pull {name}`; replying locally"
    )]
    NotPulled {
        /// The model's catalogue name.
        name: String,
    },
    /// Its model cannot be found or used.
    #[error("the local stand-in cannot start: {0}")]
    Model(ModelError),
    /// The `tandem` program could not be run.
    #[error(
        "the local stand-in cannot start: {} could not be run ({source}); install Tandem's \
         `tandem` program beside this one or name it in {PROGRAM_VAR}; replying locally",
        program.display()
    )]
    Launch {
        /// The program tried.
        program: PathBuf,
        /// Why it did not run.
        source: std::io::Error,
    },
    /// It stopped before it listened (its model did not load, no port was free…).
    #[error("the local stand-in stopped before it was ready: {0}; replying locally")]
    Exited(String),
}

/// A running stand-in; dropping it stops the process.
pub struct StandIn {
    child: Child,
    /// Closed to tell the child to stop.
    stdin: Option<ChildStdin>,
    base_url: String,
}

impl StandIn {
    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Starts `tandem serve --stand-in` for `config`'s `serve.model` and waits until it
    /// listens (its model loaded).
    fn launch(config: &Config, paths: &Paths) -> Result<(StandIn, ApiKey), StandInError> {
        let model = &config.serve.model;
        // Checked here too, so a model not pulled gets its own advice before a process starts.
        models::resolve(model, &paths.models()).map_err(|e| match e {
            ModelError::NotPulled { name } => StandInError::NotPulled { name },
            e => StandInError::Model(e),
        })?;
        let key = run_key();
        let program = program();
        let threads = config.threads.unwrap_or_else(default_threads);
        let mut child = Command::new(&program)
            .args(["serve", "--stand-in", "--model", model])
            .args(["--threads", &threads.to_string()])
            .args(["--context", &config.context.to_string()])
            .env(SERVE_KEY_VAR, key.expose())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| StandInError::Launch { program, source })?;
        let stdin = child.stdin.take();
        let last_error = forward_errors(child.stderr.take());
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut stand_in = StandIn {
            child,
            stdin,
            base_url: String::new(),
        };
        match listening_url(stdout) {
            Some(url) => {
                stand_in.base_url = url;
                Ok((stand_in, key))
            }
            None => {
                let status = stand_in.child.wait().ok();
                let said = last_error.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let why = match (said.is_empty(), status) {
                    (false, _) => said,
                    (true, Some(status)) => format!("it exited ({status})"),
                    (true, None) => "it exited".to_owned(),
                };
                Err(StandInError::Exited(why))
            }
        }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => break,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `tandem` program: [`PROGRAM_VAR`], else the one beside the running program.
fn program() -> PathBuf {
    if let Some(path) = std::env::var_os(PROGRAM_VAR) {
        return path.into();
    }
    let name = format!("tandem{}", std::env::consts::EXE_SUFFIX);
    match std::env::current_exe() {
        Ok(exe) => exe.with_file_name(name),
        Err(_) => name.into(),
    }
}

/// The URL of the child's `listening on URL …` line; `None` when it ends its output first.
fn listening_url(stdout: impl Read) -> Option<String> {
    BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| {
            let url = line
                .strip_prefix("listening on ")?
                .split_whitespace()
                .next()?;
            Some(url.to_owned())
        })
}

/// Passes the child's error output on to this process's, and keeps its last line: why it
/// stopped, when it stops before it is ready.
fn forward_errors(stderr: Option<impl Read + Send + 'static>) -> Arc<Mutex<String>> {
    let last = Arc::new(Mutex::new(String::new()));
    if let Some(stderr) = stderr {
        let kept = Arc::clone(&last);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[stand-in] {line}");
                let said = line.trim().trim_start_matches("Error: ");
                if !said.is_empty() {
                    *kept.lock().unwrap_or_else(|e| e.into_inner()) = said.to_owned();
                }
            }
        });
    }
    last
}

/// A key for this run only, so no other program or user on this machine can use the
/// stand-in: 128 bits from two of the standard library's hash keys, which it draws from the
/// operating system's randomness, hashed so none of them is shown.
fn run_key() -> ApiKey {
    use std::hash::{BuildHasher, Hasher};
    let half = |salt: u64| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(salt);
        hasher.finish()
    };
    ApiKey::new(format!("tandem-run-{:016x}{:016x}", half(1), half(2)))
        .expect("a run key is not empty")
}

/// Starts the stand-in if `config` names no cloud and points `config` at it: its URL, and
/// its model's name (what routers trained for this pair record as the cloud). Returns the
/// running stand-in (keep it alive while the engine is used) and a notice when it could not
/// start (replies are then local).
pub(super) fn attach(config: &mut Config, paths: &Paths) -> (Option<StandIn>, Option<String>) {
    if !config.cloud.wants_stand_in() {
        return (None, None);
    }
    match StandIn::launch(config, paths) {
        Ok((stand_in, key)) => {
            config.cloud.url = stand_in.base_url().to_owned();
            config.cloud.model = Some(config.serve.model.clone());
            config.cloud.api_key = Some(key);
            (Some(stand_in), None)
        }
        Err(why) => (None, Some(why.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_is_read_from_the_listening_line_whatever_follows_it() {
        let out = "loading…\nlistening on http://127.0.0.1:4321/v1 (requests need the key)\n";
        assert_eq!(
            listening_url(out.as_bytes()).as_deref(),
            Some("http://127.0.0.1:4321/v1")
        );
        assert_eq!(listening_url("Error: no model\n".as_bytes()), None);
    }

    #[test]
    fn each_run_has_its_own_key() {
        assert_ne!(run_key(), run_key());
    }
}
