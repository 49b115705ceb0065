//! What `--watch` draws while it polls: on a terminal, the workflows'
//! lines and a summary redrawn in place (indicatif counts the lines a
//! long line wraps into, so a narrow terminal does not smear the view);
//! otherwise plain lines, a summary only when the count of finished
//! workflows changes and the workflows' final lines at the end.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use caucus_shared::api::coordinator::status::{StatusReply, WorkflowView};

use super::LISTED;
use crate::render::{utilisation, workflow_line};

/// The live view of one `--watch`.
pub(super) struct LiveView {
    /// Redrawn in place (a terminal); `None` prints plain lines.
    live: Option<ProgressBar>,
    /// Draw anything at all (not with `--json`).
    draw: bool,
    /// When watching began (the summary counts from it).
    started: Instant,
    /// The finished count of the last plain summary line.
    last_done: Option<usize>,
}

impl LiveView {
    /// A view that draws nothing unless `draw`, on stdout.
    pub(super) fn new(draw: bool) -> LiveView {
        let live = (draw && std::io::stdout().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stdout());
            bar.set_style(ProgressStyle::with_template("{msg}").expect("a fixed template"));
            bar
        });
        LiveView {
            live,
            draw,
            started: Instant::now(),
            last_done: None,
        }
    }

    /// Shows one poll: `done` of `watched` workflows finished.
    pub(super) fn update(
        &mut self,
        st: &StatusReply,
        done: usize,
        watched: usize,
    ) -> std::io::Result<()> {
        if !self.draw {
            return Ok(());
        }
        let summary = format!(
            "{:>6.1}s  {done}/{watched} done  {}",
            self.started.elapsed().as_secs_f64(),
            utilisation(st)
        );
        match &self.live {
            Some(bar) => {
                let mut lines: Vec<String> = st.workflows.iter().map(workflow_line).collect();
                lines.push(summary);
                bar.set_message(lines.join("\n"));
            }
            None if self.last_done != Some(done) => {
                let mut out = std::io::stdout().lock();
                writeln!(out, "{summary}")?;
                out.flush()?;
            }
            None => {}
        }
        self.last_done = Some(done);
        Ok(())
    }

    /// Leaves the last picture on a terminal; elsewhere prints the
    /// workflows' final lines (the first [`LISTED`]).
    pub(super) fn finish(self, wfs: &[WorkflowView]) -> std::io::Result<()> {
        if let Some(bar) = self.live {
            bar.finish();
            return Ok(());
        }
        if !self.draw {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        for w in wfs.iter().take(LISTED) {
            writeln!(out, "{}", workflow_line(w))?;
        }
        if wfs.len() > LISTED {
            writeln!(out, "… and {} more (caucus status)", wfs.len() - LISTED)?;
        }
        out.flush()
    }
}
