//! The running server and its lifecycle.
//!
//! The server owns a current-thread tokio runtime on its own OS thread, so tests stay plain
//! `#[test]` functions and the fake never competes with the runtime of the code under test.
//! Stopping drops that runtime, which closes the listening socket and every open connection
//! at once: a test that stops the cloud sees refused connections, not lingering keep-alives.

use std::future::IntoFuture;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::fault::Fault;
use crate::routes;
use crate::script::Script;
use crate::state::{RecordedRequest, Shared};

/// A running fake cloud on 127.0.0.1; dropping it stops the server.
#[derive(Debug)]
pub struct FakeCloud {
    port: u16,
    shared: Arc<Shared>,
    running: Mutex<Option<Running>>,
}

#[derive(Debug)]
struct Running {
    shutdown: oneshot::Sender<()>,
    thread: JoinHandle<()>,
}

impl FakeCloud {
    /// Binds 127.0.0.1 on a free port and serves `script` on its own thread (with its own
    /// tokio current-thread runtime); returns once the port is listening.
    pub fn start(script: Script) -> io::Result<FakeCloud> {
        FakeCloud::start_on(0, script)
    }

    /// Like [`FakeCloud::start`] on a given port (0 picks a free one).
    pub fn start_on(port: u16, script: Script) -> io::Result<FakeCloud> {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))?;
        let port = listener.local_addr()?.port();
        listener.set_nonblocking(true)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let listener = {
            let _context = runtime.enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        let shared = Arc::new(Shared::new(script));
        let app = routes::router(Arc::clone(&shared));
        let (shutdown, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("tandem-fake-cloud-{port}"))
            .spawn(move || {
                runtime.spawn(axum::serve(listener, app).into_future());
                // A dropped handle counts as a stop request too.
                let _ = runtime.block_on(stopped);
                // Dropping the runtime cancels the server and its connections, closing them.
                drop(runtime);
            })?;
        Ok(FakeCloud {
            port,
            shared,
            running: Mutex::new(Some(Running { shutdown, thread })),
        })
    }

    /// The OpenAI base URL, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Number of completion requests received (both `/v1/completions` and
    /// `/v1/chat/completions`), those answered with a fault included.
    pub fn requests(&self) -> usize {
        self.shared.requests()
    }

    /// Every completion request received, in order.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        self.shared.recorded()
    }

    /// Queues faults for the next completion requests, one per request in order; once the
    /// queue is empty, requests succeed again.
    pub fn push_faults(&self, faults: impl IntoIterator<Item = Fault>) {
        self.shared.push_faults(faults);
    }

    /// Stops the server: when this returns the port is closed and later connections are
    /// refused. Stopping twice is harmless.
    pub fn stop(&self) {
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(Running { shutdown, thread }) = running {
            let _ = shutdown.send(());
            // The server thread only panics on a bug in the fake; the stop itself happened.
            let _ = thread.join();
        }
    }
}

impl Drop for FakeCloud {
    fn drop(&mut self) {
        self.stop();
    }
}
