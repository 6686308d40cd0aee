//! Direct downloads over HTTP(S): resumable with a `Range` request, with progress. A
//! server that stops sending ends the attempt after [`STALL`] instead of holding the pull
//! forever; the bytes received stay in the partial file for the next attempt.

use super::PullProgress;
use reqwest::blocking::Client;
use reqwest::header::RANGE;
use reqwest::StatusCode;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

/// How long a download may go without receiving a byte (reqwest's blocking timeout bounds
/// the connection, the headers and each read of the body).
pub(super) const STALL: Duration = Duration::from_secs(30);

/// Why a download stopped, in words for the user (the partial file is kept unless said).
#[derive(Debug, thiserror::Error)]
pub(super) enum DownloadError {
    /// No connection, or the request failed (the innermost cause).
    #[error("{0}")]
    Request(String),
    /// The server answered with a status that holds no bytes of the file.
    #[error("HTTP {0}")]
    Status(StatusCode),
    /// The body broke off.
    #[error("{error} after {done} of {total} bytes; pull again to resume")]
    Read {
        error: std::io::Error,
        done: u64,
        total: u64,
    },
    /// The connection ended early.
    #[error("the connection closed after {done} of {total} bytes; pull again to resume")]
    Closed { done: u64, total: u64 },
    /// The server sent more than the catalogue's size; the download was deleted.
    #[error(
        "the server sent more than the model's {0} bytes; stopped there and deleted the \
         download (a wrong or hostile mirror)"
    )]
    TooLong(u64),
    /// The partial file could not be opened or written.
    #[error("{what} {}: {error}", path.display())]
    File {
        what: &'static str,
        path: std::path::PathBuf,
        error: std::io::Error,
    },
}

/// Downloads `url` into `partial`, continuing from what `partial` already holds; `stall`
/// bounds each wait for bytes. On failure the partial file is kept for the next attempt.
pub(super) fn fetch(
    url: &str,
    partial: &Path,
    total: u64,
    stall: Duration,
    progress: &mut dyn FnMut(PullProgress),
) -> Result<(), DownloadError> {
    let mut have = partial.metadata().map_or(0, |m| m.len());
    if have > total {
        have = 0;
    }
    let client = Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(stall)
        .build()
        .map_err(|e| DownloadError::Request(describe(&e)))?;
    let mut request = client.get(url);
    if have > 0 {
        request = request.header(RANGE, format!("bytes={have}-"));
    }
    let mut response = request
        .send()
        .map_err(|e| DownloadError::Request(describe(&e)))?;
    let file_error = |what, error| DownloadError::File {
        what,
        path: partial.to_path_buf(),
        error,
    };
    let (mut file, mut done) = match response.status() {
        StatusCode::PARTIAL_CONTENT => (
            OpenOptions::new()
                .append(true)
                .open(partial)
                .map_err(|e| file_error("reopening", e))?,
            have,
        ),
        StatusCode::OK => (
            File::create(partial).map_err(|e| file_error("creating", e))?,
            0,
        ),
        StatusCode::RANGE_NOT_SATISFIABLE if have == total => return Ok(()),
        status => return Err(DownloadError::Status(status)),
    };
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = match response.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(error) => return Err(DownloadError::Read { error, done, total }),
        };
        if done + n as u64 > total {
            drop(file);
            let _ = std::fs::remove_file(partial);
            return Err(DownloadError::TooLong(total));
        }
        file.write_all(&buffer[..n])
            .map_err(|e| file_error("writing", e))?;
        done += n as u64;
        progress(PullProgress { done, total });
    }
    file.sync_all().map_err(|e| file_error("writing", e))?;
    if done != total {
        return Err(DownloadError::Closed { done, total });
    }
    Ok(())
}

/// reqwest's own message is "error sending request"; the cause is what helps.
fn describe(e: &reqwest::Error) -> String {
    let mut current: &dyn std::error::Error = e;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

#[cfg(test)]
mod tests {
    use super::super::{pull, CatalogueEntry};
    use super::{fetch, Duration};
    use sha2::{Digest, Sha256};
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    /// An HTTP server on 127.0.0.1 that serves `body`, honours `Range`, and cuts the first
    /// response off halfway, as a dropped connection would, after holding the connection
    /// open for `hold` (a stalled server). Returns its URL and the Range headers it saw.
    fn flaky_server(
        body: Vec<u8>,
        hold: Duration,
    ) -> (String, std::sync::mpsc::Receiver<Option<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/model.gguf", listener.local_addr().unwrap());
        let (seen, ranges) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().take(2).enumerate() {
                let mut stream = stream.unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut range = None;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if line.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
                        range = Some(v.trim().trim_end_matches('-').to_owned());
                    }
                }
                seen.send(range.clone()).unwrap();
                let start: usize = range.as_deref().map_or(0, |r| r.parse().unwrap());
                let rest = &body[start..];
                let head = if start > 0 {
                    format!(
                        "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{}\r\nConnection: close\r\n\r\n",
                        rest.len(),
                        body.len() - 1,
                        body.len()
                    )
                } else {
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        rest.len()
                    )
                };
                stream.write_all(head.as_bytes()).unwrap();
                let cut = if n == 0 { rest.len() / 2 } else { rest.len() };
                stream.write_all(&rest[..cut]).unwrap();
                if n == 0 {
                    std::thread::sleep(hold);
                }
            }
        });
        (url, ranges)
    }

    fn entry(body: &[u8], url: String) -> CatalogueEntry {
        CatalogueEntry {
            name: "test-model".into(),
            role: "test".into(),
            file: "model.gguf".into(),
            bytes: body.len() as u64,
            sha256: hex::encode(Sha256::digest(body)),
            url: Some(url),
            packages: Vec::new(),
        }
    }

    fn body() -> Vec<u8> {
        (0..300_000u32).flat_map(|i| i.to_le_bytes()).collect()
    }

    #[test]
    fn an_interrupted_download_resumes_where_it_stopped_and_is_verified() {
        let body = body();
        let (url, ranges) = flaky_server(body.clone(), Duration::ZERO);
        let dir = tempfile::tempdir().unwrap();
        let mut last = None;
        // One pull: the dropped connection is resumed at once, not left to the user.
        let path = pull(&entry(&body, url), dir.path(), &mut |p| last = Some(p)).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), body);
        assert_eq!(last.unwrap().done, body.len() as u64);
        assert_eq!(ranges.recv().unwrap(), None);
        assert_eq!(
            ranges.recv().unwrap(),
            Some((body.len() / 2).to_string()),
            "the second request resumed"
        );
        assert!(!dir.path().join("model.gguf.part").exists());
    }

    #[test]
    fn a_stalled_server_ends_the_attempt_and_keeps_what_arrived() {
        let body = body();
        let (url, _ranges) = flaky_server(body.clone(), Duration::from_secs(20));
        let dir = tempfile::tempdir().unwrap();
        let partial = dir.path().join("model.gguf.part");
        let started = std::time::Instant::now();
        let err = fetch(
            &url,
            &partial,
            body.len() as u64,
            Duration::from_millis(300),
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "waited {:?} on a silent server",
            started.elapsed()
        );
        assert!(err.contains("pull again to resume"), "{err}");
        assert_eq!(
            std::fs::metadata(&partial).unwrap().len(),
            body.len() as u64 / 2
        );
    }

    /// A server that sends more than the model's size is cut off at it, and the pull fails
    /// without filling the disk or installing anything.
    #[test]
    fn a_download_past_the_expected_size_is_stopped() {
        let body = body();
        let (url, _ranges) = flaky_server(body.clone(), Duration::ZERO);
        let dir = tempfile::tempdir().unwrap();
        let mut expected = entry(&body, url);
        expected.bytes = 1000;
        let err = pull(&expected, dir.path(), &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than the model's 1000 bytes"), "{err}");
        assert!(!dir.path().join("model.gguf.part").exists());
        assert!(!dir.path().join("model.gguf").exists());
    }

    /// A file of the right size but the wrong content where a pulled model should be is
    /// verified, found wrong, and replaced by a verified download.
    #[test]
    fn a_same_size_file_in_place_of_the_model_is_replaced() {
        let body = body();
        let (url, ranges) = flaky_server(body.clone(), Duration::ZERO);
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("model.gguf");
        std::fs::write(&target, vec![0u8; body.len()]).unwrap();
        let path = pull(&entry(&body, url), dir.path(), &mut |_| {}).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), body);
        assert_eq!(ranges.recv().unwrap(), None, "it was downloaded");
    }
}
