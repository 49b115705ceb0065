//! Lists that follow the live events: a few lines of plain JS that reload
//! the page when `/events` says something it lists changed (readable
//! without it; nothing happens without `EventSource`).

use maud::{html, Markup, PreEscaped};

/// The script reloading the page on any of `kinds` (`gate`, `debate`, …),
/// once per burst, and never while the person is typing in a form.
pub(crate) fn reload_on(kinds: &[&str]) -> Markup {
    let list = kinds
        .iter()
        .map(|k| format!("'{k}'"))
        .collect::<Vec<_>>()
        .join(",");
    let js = format!(
        r#"(function () {{
  if (!window.EventSource) return;
  var es = new EventSource('/events'), t = null;
  [{list}].forEach(function (k) {{
    es.addEventListener(k, function () {{
      var a = document.activeElement;
      if (a && a.form) return;
      clearTimeout(t);
      t = setTimeout(function () {{ location.reload(); }}, 150);
    }});
  }});
}})();"#
    );
    html! { script { (PreEscaped(js)) } }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_script_listens_to_each_kind_named() {
        let s = super::reload_on(&["gate", "workflow"]).into_string();
        assert!(s.contains("['gate','workflow'].forEach"), "{s}");
        assert!(s.starts_with("<script>") && s.ends_with("</script>"), "{s}");
    }
}
