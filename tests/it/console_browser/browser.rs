//! A headless chromium driven over WebDriver (fantoccini → Debian's
//! chromedriver), pointed at one console, with the few moves the tests
//! make: open a page, wait for an element or its text, submit a form and
//! wait for the page it leads to, and keep a screenshot of each page.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use caucus_harness::browser::{chromium_binary, ChromeDriver, CHROMIUM_ARGS};
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{json, Value};

/// How long any one wait in the browser may take.
pub const WAIT: Duration = Duration::from_secs(20);

/// The window every page is shown in (chromium's `--window-size`).
const SHOT_WIDTH: u32 = 1280;
const SHOT_HEIGHT: u32 = 900;
/// Longest screenshot: long lists are cut there.
const SHOT_MAX_HEIGHT: u32 = 3000;

/// One browser session on one console.
pub struct Browser {
    client: Client,
    base: String,
    // Dropped after the session: killing it takes the browser along.
    driver: ChromeDriver,
}

impl Browser {
    /// Starts chromedriver and a headless chromium session for the console
    /// at `base` (`http://127.0.0.1:<port>`).
    pub async fn open(base: &str) -> Browser {
        let driver = ChromeDriver::start();
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({"binary": chromium_binary(), "args": CHROMIUM_ARGS}),
        );
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&driver.url())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "a chromium session through chromedriver: {e}; chromedriver said:\n{}",
                    driver.output()
                )
            });
        Browser {
            client,
            base: base.trim_end_matches('/').to_string(),
            driver,
        }
    }

    /// The console's URL for `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Opens `path` and waits for it to load; panics when the console
    /// answered with its error page.
    pub async fn goto(&self, path: &str) {
        self.client
            .goto(&self.url(path))
            .await
            .unwrap_or_else(|e| panic!("open {path}: {e}"));
        self.fail_on_error_page(path).await;
    }

    /// The path and query the browser is on.
    pub async fn location(&self) -> String {
        let u = self.client.current_url().await.expect("current url");
        match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        }
    }

    /// Waits for an element matching `css`.
    pub async fn wait_css(&self, css: &str) -> Element {
        match self
            .client
            .wait()
            .at_most(WAIT)
            .every(Duration::from_millis(50))
            .for_element(Locator::Css(css))
            .await
        {
            Ok(e) => e,
            Err(e) => {
                let at = self.location().await;
                self.fail(format!(
                    "`{css}` on {at} within {WAIT:?}: {e}; the page:\n{}",
                    self.body_text().await
                ))
                .await
            }
        }
    }

    /// Every element matching `css` now (no wait).
    pub async fn all(&self, css: &str) -> Vec<Element> {
        self.client
            .find_all(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("find `{css}`: {e}"))
    }

    /// Polls the text of the first element matching `css` until `ok` holds
    /// for it (the element may come and go while a live region reloads);
    /// panics after [`WAIT`] naming `what` and the last text seen.
    pub async fn wait_text(&self, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        let mut last = None;
        loop {
            if let Ok(e) = self.client.find(Locator::Css(css)).await {
                // A stale element (the region was just replaced) reads as
                // an error: look again.
                if let Ok(t) = e.text().await {
                    if ok(&t) {
                        return t;
                    }
                    last = Some(t);
                }
            }
            if Instant::now() >= deadline {
                let at = self.location().await;
                self.fail(format!(
                    "timed out after {WAIT:?} waiting for {what} (`{css}`: {last:?}) on {at}"
                ))
                .await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Runs `script` in the page and returns its value.
    pub async fn js(&self, script: &str) -> Value {
        self.client
            .execute(script, Vec::new())
            .await
            .unwrap_or_else(|e| panic!("script `{script}`: {e}"))
    }

    /// Marks the current document; [`Browser::same_document`] says whether
    /// the browser is still on it (no navigation or reload since).
    pub async fn mark_document(&self) {
        self.js("window.__caucusTestMark = true; return true;")
            .await;
    }

    /// Whether the document marked by [`Browser::mark_document`] is still
    /// the one shown.
    pub async fn same_document(&self) -> bool {
        self.js("return window.__caucusTestMark === true;").await == json!(true)
    }

    /// Clicks `button` (a submit button of a form), waits for the page the
    /// POST leads to, and returns its path and query; panics with the
    /// console's message when it is the error page.
    pub async fn submit(&self, button: &Element) -> String {
        self.mark_document().await;
        button.click().await.expect("click the submit button");
        let deadline = Instant::now() + WAIT;
        loop {
            // A new document has no mark; wait for it to finish loading.
            let r = self
                .js("return window.__caucusTestMark === true ? 'old' : document.readyState;")
                .await;
            if r == json!("complete") {
                break;
            }
            if Instant::now() >= deadline {
                self.fail(format!(
                    "the form's POST led nowhere within {WAIT:?} (still {r})"
                ))
                .await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let at = self.location().await;
        self.fail_on_error_page(&at).await;
        at
    }

    /// The visible text of the page.
    pub async fn body_text(&self) -> String {
        match self.client.find(Locator::Css("body")).await {
            Ok(b) => b.text().await.unwrap_or_default(),
            Err(e) => format!("(no body: {e})"),
        }
    }

    /// Saves a screenshot of the page as `<name>.png` in
    /// `target/console-screenshots/` (the tests' artifacts) and, with
    /// `CAUCUS_BLESS=1`, in `docs/console/` for docs/CONSOLE.md.
    /// The whole page, up to [`SHOT_MAX_HEIGHT`]: the window grows to the
    /// document's height for the shot (WebDriver only captures the
    /// viewport) and shrinks back after.
    pub async fn screenshot(&self, name: &str) {
        // The window's height includes the browser's own bars.
        let height = self
            .js("return document.documentElement.scrollHeight + window.outerHeight - window.innerHeight;")
            .await
            .as_u64()
            .unwrap_or(u64::from(SHOT_HEIGHT));
        let tall = u32::try_from(height)
            .unwrap_or(SHOT_MAX_HEIGHT)
            .clamp(SHOT_HEIGHT, SHOT_MAX_HEIGHT);
        self.client
            .set_window_size(SHOT_WIDTH, tall)
            .await
            .unwrap_or_else(|e| panic!("resize for {name}: {e}"));
        let png = self.client.screenshot().await;
        self.client
            .set_window_size(SHOT_WIDTH, SHOT_HEIGHT)
            .await
            .unwrap_or_else(|e| panic!("resize after {name}: {e}"));
        let png = png.unwrap_or_else(|e| panic!("screenshot {name}: {e}"));
        assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
        let mut dirs = vec![artifacts_dir()];
        if std::env::var("CAUCUS_BLESS").is_ok_and(|v| v == "1") {
            dirs.push(repo_root().join("docs/console"));
        }
        for dir in dirs {
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            let path = dir.join(format!("{name}.png"));
            std::fs::write(&path, &png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }

    /// Ends the session (the browser quits), then chromedriver.
    pub async fn close(self) {
        let Browser { client, driver, .. } = self;
        if let Err(e) = client.close().await {
            panic!(
                "closing the browser session: {e}; chromedriver said:\n{}",
                driver.output()
            );
        }
        drop(driver);
    }

    /// The console's error page has no navigation and a status title
    /// (`404 · caucus`): a test that expected a page fails with its
    /// message instead of with a missing element later.
    async fn fail_on_error_page(&self, at: &str) {
        let title = self.client.title().await.unwrap_or_default();
        let status = title.split(' ').next().unwrap_or("");
        if status.len() == 3 && status.bytes().all(|b| b.is_ascii_digit()) {
            self.fail(format!(
                "{at} answered the error page `{title}`:\n{}",
                self.body_text().await
            ))
            .await;
        }
    }

    /// Fails the test with `message`, keeping what the browser showed as
    /// `failed-<test name>.png` among the artifacts.
    async fn fail(&self, message: String) -> ! {
        // libtest names each test's thread after the test.
        let test = std::thread::current()
            .name()
            .unwrap_or("test")
            .replace("::", "-");
        let png = self.client.screenshot().await.ok();
        let kept = png.and_then(|png| {
            let dir = artifacts_dir();
            let path = dir.join(format!("failed-{test}.png"));
            std::fs::create_dir_all(&dir).ok()?;
            std::fs::write(&path, png).ok()?;
            Some(path)
        });
        match kept {
            Some(p) => panic!("{message}\n(the browser's window: {})", p.display()),
            None => panic!("{message}"),
        }
    }
}

/// The workspace root.
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `target/console-screenshots/` of the target dir this test runs from
/// (`target/<profile>/deps/it-…`).
fn artifacts_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let target = exe
        .ancestors()
        .nth(3)
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    target.join("console-screenshots")
}
