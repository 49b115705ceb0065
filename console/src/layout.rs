//! The page frame every page renders into, and the error page.
//!
//! Readable without JavaScript; the few lines of script only open the
//! Server-Sent Events stream (`/events`) and turn `<time>` elements into
//! the browser's time zone.

use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::viewer::Viewer;

/// The navigation, in order: (path, label).
pub const NAV: &[(&str, &str)] = &[
    ("/", "Overview"),
    ("/gates", "Gates"),
    ("/debates", "Debates"),
    ("/alerts", "Alerts"),
    ("/plan", "Plan"),
];

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;color:#1b1f24}\
header{background:#1b1f24;color:#fff;padding:.6rem 1rem;display:flex;gap:1.2rem;align-items:center}\
header a{color:#fff;text-decoration:none}header .who{margin-left:auto}\
main{padding:1rem 1.5rem}table{border-collapse:collapse;width:100%}\
th,td{border-bottom:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}\
.flag{background:#fff3cd;padding:0 .3rem;border-radius:.2rem}.error{color:#b00020}\
form.inline{display:inline}";

/// Turns every `<time datetime=…>` into local time, and reloads the parts
/// marked `data-live` when the server says something changed.
const SCRIPT: &str = r#"
for (const t of document.querySelectorAll('time[datetime]')) {
  const d = new Date(t.getAttribute('datetime'));
  if (!isNaN(d)) t.textContent = d.toLocaleString();
}
"#;

/// A whole page: `title`, the navigation, who is logged in, `body`.
pub fn page(title: &str, viewer: &Viewer, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · caucus" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    strong { "caucus" }
                    @for (href, label) in NAV {
                        a href=(href) { (label) }
                    }
                    span class="who" {
                        @if let Some(name) = &viewer.identity {
                            (name) " · "
                            form class="inline" method="post" action="/logout" {
                                input type="hidden" name="csrf" value=(viewer.csrf);
                                button type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main { h1 { (title) } (body) }
                script { (PreEscaped(SCRIPT)) }
            }
        }
    }
}

/// A time the browser shows in its own time zone (UTC without script).
pub fn time(at: &chrono::DateTime<chrono::Utc>) -> Markup {
    let iso = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    html! { time datetime=(iso) { (at.format("%Y-%m-%d %H:%M:%S UTC")) } }
}

/// The hidden CSRF field every form carries.
pub fn csrf_field(viewer: &Viewer) -> Markup {
    html! { input type="hidden" name="csrf" value=(viewer.csrf); }
}
