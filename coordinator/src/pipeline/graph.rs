//! The stage DAG of one pipeline (petgraph), with cycle reporting and a
//! deterministic topological order. Edges point from a stage to the stages
//! that depend on it, i.e. in the direction work flows.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};

use petgraph::algo::{tarjan_scc, toposort};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;

use super::{PipelineError, PipelineSpec};

/// The dependency graph between the stages of one pipeline.
#[derive(Debug, Clone)]
pub struct StageGraph {
    /// Node weight = index of the stage in `spec.stages`; node index == stage index.
    graph: DiGraph<usize, ()>,
    /// Stage indices, dependencies first, ties by declaration order.
    order: Vec<usize>,
}

impl StageGraph {
    /// Builds the graph, rejecting duplicate stages, unknown or repeated
    /// dependencies and cycles (the error names the cycle).
    pub fn build(spec: &PipelineSpec) -> Result<Self, PipelineError> {
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(spec.stages.len());
        for (i, stage) in spec.stages.iter().enumerate() {
            if index.insert(stage.name.as_str(), i).is_some() {
                return Err(PipelineError::DuplicateStage {
                    stage: stage.name.clone(),
                });
            }
        }
        let mut graph = DiGraph::with_capacity(spec.stages.len(), spec.stages.len());
        for i in 0..spec.stages.len() {
            graph.add_node(i);
        }
        for (i, stage) in spec.stages.iter().enumerate() {
            let mut seen = BTreeSet::new();
            for dep in &stage.depends_on {
                let Some(&d) = index.get(dep.as_str()) else {
                    return Err(PipelineError::UnknownDependency {
                        stage: stage.name.clone(),
                        dependency: dep.clone(),
                    });
                };
                if !seen.insert(d) {
                    return Err(PipelineError::DuplicateDependency {
                        stage: stage.name.clone(),
                        dependency: dep.clone(),
                    });
                }
                graph.add_edge(NodeIndex::new(d), NodeIndex::new(i), ());
            }
        }
        if toposort(&graph, None).is_err() {
            return Err(PipelineError::Cycle {
                path: find_cycle(&graph)
                    .into_iter()
                    .map(|i| spec.stages[i].name.clone())
                    .collect(),
            });
        }
        let order = stable_topological_order(&graph);
        Ok(Self { graph, order })
    }

    /// Stage indices in a topological order; among stages whose dependencies
    /// are all placed, the earliest declared comes first.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// Indices of the stages `stage` depends on, ascending.
    pub fn dependencies(&self, stage: usize) -> Vec<usize> {
        self.sorted_neighbors(stage, Direction::Incoming)
    }

    /// Indices of the stages that depend on `stage`, ascending.
    pub fn dependents(&self, stage: usize) -> Vec<usize> {
        self.sorted_neighbors(stage, Direction::Outgoing)
    }

    fn sorted_neighbors(&self, stage: usize, dir: Direction) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .graph
            .neighbors_directed(NodeIndex::new(stage), dir)
            .map(|n| n.index())
            .collect();
        v.sort_unstable();
        v
    }
}

/// Kahn's algorithm with a min-heap so the order is stable and readable.
fn stable_topological_order(graph: &DiGraph<usize, ()>) -> Vec<usize> {
    let n = graph.node_count();
    let mut indegree: Vec<usize> = (0..n)
        .map(|i| {
            graph
                .neighbors_directed(NodeIndex::new(i), Direction::Incoming)
                .count()
        })
        .collect();
    let mut heap: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = heap.pop() {
        order.push(i);
        for next in graph.neighbors_directed(NodeIndex::new(i), Direction::Outgoing) {
            let j = next.index();
            indegree[j] -= 1;
            if indegree[j] == 0 {
                heap.push(Reverse(j));
            }
        }
    }
    order
}

/// A shortest cycle through the earliest-declared stage of the first cyclic
/// strongly connected component, as stage indices with first == last.
fn find_cycle(graph: &DiGraph<usize, ()>) -> Vec<usize> {
    let cyclic: Vec<Vec<usize>> = tarjan_scc(graph)
        .into_iter()
        .map(|c| c.into_iter().map(|n| n.index()).collect::<Vec<_>>())
        .filter(|c| {
            c.len() > 1 || {
                let n = NodeIndex::new(c[0]);
                graph.contains_edge(n, n)
            }
        })
        .collect();
    let Some(start) = cyclic.iter().filter_map(|c| c.iter().min().copied()).min() else {
        return Vec::new();
    };
    let component: BTreeSet<usize> = cyclic
        .into_iter()
        .find(|c| c.contains(&start))
        .unwrap_or_default()
        .into_iter()
        .collect();
    // Breadth-first from `start` inside its component until we are back at it.
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        let mut next: Vec<usize> = graph
            .neighbors_directed(NodeIndex::new(node), Direction::Outgoing)
            .map(|n| n.index())
            .filter(|n| component.contains(n))
            .collect();
        next.sort_unstable();
        for n in next {
            if n == start {
                let mut path = vec![start];
                let mut cur = node;
                while cur != start {
                    path.push(cur);
                    cur = parent[&cur];
                }
                path.push(start);
                path.reverse();
                return path;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(n) {
                e.insert(node);
                queue.push_back(n);
            }
        }
    }
    Vec::new()
}
