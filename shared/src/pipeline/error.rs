//! The one error type for everything that can be wrong with a pipeline spec
//! or a planning request. Each variant names the offending stage, agent type
//! or item so the message can go straight back to whoever submitted it.

/// Why a pipeline spec (or a request to plan it) was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PipelineError {
    /// The TOML or JSON text did not have the shape of a pipeline spec.
    #[error("invalid pipeline spec ({format}): {message}")]
    Parse {
        /// `"toml"` or `"json"`.
        format: &'static str,
        /// The parser's description of the problem.
        message: String,
    },
    /// The pipeline declares no stages.
    #[error("pipeline `{pipeline}` has no stages")]
    Empty {
        /// Pipeline name.
        pipeline: String,
    },
    /// A pipeline, stage or agent type name is not a valid subject token.
    #[error("invalid {what} name `{name}`: names must match [a-z0-9_-]+")]
    InvalidName {
        /// `"pipeline"`, `"stage"` or `"agent type"`.
        what: &'static str,
        /// The rejected name.
        name: String,
    },
    /// Two stages share a name.
    #[error("duplicate stage `{stage}`")]
    DuplicateStage {
        /// The repeated stage name.
        stage: String,
    },
    /// A stage depends on a stage that is not declared.
    #[error("stage `{stage}` depends on unknown stage `{dependency}`")]
    UnknownDependency {
        /// The stage with the bad dependency.
        stage: String,
        /// The undeclared stage it names.
        dependency: String,
    },
    /// A stage lists the same dependency twice.
    #[error("stage `{stage}` lists dependency `{dependency}` more than once")]
    DuplicateDependency {
        /// The stage with the repeated dependency.
        stage: String,
        /// The repeated dependency.
        dependency: String,
    },
    /// The dependencies form a cycle. `path` starts and ends with the same
    /// stage; each stage must run before the next one in the list.
    #[error("cycle: {}", path.join(" -> "))]
    Cycle {
        /// Stage names along the cycle, first == last.
        path: Vec<String>,
    },
    /// A task stage does not name the agent type that runs it.
    #[error("stage `{stage}` is a task stage but names no agent type")]
    MissingAgent {
        /// The stage without an agent.
        stage: String,
    },
    /// A human gate names an agent type (a person approves a gate, no agent runs it).
    #[error("gate stage `{stage}` must not name an agent type (a person approves a gate)")]
    GateWithAgent {
        /// The gate stage.
        stage: String,
    },
    /// A human gate asks for fan-out, which has no meaning for an approval.
    #[error("gate stage `{stage}` cannot fan out")]
    GateFanOut {
        /// The gate stage.
        stage: String,
    },
    /// A stage's agent type has no capacity entry and no known worker serves it.
    #[error(
        "stage `{stage}` uses unknown agent type `{agent}`: it has no entry in \
         [capacities] and is not a known agent type"
    )]
    UnknownAgent {
        /// The stage.
        stage: String,
        /// The unknown agent type.
        agent: String,
    },
    /// An agent type was given capacity 0, so its tasks could never run.
    #[error("agent type `{agent}` has capacity 0; capacity must be at least 1")]
    ZeroCapacity {
        /// The agent type.
        agent: String,
    },
    /// A duration is negative, NaN or infinite (or a timeout is not positive).
    #[error("stage `{stage}`: {field} must be {requirement}, got {value}")]
    InvalidDuration {
        /// The stage, or the pipeline name for the pipeline-wide timeout.
        stage: String,
        /// `"expected_duration"` or `"timeout"`.
        field: &'static str,
        /// What the value must be.
        requirement: &'static str,
        /// The rejected value.
        value: f64,
    },
    /// `fan_out = 0`.
    #[error("stage `{stage}`: fan_out must be at least 1")]
    InvalidFanOut {
        /// The stage.
        stage: String,
    },
    /// A retry policy that cannot work (no attempts, or backoff bounds reversed).
    #[error("stage `{stage}`: invalid retry policy: {message}")]
    InvalidRetry {
        /// The stage.
        stage: String,
        /// What is wrong with it.
        message: String,
    },
    /// The pipeline's `level_review` table cannot work.
    #[error("level_review: {message}")]
    InvalidLevelReview {
        /// What is wrong with it.
        message: String,
    },
    /// Planning was asked for zero items.
    #[error("no items to plan")]
    NoItems,
    /// An item name is empty.
    #[error("item names must not be empty")]
    EmptyItem,
    /// The same item was listed twice (task ids would collide).
    #[error("item `{item}` is listed more than once")]
    DuplicateItem {
        /// The repeated item.
        item: String,
    },
    /// The instantiated DAG would be too large to plan.
    #[error("plan would have {count} {what}, more than the limit of {limit}")]
    TooLarge {
        /// `"tasks"` or `"task dependencies"`.
        what: &'static str,
        /// How many the request would create.
        count: u64,
        /// The limit.
        limit: u64,
    },
}
