//! Placing requests on counters.
//!
//! Each request comes with the *slots* it could use: a hardware counter plus, optionally, a
//! shared resource that the slot occupies exclusively (a Pentium 4 ESCR). A placement picks one
//! slot per request so that no counter and no resource is used twice. With resources this is
//! more than bipartite matching, so the solver is a depth-first search over the requests,
//! most-constrained first; sets are at most [`crate::base::set::MAX_REQUESTS`] requests and PMUs have
//! at most a few dozen counters, which keeps the search small.
//!
//! A slot whose counter number is `ncounters` or above (see [`schedule`]) is not a hardware
//! counter: it stands for an event that needs none (the perf backend's software events on a
//! host with a PMU, see `backend::perf`). Such slots are placed like any other (one request
//! each), but a request that has one does not count against the rule that a set holds at most
//! as many requests as there are counters.
//!
//! Unlike the Solaris kernel, which assigns counters first-fit and checks ESCRs afterwards,
//! this finds a placement whenever one exists. When none exists, [`schedule`] names a minimal
//! set of requests that cannot be placed together and why.

use crate::base::error::{Conflict, ConflictReason, Error, Result};

/// One way to place a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Hardware counter.
    pub counter: u32,
    /// Shared resource occupied, if any (an index the backend understands).
    pub resource: Option<u16>,
    /// Backend-specific tag (for example which route of the event this slot came from).
    pub tag: u32,
}

/// The placement problem for one request.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Event name, for error messages.
    pub name: String,
    /// Where it may go.
    pub slots: Vec<Slot>,
}

/// Search budget: nodes visited before the solver gives up and reports a conflict.
const BUDGET: u64 = 2_000_000;

fn solve(cands: &[&Candidate]) -> Option<Vec<Slot>> {
    let mut order: Vec<usize> = (0..cands.len()).collect();
    order.sort_by_key(|&i| cands[i].slots.len());
    let mut chosen: Vec<Option<Slot>> = vec![None; cands.len()];
    let mut budget = BUDGET;
    fn dfs(
        k: usize,
        order: &[usize],
        cands: &[&Candidate],
        counters: &mut [u64; 4],
        resources: &mut [u64; 4],
        chosen: &mut [Option<Slot>],
        budget: &mut u64,
    ) -> bool {
        if k == order.len() {
            return true;
        }
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let i = order[k];
        for s in &cands[i].slots {
            let (cw, cb) = ((s.counter / 64) as usize, s.counter % 64);
            if cw >= 4 || counters[cw] & (1 << cb) != 0 {
                continue;
            }
            if let Some(r) = s.resource {
                let (rw, rb) = ((r / 64) as usize, r % 64);
                if rw >= 4 || resources[rw] & (1 << rb) != 0 {
                    continue;
                }
                resources[rw] |= 1 << rb;
            }
            counters[cw] |= 1 << cb;
            chosen[i] = Some(*s);
            if dfs(k + 1, order, cands, counters, resources, chosen, budget) {
                return true;
            }
            counters[cw] &= !(1 << cb);
            if let Some(r) = s.resource {
                resources[(r / 64) as usize] &= !(1 << (r % 64));
            }
            chosen[i] = None;
        }
        false
    }
    if dfs(
        0,
        &order,
        cands,
        &mut [0; 4],
        &mut [0; 4],
        &mut chosen,
        &mut budget,
    ) {
        Some(chosen.into_iter().map(|s| s.expect("placed")).collect())
    } else {
        None
    }
}

/// Place every candidate, or explain why not.
///
/// `ncounters` is the number of hardware counters; `resource_name` names a resource index for
/// messages. On success the result holds one slot per candidate, in order.
///
/// More requests that need a hardware counter (every slot below `ncounters`) than there are
/// counters is [`ConflictReason::TooManyRequests`] (libcpc's `nreqs > npic`, `EINVAL`), naming
/// those requests; requests with a slot at `ncounters` or above need no hardware counter and
/// are not counted.
pub fn schedule(
    cands: &[Candidate],
    ncounters: usize,
    resource_name: &dyn Fn(u16) -> String,
) -> Result<Vec<Slot>> {
    let needing: Vec<(usize, String)> = cands
        .iter()
        .enumerate()
        .filter(|(_, c)| c.slots.iter().all(|s| (s.counter as usize) < ncounters))
        .map(|(i, c)| (i, c.name.clone()))
        .collect();
    if needing.len() > ncounters {
        return Err(Error::Conflict(Conflict {
            reason: ConflictReason::TooManyRequests {
                requested: needing.len(),
                available: ncounters,
            },
            requests: needing,
        }));
    }
    let all: Vec<&Candidate> = cands.iter().collect();
    if let Some(s) = solve(&all) {
        return Ok(s);
    }
    // Shrink to a minimal infeasible subset: drop every request the conflict survives without.
    let mut keep: Vec<usize> = (0..cands.len()).collect();
    let mut i = 0;
    while i < keep.len() {
        let trial: Vec<usize> = keep.iter().copied().filter(|&j| j != keep[i]).collect();
        let refs: Vec<&Candidate> = trial.iter().map(|&j| &cands[j]).collect();
        if !trial.is_empty() && solve(&refs).is_none() {
            keep = trial;
        } else {
            i += 1;
        }
    }
    let mut counters: Vec<u32> = keep
        .iter()
        .flat_map(|&j| cands[j].slots.iter().map(|s| s.counter))
        .collect();
    counters.sort_unstable();
    counters.dedup();
    let reason = if counters.len() < keep.len() {
        ConflictReason::SameCounter { counters }
    } else {
        // Enough counters: a shared resource is what runs out. Name the one most of the
        // conflicting requests depend on.
        let mut best: Option<(usize, u16)> = None;
        let mut seen: Vec<u16> = keep
            .iter()
            .flat_map(|&j| cands[j].slots.iter().filter_map(|s| s.resource))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        for r in seen {
            let n = keep
                .iter()
                .filter(|&&j| cands[j].slots.iter().any(|s| s.resource == Some(r)))
                .count();
            if best.is_none_or(|(bn, _)| n > bn) {
                best = Some((n, r));
            }
        }
        match best {
            Some((_, r)) => ConflictReason::SharedResource {
                resource: resource_name(r),
            },
            None => ConflictReason::SameCounter { counters },
        }
    };
    Err(Error::Conflict(Conflict {
        requests: keep.iter().map(|&j| (j, cands[j].name.clone())).collect(),
        reason,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(counter: u32, resource: Option<u16>) -> Slot {
        Slot {
            counter,
            resource,
            tag: 0,
        }
    }
    fn cand(name: &str, slots: Vec<Slot>) -> Candidate {
        Candidate {
            name: name.into(),
            slots,
        }
    }
    fn rn(r: u16) -> String {
        format!("R{r}")
    }

    #[test]
    fn finds_a_placement_a_first_fit_would_miss() {
        // a can go on 0 or 1, b only on 0: first-fit puts a on 0 and fails.
        let c = [
            cand("a", vec![slot(0, None), slot(1, None)]),
            cand("b", vec![slot(0, None)]),
        ];
        let s = schedule(&c, 2, &rn).unwrap();
        assert_eq!((s[0].counter, s[1].counter), (1, 0));
    }

    #[test]
    fn same_counter_conflict_names_both() {
        let c = [
            cand("nine", vec![slot(0, None)]),
            cand("ten", vec![slot(0, None)]),
        ];
        let Err(Error::Conflict(k)) = schedule(&c, 2, &rn) else {
            panic!()
        };
        assert_eq!(k.requests, vec![(0, "nine".into()), (1, "ten".into())]);
        assert_eq!(k.reason, ConflictReason::SameCounter { counters: vec![0] });
    }

    #[test]
    fn shared_resource_conflict() {
        // Both pinned to different counters, but both counters need resource 2.
        let c = [
            cand("x", vec![slot(12, Some(2))]),
            cand("y", vec![slot(13, Some(2))]),
        ];
        let Err(Error::Conflict(k)) = schedule(&c, 18, &rn) else {
            panic!()
        };
        assert_eq!(
            k.reason,
            ConflictReason::SharedResource {
                resource: "R2".into()
            }
        );
        // Move one to a counter behind another resource: fine.
        let c = [
            cand("x", vec![slot(12, Some(2))]),
            cand("y", vec![slot(14, Some(3))]),
        ];
        assert!(schedule(&c, 18, &rn).is_ok());
    }

    /// Requests with a slot beyond the hardware counters (events that need none) do not count
    /// against the number of counters, and take those slots, not the hardware ones.
    #[test]
    fn requests_that_need_no_counter_are_not_too_many() {
        let hw = |n: &str| cand(n, vec![slot(0, None), slot(1, None)]);
        let sw = |n: &str| cand(n, (0..2).chain(64..66).map(|c| slot(c, None)).collect());
        let c = [sw("s0"), hw("a"), sw("s1"), hw("b")];
        let s = schedule(&c, 2, &rn).unwrap();
        let on: Vec<u32> = s.iter().map(|s| s.counter).collect();
        assert!(
            on[1] < 2 && on[3] < 2 && on[0] >= 64 && on[2] >= 64,
            "{on:?}"
        );
        // Three that need a counter are too many, and only they are named.
        let c = [sw("s0"), hw("a"), hw("b"), hw("c")];
        let Err(Error::Conflict(k)) = schedule(&c, 2, &rn) else {
            panic!()
        };
        assert_eq!(
            k.requests,
            vec![(1, "a".into()), (2, "b".into()), (3, "c".into())]
        );
        assert_eq!(
            k.reason,
            ConflictReason::TooManyRequests {
                requested: 3,
                available: 2
            }
        );
    }

    #[test]
    fn too_many_and_minimal_subset() {
        let c = [
            cand("a", vec![slot(0, None)]),
            cand("b", vec![slot(0, None), slot(1, None)]),
            cand("c", vec![slot(1, None), slot(2, None)]),
            cand("d", vec![slot(0, None)]),
        ];
        let Err(Error::Conflict(k)) = schedule(&c, 4, &rn) else {
            panic!()
        };
        // a and d both need counter 0; b and c are innocent.
        assert_eq!(k.requests, vec![(0, "a".into()), (3, "d".into())]);
        let Err(Error::Conflict(k)) = schedule(&c, 3, &rn) else {
            panic!()
        };
        assert!(matches!(
            k.reason,
            ConflictReason::TooManyRequests {
                requested: 4,
                available: 3
            }
        ));
    }
}
