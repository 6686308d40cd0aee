//! Turning token pieces into text as they stream.
//!
//! A token can end in the middle of a UTF-8 character (emoji, CJK), so pieces are buffered
//! until they complete a character instead of being converted one by one.

/// Accumulates token bytes and releases only complete UTF-8 text.
#[derive(Debug, Default, Clone)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Adds a token's bytes and returns the text they complete (possibly empty).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).unwrap_or_default());
                    match e.error_len() {
                        // An incomplete character at the end: wait for the next piece.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        // Bytes that can never become UTF-8: show the replacement character.
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Releases whatever is left at the end of a stream, replacing an unfinished character.
    pub fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_multibyte_characters_are_joined() {
        let text = "héllo 👋 世界";
        let bytes = text.as_bytes();
        let mut s = Utf8Stream::default();
        let mut out = String::new();
        for chunk in bytes.chunks(1) {
            out.push_str(&s.push(chunk));
        }
        out.push_str(&s.finish());
        assert_eq!(out, text);
    }

    #[test]
    fn a_half_emoji_waits_for_its_second_half() {
        let emoji = "👋".as_bytes();
        let mut s = Utf8Stream::default();
        assert_eq!(s.push(&emoji[..2]), "");
        assert_eq!(s.push(&emoji[2..]), "👋");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut s = Utf8Stream::default();
        assert_eq!(s.push(&[b'a', 0xff, b'b']), "a\u{fffd}b");
        assert_eq!(s.push(&[0xe4, 0xb8]), "");
        assert_eq!(s.finish(), "\u{fffd}");
    }
}
