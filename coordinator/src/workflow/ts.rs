//! Timestamps of stored records, written without `core::fmt`.
//!
//! A workflow record is re-encoded at every write and carries up to five
//! timestamps per task: through chrono's `Display` (the formatting
//! machinery of `core::fmt`) they were about 6 % of the coordinator's CPU
//! under load. This writes the same text chrono's serializer writes
//! (RFC 3339, UTC as `Z`, 0, 3, 6 or 9 fraction digits, whichever is
//! exact), so records read back and compare as before; reading stays
//! chrono's.

use chrono::{DateTime, Datelike, Timelike, Utc};
use serde::Serializer;

/// `#[serde(serialize_with)]` for a `DateTime<Utc>`.
pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    let mut buf = [0u8; 30];
    match write(t, &mut buf) {
        // Only ASCII digits and separators are written.
        Some(n) => s.serialize_str(std::str::from_utf8(&buf[..n]).expect("ascii")),
        None => serde::Serialize::serialize(t, s),
    }
}

/// `#[serde(serialize_with)]` for an `Option<DateTime<Utc>>`.
pub fn option<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => serialize(t, s),
        None => s.serialize_none(),
    }
}

/// Writes `t` into `buf`; `None` for what chrono writes otherwise (years
/// outside 0..=9999, leap seconds).
fn write(t: &DateTime<Utc>, buf: &mut [u8; 30]) -> Option<usize> {
    let year = u32::try_from(t.year()).ok().filter(|y| *y <= 9999)?;
    let nanos = t.nanosecond();
    if nanos >= 1_000_000_000 {
        return None;
    }
    put(buf, 0, year, 4);
    buf[4] = b'-';
    put(buf, 5, t.month(), 2);
    buf[7] = b'-';
    put(buf, 8, t.day(), 2);
    buf[10] = b'T';
    put(buf, 11, t.hour(), 2);
    buf[13] = b':';
    put(buf, 14, t.minute(), 2);
    buf[16] = b':';
    put(buf, 17, t.second(), 2);
    let (digits, value) = if nanos == 0 {
        (0, 0)
    } else if nanos.is_multiple_of(1_000_000) {
        (3, nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        (6, nanos / 1_000)
    } else {
        (9, nanos)
    };
    let mut at = 19;
    if digits > 0 {
        buf[19] = b'.';
        put(buf, 20, value, digits);
        at = 20 + digits;
    }
    buf[at] = b'Z';
    Some(at + 1)
}

/// `n` in `width` decimal digits at `buf[at..]`, zero-padded.
fn put(buf: &mut [u8; 30], at: usize, mut n: u32, width: usize) {
    for i in (0..width).rev() {
        buf[at + i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn ours(t: &DateTime<Utc>) -> String {
        let mut out = Vec::new();
        serialize(t, &mut serde_json::Serializer::new(&mut out)).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn writes_exactly_what_chrono_writes() {
        let base = Utc.with_ymd_and_hms(2026, 11, 26, 9, 5, 7).unwrap();
        let mut cases = vec![
            base,
            Utc.with_ymd_and_hms(1, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap(),
            Utc.with_ymd_and_hms(-5, 3, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(12345, 3, 1, 0, 0, 0).unwrap(),
            Utc::now(),
        ];
        for nanos in [
            1,
            9,
            10,
            999,
            1_000,
            1_500,
            999_000,
            1_000_000,
            120_000_000,
            999_999_999,
            123_456_789,
            500_000_000,
            7_000,
            40_000_100,
        ] {
            cases.push(base + chrono::Duration::nanoseconds(nanos));
        }
        // A leap second (chrono's nanosecond >= 1e9).
        cases.push(
            chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
                .unwrap()
                .and_hms_nano_opt(23, 59, 59, 1_500_000_000)
                .unwrap()
                .and_utc(),
        );
        for t in cases {
            let chrono = serde_json::to_string(&t).unwrap();
            assert_eq!(ours(&t), chrono, "{t:?}");
            let back: DateTime<Utc> = serde_json::from_str(&ours(&t)).unwrap();
            assert_eq!(back, t);
        }
        let none: Option<DateTime<Utc>> = None;
        let mut out = Vec::new();
        option(&none, &mut serde_json::Serializer::new(&mut out)).unwrap();
        assert_eq!(out, b"null");
    }
}
