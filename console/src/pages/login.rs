//! `GET /login`, `POST /login`, `POST /logout`: the users file's login
//! (`console.auth = "users"`). In the other modes there is nothing to log
//! into: `/login` leads to the overview.

use std::sync::Arc;

use axum::extract::{Extension, Query};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup};
use serde::Deserialize;

use caucus_shared::config::ConsoleAuth;

use crate::auth::{Auth, Browser};
use crate::error::PageError;
use crate::layout;
use crate::state::AppState;
use crate::viewer::Viewer;

/// The login routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/login", get(form).post(log_in))
        .route("/logout", post(log_out))
}

/// What the login form posts.
#[derive(Debug, Default, Deserialize)]
struct LoginForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    csrf: String,
}

/// What the logout form posts.
#[derive(Debug, Default, Deserialize)]
struct LogoutForm {
    #[serde(default)]
    csrf: String,
}

/// A form body is a URL query string (the workspace's axum has no `form`
/// feature).
fn decode<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, PageError> {
    let uri: Uri = format!("/?{body}")
        .parse()
        .map_err(|_| PageError::BadRequest("the form is not URL-encoded".into()))?;
    Query::<T>::try_from_uri(&uri)
        .map(|Query(v)| v)
        .map_err(|e| PageError::BadRequest(format!("bad form: {}", e.body_text())))
}

fn login_page(viewer: &Viewer, name: &str, error: Option<&str>) -> Markup {
    layout::page(
        "Log in",
        viewer,
        html! {
            @if let Some(e) = error { p class="error" id="login-error" { (e) } }
            form method="post" action="/login" id="login" {
                (layout::csrf_field(viewer))
                p { label { "Name " input type="text" name="name" value=(name) autocomplete="username" required; } }
                p { label { "Password " input type="password" name="password" autocomplete="current-password" required; } }
                button type="submit" { "Log in" }
            }
        },
    )
}

async fn form(
    Extension(auth): Extension<Arc<Auth>>,
    Extension(browser): Extension<Browser>,
) -> Response {
    if auth.mode() != ConsoleAuth::Users {
        return Redirect::to("/").into_response();
    }
    let viewer = Viewer {
        identity: None,
        csrf: auth.csrf_token(&browser.0),
    };
    login_page(&viewer, "", None).into_response()
}

async fn log_in(
    Extension(auth): Extension<Arc<Auth>>,
    Extension(browser): Extension<Browser>,
    headers: HeaderMap,
    body: String,
) -> Result<Response, PageError> {
    if auth.mode() != ConsoleAuth::Users {
        return Err(PageError::NotFound(
            "nothing to log into: console.auth is not \"users\"".into(),
        ));
    }
    let f: LoginForm = decode(&body)?;
    let viewer = Viewer {
        identity: None,
        csrf: auth.csrf_token(&browser.0),
    };
    viewer.check_csrf(&f.csrf)?;
    // argon2 takes tens of milliseconds of CPU on purpose: off the
    // threads that serve the other requests.
    let (checker, name, password) = (auth.clone(), f.name.clone(), f.password.clone());
    let checked = tokio::task::spawn_blocking(move || checker.check_login(&name, &password))
        .await
        .map_err(|e| format!("the check did not finish: {e}"))
        .and_then(|r| r.map_err(|e| e.to_string()));
    let ok = match checked {
        Ok(ok) => ok,
        Err(e) => {
            tracing::error!(error = %e, "cannot check a login");
            return Ok((
                StatusCode::INTERNAL_SERVER_ERROR,
                login_page(
                    &viewer,
                    &f.name,
                    Some("the console cannot check logins right now (its users file); see its log"),
                ),
            )
                .into_response());
        }
    };
    if !ok {
        // The same words for an unknown name and a wrong password: the
        // page must not tell which names exist.
        tracing::info!(name = %f.name, "login refused");
        return Ok((
            StatusCode::UNAUTHORIZED,
            login_page(&viewer, &f.name, Some("wrong name or password")),
        )
            .into_response());
    }
    tracing::info!(name = %f.name, "logged in");
    let jar = auth.log_in(auth.jar(&headers), &f.name);
    Ok((jar, Redirect::to("/")).into_response())
}

async fn log_out(
    Extension(auth): Extension<Arc<Auth>>,
    headers: HeaderMap,
    viewer: Viewer,
    body: String,
) -> Result<Response, PageError> {
    let f: LogoutForm = decode(&body)?;
    viewer.check_csrf(&f.csrf)?;
    if auth.mode() != ConsoleAuth::Users {
        return Ok(Redirect::to("/").into_response());
    }
    let jar = auth.log_out(auth.jar(&headers));
    Ok((jar, Redirect::to("/login")).into_response())
}
