//! The accept loop of `tandem serve` and the stand-in, with the limits a slow or hostile
//! client meets: at most [`MAX_CONNECTIONS`] connections are open at once (past it new
//! ones wait in the system's backlog until one closes), and a connection must send a
//! request's headers within [`HEADER_TIMEOUT`] of opening or of its last answer (so a
//! connection kept alive and idle that long is closed too, as a client's pool expects), and
//! its body may not stop arriving for longer than [`BODY_TIMEOUT`]. Without these,
//! connections that never finish their headers or their body stay open for ever and each
//! holds a file descriptor and a task; 32 of them would shut everyone else out. A shutdown stops accepting and lets requests
//! in flight finish.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower_http::timeout::RequestBodyTimeoutLayer;

/// Connections open at once. The model runs one request at a time and queues
/// [`crate::MAX_WAITING`] more, so a handful of clients use few; this leaves room for many
/// idle keep-alive connections while bounding what a flood of them holds.
pub const MAX_CONNECTIONS: usize = 32;

/// How long a connection may take to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request's body may stop arriving before the request is refused (400) and
/// its connection closed.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a shutdown waits for requests in flight.
const DRAIN: Duration = Duration::from_secs(5);

/// What one connection and all of them together may hold.
#[derive(Debug, Clone, Copy)]
struct Limits {
    connections: usize,
    header_timeout: Duration,
    body_timeout: Duration,
}

const LIMITS: Limits = Limits {
    connections: MAX_CONNECTIONS,
    header_timeout: HEADER_TIMEOUT,
    body_timeout: BODY_TIMEOUT,
};

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve_within(listener, router, shutdown, LIMITS).await
}

async fn serve_within(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
    limits: Limits,
) -> std::io::Result<()> {
    let router = router.layer(RequestBodyTimeoutLayer::new(limits.body_timeout));
    let open = Arc::new(Semaphore::new(limits.connections));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = open.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of descriptors, or a connection reset before it was accepted: the
                // listener itself is fine, so wait a moment and accept again.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            let _ = connection.await;
            drop(slot);
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;
    use axum::routing::{get, post};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// Serves `router` within `limits` on a free loopback port until the test ends.
    async fn serving(router: Router, limits: Limits) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve_within(
            listener,
            router,
            std::future::pending(),
            limits,
        ));
        addr
    }

    /// Sends `request` on a new connection and reads until the server closes it.
    async fn exchange(addr: std::net::SocketAddr, request: &'static [u8]) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(request).await.unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    }

    const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_that_never_finishes_its_headers_is_closed() {
        let limits = Limits {
            connections: 4,
            header_timeout: Duration::from_millis(300),
            body_timeout: BODY_TIMEOUT,
        };
        let addr = serving(Router::new().route("/", get(|| async { "ok" })), limits).await;
        let started = std::time::Instant::now();
        let half = exchange(
            addr,
            b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n",
        );
        let answer = tokio::time::timeout(Duration::from_secs(10), half)
            .await
            .expect("a half-sent request holds its connection open");
        assert!(started.elapsed() >= limits.header_timeout);
        assert!(!answer.contains("200 OK"), "{answer}");
        // Whole requests are still served.
        assert!(exchange(addr, GET).await.contains("200 OK"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_body_that_stops_arriving_is_refused_and_its_connection_closed() {
        let limits = Limits {
            connections: 4,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_millis(300),
        };
        let echo = post(|body: Bytes| async move { format!("read {} bytes", body.len()) });
        let addr = serving(Router::new().route("/", echo), limits).await;
        let started = std::time::Instant::now();
        // Headers promise 100 bytes; 10 come, then nothing (the client keeps its end open).
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(
                b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n0123456789",
            )
            .await
            .unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
            .await
            .expect("a stalled body holds its connection open")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(started.elapsed() >= limits.body_timeout);
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        // A whole body is still read.
        let whole = exchange(
            addr,
            b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 4\r\n\r\nabcd",
        );
        assert!(whole.await.contains("read 4 bytes"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_more_connections_than_the_cap_are_served_at_once() {
        let limits = Limits {
            connections: 4,
            header_timeout: Duration::from_secs(10),
            body_timeout: BODY_TIMEOUT,
        };
        let (release, released) = tokio::sync::watch::channel(false);
        let served = Arc::new(AtomicUsize::new(0));
        let counter = served.clone();
        let slow = get(move || {
            let (counter, mut released) = (counter.clone(), released.clone());
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                let _ = released.wait_for(|r| *r).await;
                "ok"
            }
        });
        let addr = serving(Router::new().route("/", slow), limits).await;
        let clients: Vec<_> = (0..10).map(|_| tokio::spawn(exchange(addr, GET))).collect();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            served.load(Ordering::SeqCst),
            4,
            "only the cap is served at once"
        );
        release.send(true).unwrap();
        for client in clients {
            assert!(client.await.unwrap().contains("200 OK"));
        }
        assert_eq!(
            served.load(Ordering::SeqCst),
            10,
            "the rest are served after"
        );
    }
}
