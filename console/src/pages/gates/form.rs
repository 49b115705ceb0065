//! Reading a posted HTML form (`application/x-www-form-urlencoded`) and
//! what every action's form shares: the rationale limit, API errors that
//! name the missing thing, the flash message after a redirect.
//!
//! The workspace builds axum without its `form` feature, so the body is
//! decoded by the `query` feature's decoder: a form body is exactly a URL
//! query string.

use axum::extract::{FromRequest, Query, Request};
use axum::http::Uri;
use serde::de::DeserializeOwned;

use caucus_shared::nats::ApiError;

use crate::error::PageError;
use crate::state::AppState;

/// A posted form decoded into `T`; a body that is not one is a 400 naming
/// the field at fault.
pub(crate) struct PostForm<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for PostForm<T> {
    type Rejection = PageError;

    async fn from_request(req: Request, state: &S) -> Result<Self, PageError> {
        let body = String::from_request(req, state)
            .await
            .map_err(|e| PageError::BadRequest(format!("the form could not be read: {e}")))?;
        let uri: Uri = format!("/?{body}").parse().map_err(|_| {
            PageError::BadRequest("the form is not URL-encoded or too large".into())
        })?;
        let Query(v) = Query::<T>::try_from_uri(&uri)
            .map_err(|e| PageError::BadRequest(format!("bad form: {}", e.body_text())))?;
        Ok(PostForm(v))
    }
}

/// A 400 naming the limit when `rationale` is longer than
/// `console.max_rationale_bytes`.
pub(crate) fn check_rationale(state: &AppState, rationale: &str) -> Result<(), PageError> {
    let max = state.console().max_rationale_bytes;
    if rationale.len() > max {
        return Err(PageError::BadRequest(format!(
            "the rationale is {} bytes; at most {max} bytes (console.max_rationale_bytes) are accepted",
            rationale.len()
        )));
    }
    Ok(())
}

/// An API error, where `not_found` becomes a 404 saying which `what`
/// (e.g. `workflow W-1`) is unknown.
pub(crate) fn api_error(e: ApiError, what: &str) -> PageError {
    if e.code == caucus_shared::api::CODE_NOT_FOUND {
        PageError::NotFound(format!("no {what}: {}", e.message))
    } else {
        PageError::Api(e)
    }
}

/// The sentence shown after an action redirected back (`?done=<word>`);
/// only known words, so a link cannot put text on the page.
pub(crate) fn flash(done: Option<&str>) -> Option<&'static str> {
    Some(match done? {
        "approved" => "Approved: the workflow continues.",
        "rejected" => "Rejected: the workflow fails.",
        "sent_back" => "Sent back: the stages run again and the gate reopens after them.",
        "confirmed" => "Provisional decision confirmed: the conservative default is final.",
        "overridden" => "Provisional decision overridden: analyses whose downstream impact requires it run again.",
        "redebated" => "Re-debate opened: a new debate weighs the context given.",
        "decided" => "Debate decided.",
        "paused" => "Batch paused.",
        "resumed" => "Batch resumed.",
        _ => return None,
    })
}

/// Splits a list typed into one field (commas or white space).
pub(crate) fn words(s: &str) -> Vec<String> {
    s.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct F {
        #[serde(default)]
        csrf: String,
        rationale: String,
    }

    async fn decode(body: &'static str) -> Result<F, PageError> {
        let req = Request::builder()
            .method("POST")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from(body))
            .unwrap();
        PostForm::<F>::from_request(req, &()).await.map(|f| f.0)
    }

    #[tokio::test]
    async fn a_form_body_decodes_plus_and_percent_escapes() {
        let f = decode("rationale=Q3+guidance%3A+28%25+%E2%86%92+ok&csrf=ab")
            .await
            .unwrap();
        assert_eq!(
            f,
            F {
                csrf: "ab".into(),
                rationale: "Q3 guidance: 28% → ok".into()
            }
        );
        // A missing CSRF field is left to the CSRF check (403), not a 400.
        assert_eq!(decode("rationale=x").await.unwrap().csrf, "");
    }

    #[tokio::test]
    async fn a_missing_required_field_is_a_400_naming_it() {
        let e = decode("csrf=ab").await.unwrap_err();
        assert!(
            matches!(&e, PageError::BadRequest(m) if m.contains("rationale")),
            "{e:?}"
        );
    }

    #[test]
    fn lists_split_on_commas_and_spaces_and_flash_knows_only_its_words() {
        assert_eq!(words(" a, b  c,,"), vec!["a", "b", "c"]);
        assert!(flash(Some("approved")).is_some());
        assert_eq!(flash(Some("<script>")), None);
        assert_eq!(flash(None), None);
    }
}
