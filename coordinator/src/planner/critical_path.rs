//! Critical-path analysis on the stage DAG of one item.
//!
//! Every item instantiates the same DAG, and fan-out copies of a stage are
//! identical and parallel, so the unconstrained (infinite-capacity) timing of
//! an item is fully described at stage level.

use crate::pipeline::{PipelineSpec, StageGraph};

/// Unconstrained timing of the stages of one item.
#[derive(Debug, Clone)]
pub(crate) struct StageTiming {
    /// Planned duration per stage (gates are 0).
    pub duration: Vec<f64>,
    /// Longest path from this stage's start to the end of the item,
    /// including its own duration: the scheduling priority.
    pub tail: Vec<f64>,
    /// Stage indices of one longest path, source to sink.
    pub path: Vec<usize>,
    /// Length of that path in time units.
    pub length: f64,
    /// Stages with zero slack, i.e. on *some* longest path.
    pub critical: Vec<bool>,
}

/// Tolerance for comparing sums of durations.
pub(crate) fn eps(scale: f64) -> f64 {
    1e-9 * scale.abs().max(1.0)
}

pub(crate) fn analyse(spec: &PipelineSpec, graph: &StageGraph) -> StageTiming {
    let n = spec.stages.len();
    let duration: Vec<f64> = spec.stages.iter().map(|s| s.planned_duration()).collect();
    // head[s]: earliest finish of s with unlimited capacity; best_pred for the path.
    let mut head = vec![0.0f64; n];
    let mut best_pred: Vec<Option<usize>> = vec![None; n];
    for &s in graph.order() {
        let mut start = 0.0;
        for p in graph.dependencies(s) {
            // Strictly greater keeps the earliest-declared predecessor on ties.
            if best_pred[s].is_none() || head[p] > start {
                start = head[p];
                best_pred[s] = Some(p);
            }
        }
        head[s] = start + duration[s];
    }
    let mut tail = vec![0.0f64; n];
    for &s in graph.order().iter().rev() {
        let after = graph
            .dependents(s)
            .into_iter()
            .map(|d| tail[d])
            .fold(0.0, f64::max);
        tail[s] = duration[s] + after;
    }
    let mut end = 0;
    for s in 1..n {
        if head[s] > head[end] {
            end = s;
        }
    }
    let length = if n == 0 { 0.0 } else { head[end] };
    let mut path = Vec::new();
    let mut cur = (n > 0).then_some(end);
    while let Some(s) = cur {
        path.push(s);
        cur = best_pred[s];
    }
    path.reverse();
    let tol = eps(length);
    let critical = (0..n)
        .map(|s| head[s] - duration[s] + tail[s] >= length - tol)
        .collect();
    StageTiming {
        duration,
        tail,
        path,
        length,
        critical,
    }
}
