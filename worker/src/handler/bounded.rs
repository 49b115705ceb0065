//! Reading an `exec:` agent's pipes with bounded memory: stdout up to a
//! limit (more is an error, and the caller kills the command), stderr to its
//! end keeping only the last bytes, so a command writing endlessly never
//! grows the worker.

use tokio::io::{AsyncRead, AsyncReadExt};

/// What [`read_bounded`] read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Bounded {
    /// The whole stream, at most the limit.
    Complete(Vec<u8>),
    /// More than the limit arrived; reading stopped after this many bytes.
    Over {
        /// Bytes read before stopping (the limit + 1).
        read: usize,
    },
}

/// Reads `r` to its end unless more than `max` bytes arrive, in which case
/// it stops at `max + 1` bytes.
pub(super) async fn read_bounded<R: AsyncRead + Unpin>(
    r: R,
    max: usize,
) -> std::io::Result<Bounded> {
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let mut buf = Vec::new();
    r.take(limit).read_to_end(&mut buf).await?;
    if buf.len() > max {
        return Ok(Bounded::Over { read: buf.len() });
    }
    Ok(Bounded::Complete(buf))
}

/// The last bytes of a stream read to its end.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Tail {
    /// At most the limit: the end of the stream.
    pub bytes: Vec<u8>,
    /// Whether earlier bytes were dropped.
    pub cut: bool,
}

impl Tail {
    /// The kept text; when the front was cut, from the first whole line on
    /// (a cut line might start in the middle of a secret, which the
    /// scrubber would no longer recognise).
    pub fn text(&self) -> String {
        let s = String::from_utf8_lossy(&self.bytes);
        let s = match (self.cut, s.find('\n')) {
            (true, Some(i)) => format!("…{}", &s[i + 1..]),
            (true, None) => "…".to_string(),
            (false, _) => s.into_owned(),
        };
        s.trim().to_string()
    }
}

/// Reads `r` to its end, keeping the last `max` bytes. A read error ends
/// the stream (what was kept stays: stderr only explains a failure).
pub(super) async fn read_tail<R: AsyncRead + Unpin>(mut r: R, max: usize) -> Tail {
    let mut kept: Vec<u8> = Vec::new();
    let mut cut = false;
    let mut chunk = [0u8; 8192];
    loop {
        let n = match r.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        kept.extend_from_slice(&chunk[..n]);
        // Drop the front in batches (at twice the limit) so the copy is
        // amortised; memory stays below 2 × max + one chunk.
        if kept.len() > max.saturating_mul(2).max(chunk.len()) {
            let drop = kept.len() - max;
            kept.drain(..drop);
            cut = true;
        }
    }
    if kept.len() > max {
        kept.drain(..kept.len() - max);
        cut = true;
    }
    Tail { bytes: kept, cut }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stdout_up_to_the_limit_is_complete() {
        let r = read_bounded(&b"12345"[..], 5).await.unwrap();
        assert_eq!(r, Bounded::Complete(b"12345".to_vec()));
        let r = read_bounded(&b""[..], 0).await.unwrap();
        assert_eq!(r, Bounded::Complete(Vec::new()));
    }

    #[tokio::test]
    async fn stdout_over_the_limit_stops_one_byte_past_it() {
        let r = read_bounded(&b"123456789"[..], 5).await.unwrap();
        assert_eq!(r, Bounded::Over { read: 6 });
    }

    #[tokio::test]
    async fn an_endless_stream_is_read_only_to_the_limit() {
        // `repeat` never ends: only the bound stops the read.
        let r = read_bounded(tokio::io::repeat(b'x'), 1000).await.unwrap();
        assert_eq!(r, Bounded::Over { read: 1001 });
    }

    #[tokio::test]
    async fn stderr_keeps_its_last_bytes() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let t = read_tail(&data[..], 300).await;
        assert!(t.cut);
        assert_eq!(t.bytes, data[data.len() - 300..]);
        let t = read_tail(&b"short"[..], 300).await;
        assert_eq!(
            t,
            Tail {
                bytes: b"short".to_vec(),
                cut: false
            }
        );
        assert_eq!(t.text(), "short");
    }

    #[test]
    fn a_cut_tail_starts_at_a_whole_line() {
        let t = Tail {
            bytes: b"ret-value\nline two\nline three\n".to_vec(),
            cut: true,
        };
        assert_eq!(t.text(), "…line two\nline three");
        let t = Tail {
            bytes: b"no newline at all".to_vec(),
            cut: true,
        };
        assert_eq!(t.text(), "…");
    }
}
