//! Where a new workspace goes: of the nodes that are up, run the backend
//! asked for and have room, `K` picked at random, the one with the most free
//! capacity (the power of K choices: near the best spread without every
//! edge piling onto the same emptiest node at once).

use cubicle_runtime::cluster::{NodeRecord, NodeStatus};
use rand::seq::IndexedRandom;

/// How many candidates each placement looks at.
pub const K: usize = 2;

/// Why no node can take it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("no node is up")]
    NoNode,
    #[error("no node that is up runs the {0} backend")]
    NoBackend(String),
    #[error("every node that runs it is full")]
    Full,
}

/// The node a workspace of `backend` (any, if `None`) goes to.
pub fn choose<'a>(
    nodes: &'a [NodeRecord],
    backend: Option<&str>,
    rng: &mut impl rand::Rng,
) -> Result<&'a NodeRecord, PlacementError> {
    let up: Vec<&NodeRecord> = nodes
        .iter()
        .filter(|n| n.status == NodeStatus::Up)
        .collect();
    if up.is_empty() {
        return Err(PlacementError::NoNode);
    }
    let runs: Vec<&NodeRecord> = up
        .into_iter()
        .filter(|n| backend.is_none_or(|b| n.backends.iter().any(|have| have == b)))
        .collect();
    if runs.is_empty() {
        return Err(PlacementError::NoBackend(
            backend.unwrap_or("any").to_owned(),
        ));
    }
    let room: Vec<&NodeRecord> = runs.into_iter().filter(|n| n.free > 0).collect();
    let candidates: Vec<&NodeRecord> = room.choose_multiple(rng, K).copied().collect();
    // Ties go either way at random: not always to the later candidate.
    let draws: Vec<u32> = candidates.iter().map(|_| rng.random()).collect();
    candidates
        .into_iter()
        .zip(draws)
        .max_by_key(|(n, draw)| (n.free, *draw))
        .map(|(n, _)| n)
        .ok_or(PlacementError::Full)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn node(name: &str, backends: &[&str], free: u32, status: NodeStatus) -> NodeRecord {
        NodeRecord {
            name: name.into(),
            address: format!("{name}:1"),
            backends: backends.iter().map(|b| (*b).into()).collect(),
            capacity: 10,
            free,
            epoch: 1,
            status,
            heartbeat_at: 0,
            down_reason: None,
        }
    }

    #[test]
    fn it_honours_the_backend_skips_down_and_full_nodes_and_spreads() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let nodes = vec![
            node("a", &["jail"], 5, NodeStatus::Up),
            node("b", &["microvm", "jail"], 5, NodeStatus::Up),
            node("c", &["microvm", "jail"], 9, NodeStatus::Down),
            node("d", &["jail"], 0, NodeStatus::Up),
        ];
        for _ in 0..50 {
            assert_eq!(choose(&nodes, Some("microvm"), &mut rng).unwrap().name, "b");
            assert_ne!(choose(&nodes, None, &mut rng).unwrap().name, "d");
        }
        assert_eq!(
            choose(&nodes, Some("firecracker"), &mut rng),
            Err(PlacementError::NoBackend("firecracker".into()))
        );
        let full = vec![node("d", &["jail"], 0, NodeStatus::Up)];
        assert_eq!(choose(&full, None, &mut rng), Err(PlacementError::Full));
        let down = vec![node("c", &["jail"], 3, NodeStatus::Down)];
        assert_eq!(choose(&down, None, &mut rng), Err(PlacementError::NoNode));
        // Placing 60, one at a time, keeps three nodes within a few of each
        // other (two choices: the gap grows as log log n, not as √n).
        let mut nodes: Vec<NodeRecord> = ["x", "y", "z"]
            .iter()
            .map(|n| node(n, &["jail"], 30, NodeStatus::Up))
            .collect();
        for _ in 0..60 {
            let name = choose(&nodes, None, &mut rng).unwrap().name.clone();
            nodes.iter_mut().find(|n| n.name == name).unwrap().free -= 1;
        }
        let frees: Vec<u32> = nodes.iter().map(|n| n.free).collect();
        let spread = frees.iter().max().unwrap() - frees.iter().min().unwrap();
        assert!(spread <= 4, "{frees:?}");
    }
}
