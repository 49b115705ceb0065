//! `caucus submission`: a submission read back, page by page.

use caucus_shared::api::coordinator::submit::{Submission, SubmissionRequest};

use crate::Client;

/// Which submission `caucus submission` shows.
#[derive(Debug, Clone)]
pub enum SubmissionTarget {
    /// By id.
    Id(String),
    /// By the idempotency key it was submitted with.
    Key(String),
}

/// `caucus submission`: a submission's state and its workflow ids, one
/// page (`--cursor`, `--limit`) or all of them (`--all`).
pub async fn submission(
    client: &Client,
    target: SubmissionTarget,
    cursor: usize,
    limit: Option<usize>,
    all: bool,
    as_json: bool,
) -> anyhow::Result<i32> {
    let (submission_id, idempotency_key) = match target {
        SubmissionTarget::Id(id) => (Some(id), None),
        SubmissionTarget::Key(k) => (None, Some(k)),
    };
    let mut request = SubmissionRequest {
        submission_id,
        idempotency_key,
        cursor: Some(cursor),
        limit,
    };
    let mut first = true;
    loop {
        let page = client.op_ok::<Submission>(&request).await?;
        if as_json {
            println!("{}", serde_json::to_string(&page)?);
        } else {
            if first {
                println!(
                    "submission {}  {}  {} workflow(s), {} stored, pipeline {}{}",
                    page.submission_id,
                    page.state,
                    page.count,
                    page.stored,
                    page.pipeline,
                    page.idempotency_key
                        .as_deref()
                        .map(|k| format!(", idempotency key {k}"))
                        .unwrap_or_default()
                );
            }
            for id in &page.workflow_ids {
                println!("{id}");
            }
        }
        first = false;
        let Some(next) = page.next_cursor else {
            break;
        };
        if !all {
            if !as_json {
                println!("next page: --cursor {next}");
            }
            break;
        }
        request.cursor = Some(next);
    }
    Ok(0)
}
