//! Which processes belong to the tree under watch. A process joins when its parent is
//! already a member (or when the cgroup lists it) and, once seen, it is followed until
//! it exits, wherever it is re-parented; a pid is only trusted together with its start
//! time, so a recycled pid is never mistaken for a member.

use std::collections::{HashMap, HashSet};

/// From the current members and unclassified `(pid, ppid)` pairs, the pids that descend
/// from the tree. Parents may appear in the same batch as their children, in any order.
pub fn new_descendants(members: &HashSet<u32>, candidates: &[(u32, u32)]) -> Vec<u32> {
    let mut joined: HashSet<u32> = HashSet::new();
    loop {
        let before = joined.len();
        for &(pid, ppid) in candidates {
            if !joined.contains(&pid) && (members.contains(&ppid) || joined.contains(&ppid)) {
                joined.insert(pid);
            }
        }
        if joined.len() == before {
            break;
        }
    }
    let mut out: Vec<u32> = joined.into_iter().collect();
    out.sort_unstable();
    out
}

/// Pids known not to be in the tree, with their start times; a pid that is reused by a
/// new process gets looked at again.
#[derive(Default)]
pub struct Outsiders {
    known: HashMap<u32, u64>,
}

impl Outsiders {
    #[cfg(test)]
    pub fn is_known(&self, pid: u32, start_ticks: u64) -> bool {
        self.known.get(&pid) == Some(&start_ticks)
    }

    pub fn contains_pid(&self, pid: u32) -> bool {
        self.known.contains_key(&pid)
    }

    pub fn insert(&mut self, pid: u32, start_ticks: u64) {
        self.known.insert(pid, start_ticks);
    }

    /// Forgets pids that no longer exist, so the table does not grow forever.
    pub fn retain_live(&mut self, live: &HashSet<u32>) {
        self.known.retain(|pid, _| live.contains(pid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_grandchildren_listed_before_their_parents() {
        let members: HashSet<u32> = [100].into_iter().collect();
        // 300 is a child of 200 which is a child of the root 100; 400 belongs to init.
        let got = new_descendants(&members, &[(300, 200), (400, 1), (200, 100)]);
        assert_eq!(got, vec![200, 300]);
    }

    #[test]
    fn a_setsid_child_reparented_to_a_member_still_joins() {
        // After a double fork the grandchild's parent is the subreaper (strainline, 50),
        // which is a member of the search set while the command runs.
        let members: HashSet<u32> = [50, 100].into_iter().collect();
        assert_eq!(new_descendants(&members, &[(777, 50)]), vec![777]);
    }

    #[test]
    fn recycled_pids_are_looked_at_again() {
        let mut o = Outsiders::default();
        o.insert(42, 1000);
        assert!(o.is_known(42, 1000));
        assert!(!o.is_known(42, 2000));
    }
}
