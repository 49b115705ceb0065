//! Plugs the built-in agents ([`caucus_agents`]) into the handler: their
//! output becomes a [`HandlerOutput`] (findings, challenges for the
//! facilitator, `macro` broadcasts for `caucus.msg.all`).

use std::sync::Arc;

use caucus_agents::{AgentOutput, BuiltinAgents, Dataset, Settings};

use crate::handler::{BuiltinFn, HandlerFinding, HandlerOutput};

/// The built-in agents over `data`, with the default settings.
pub fn analysts_over(data: Arc<Dataset>) -> BuiltinFn {
    analysts_with(data, Settings::default())
}

/// The built-in agents over `data` with worker-level `settings`.
pub fn analysts_with(data: Arc<Dataset>, settings: Settings) -> BuiltinFn {
    let agents = BuiltinAgents::with_settings(data, settings);
    Arc::new(move |task| agents.run(task).map(handler_output))
}

/// The configured data set: `worker.data_path`, or the bundled one.
pub fn dataset(
    path: Option<&std::path::Path>,
) -> Result<Arc<Dataset>, caucus_agents::DatasetError> {
    caucus_agents::load_dataset(path)
}

fn handler_output(out: AgentOutput) -> HandlerOutput {
    HandlerOutput {
        output: out.output,
        findings: out
            .findings
            .into_iter()
            .map(|content| HandlerFinding { content })
            .collect(),
        messages: out.messages,
    }
}
