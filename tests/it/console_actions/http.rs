//! A small HTTP/1.1 client for the console's HTTP-level tests: GET and
//! form POSTs over a fresh connection each, a cookie jar (the console ties
//! its CSRF token to a browser cookie), no redirects followed (the tests
//! assert the 303 and its `Location`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One answer.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// Header name (lower case) → value; the last one wins.
    pub headers: BTreeMap<String, String>,
    /// The body as text.
    pub body: String,
}

impl Answer {
    /// The `Location` of a redirect.
    pub fn location(&self) -> &str {
        self.headers
            .get("location")
            .map(String::as_str)
            .unwrap_or("")
    }
}

/// A browser without a browser: where the console is, and its cookies.
pub struct Http {
    addr: String,
    cookies: BTreeMap<String, String>,
}

impl Http {
    /// A client of the console at `addr` (`127.0.0.1:<port>`), once it
    /// accepts connections.
    pub async fn connect(addr: &str) -> Http {
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(addr).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "the console never listened on {addr}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Http::new(addr)
    }

    /// A client of a console known to listen at `addr`, without cookies.
    pub fn new(addr: &str) -> Http {
        Http {
            addr: addr.to_string(),
            cookies: BTreeMap::new(),
        }
    }

    /// Where the console listens.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// `GET path`.
    pub async fn get(&mut self, path: &str) -> Answer {
        self.send("GET", path, None).await
    }

    /// `POST path` with `fields` URL-encoded.
    pub async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Answer {
        let body = fields
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        self.send("POST", path, Some(body)).await
    }

    /// The CSRF token the page at `path` puts in its forms.
    pub async fn csrf(&mut self, path: &str) -> String {
        let page = self.get(path).await;
        assert_eq!(page.status, 200, "GET {path}: {}", page.body);
        let marker = "name=\"csrf\" value=\"";
        let at = page
            .body
            .find(marker)
            .unwrap_or_else(|| panic!("no CSRF field on {path}: {}", page.body))
            + marker.len();
        let end = page.body[at..].find('"').expect("end of the CSRF value");
        page.body[at..at + end].to_string()
    }

    async fn send(&mut self, method: &str, path: &str, body: Option<String>) -> Answer {
        let mut s = TcpStream::connect(&self.addr).await.expect("connect");
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.addr
        );
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            req.push_str(&format!("Cookie: {}\r\n", jar.join("; ")));
        }
        let body = body.unwrap_or_default();
        if method == "POST" {
            req.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        s.write_all(req.as_bytes()).await.expect("send");
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut raw))
            .await
            .unwrap_or_else(|_| panic!("{method} {path}: no answer within 30 s"))
            .expect("read");
        let answer = parse(&raw);
        if let Some(set) = answer.headers.get("set-cookie") {
            if let Some((k, v)) = set.split(';').next().and_then(|kv| kv.split_once('=')) {
                self.cookies
                    .insert(k.trim().to_string(), v.trim().to_string());
            }
        }
        answer
    }
}

fn parse(raw: &[u8]) -> Answer {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of the headers");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&b[..eol]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[eol + 2 + size + 2..];
    }
    out
}

/// `application/x-www-form-urlencoded` encoding of one key or value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                (b as char).to_string()
            }
            b' ' => "+".to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
