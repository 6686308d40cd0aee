//! A TCP proxy on 127.0.0.1 that puts a network between Tandem and a cloud on this machine.
//!
//! Every figure before this was taken with the cloud on loopback, where a request costs only
//! the server's time; a user's cloud is 50–300 ms away. The proxy delays every byte by half a
//! round trip in each direction (plus jitter), and a new connection's first request by one
//! more round trip (TCP's handshake; TLS would add another), so reusing a connection pays as
//! it does on a real network. Delays are timestamps, not sleeps per read: bytes that arrive
//! together leave together, as on a wire.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// A delaying proxy in front of `upstream`; stops accepting when dropped.
pub struct DelayProxy {
    address: SocketAddr,
    connections: Arc<AtomicU64>,
}

/// How far away the proxied server seems.
#[derive(Debug, Clone, Copy)]
pub struct Distance {
    /// Round-trip time.
    pub rtt: Duration,
    /// Each one-way delay varies by up to this much either way.
    pub jitter: Duration,
}

impl DelayProxy {
    /// Listens on a free loopback port and forwards each connection to `upstream`.
    pub fn start(upstream: SocketAddr, distance: Distance) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let address = listener.local_addr()?;
        let connections = Arc::new(AtomicU64::new(0));
        let counted = connections.clone();
        thread::spawn(move || {
            let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
            for client in listener.incoming().flatten() {
                counted.fetch_add(1, Ordering::Relaxed);
                seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let handshake = Instant::now() + distance.rtt;
                relay(&client, &server, distance, Some(handshake), seed);
                relay(&server, &client, distance, None, seed ^ 1);
            }
        });
        Ok(Self {
            address,
            connections,
        })
    }

    /// The base URL to give a cloud client, with `path` (e.g. `/v1`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Connections opened through the proxy so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
}

/// Copies `from` to `to`, each chunk delivered half a round trip (± jitter) after it was read
/// and never before `not_before` (the handshake). Ends both ways when either side closes.
fn relay(
    from: &TcpStream,
    to: &TcpStream,
    distance: Distance,
    not_before: Option<Instant>,
    seed: u64,
) {
    let (Ok(mut reader), Ok(mut writer)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    let (chunks, arriving) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut jitter = Jitter(seed);
        let mut buffer = vec![0u8; 64 * 1024];
        let mut last = Instant::now();
        while let Ok(n @ 1..) = reader.read(&mut buffer) {
            let mut due = Instant::now() + jitter.around(distance.rtt / 2, distance.jitter);
            if let Some(handshake) = not_before {
                due = due.max(handshake + distance.rtt / 2);
            }
            // A wire keeps order: a chunk never overtakes the one before it.
            due = due.max(last);
            last = due;
            if chunks.send((due, buffer[..n].to_vec())).is_err() {
                break;
            }
        }
    });
    thread::spawn(move || {
        for (due, bytes) in arriving {
            thread::sleep(due.saturating_duration_since(Instant::now()));
            if writer.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = writer.shutdown(Shutdown::Write);
    });
}

/// A small deterministic generator, so two runs see the same jitter.
struct Jitter(u64);

impl Jitter {
    /// `center` moved by up to `spread` either way.
    fn around(&mut self, center: Duration, spread: Duration) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let unit = (self.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        let offset = spread.as_secs_f64() * unit;
        Duration::from_secs_f64((center.as_secs_f64() + offset).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_through_the_proxy_takes_its_round_trip() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let upstream = server.local_addr().unwrap();
        thread::spawn(move || {
            for mut stream in server.incoming().flatten() {
                let mut byte = [0u8; 1];
                while stream.read_exact(&mut byte).is_ok() {
                    stream.write_all(&byte).unwrap();
                }
            }
        });
        let distance = Distance {
            rtt: Duration::from_millis(60),
            jitter: Duration::ZERO,
        };
        let proxy = DelayProxy::start(upstream, distance).unwrap();
        let mut client = TcpStream::connect(proxy.address).unwrap();
        let echo = |client: &mut TcpStream| {
            let sent = Instant::now();
            client.write_all(b"x").unwrap();
            let mut byte = [0u8; 1];
            client.read_exact(&mut byte).unwrap();
            sent.elapsed()
        };
        let first = echo(&mut client);
        let second = echo(&mut client);
        assert!(
            first >= Duration::from_millis(110),
            "handshake + one trip: {first:?}"
        );
        assert!(
            second >= Duration::from_millis(60),
            "one round trip: {second:?}"
        );
        assert_eq!(proxy.connections(), 1);
    }
}
