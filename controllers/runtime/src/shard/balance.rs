//! Which ranges a replica takes and which it hands over: a pure function of what the Leases
//! say, judged each retry period.
//!
//! Membership and balance go through Leases only. Every replica holds a member Lease while it
//! runs; the live members, sorted by identity, share the N ranges fairly: each gets `N / M`,
//! and the first `N % M` one more, so the shares add up to N exactly. A replica takes free
//! ranges (no holder, or a Lease that expired by the observer's clock) until it holds its
//! share, and hands over the ranges above its share (the highest first). A range whose Lease
//! is still valid is never taken, whoever holds it, even a replica no longer a member: a
//! replica cut off from the API server may still be acting on it until its lease runs out.

use std::collections::BTreeSet;

/// One range's Lease as the replica last observed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeLease {
    pub range: u32,
    /// `""` when released.
    pub holder: String,
    /// Not expired by the observer's clock (counted from when the record was seen to change,
    /// never from `renewTime`, as the leader election judges).
    pub valid: bool,
}

/// What a replica sees: the live members (itself included) and the ranges' Leases (a range
/// without a Lease is free).
#[derive(Debug, Clone)]
pub struct View<'a> {
    pub ranges: u32,
    pub me: &'a str,
    pub members: &'a [String],
    pub leases: &'a [RangeLease],
}

/// The decision: the ranges to take (acquire their Leases) and to hand over (drain, then
/// release), and the share it aims at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub share: u32,
    pub take: Vec<u32>,
    pub hand_over: Vec<u32>,
}

/// The share of `me` among `members` (sorted by identity, duplicates ignored; `me` counts
/// even when its own member Lease is not seen yet).
pub fn share(ranges: u32, me: &str, members: &[String]) -> u32 {
    let mut all: BTreeSet<&str> = members.iter().map(String::as_str).collect();
    all.insert(me);
    let m = u32::try_from(all.len()).unwrap_or(u32::MAX).max(1);
    let position = all.iter().position(|id| *id == me).unwrap_or(0);
    let position = u32::try_from(position).unwrap_or(u32::MAX);
    ranges / m + u32::from(position < ranges % m)
}

/// Where `me`'s stretch of the ring begins: the sum of the shares of the members before it.
fn home(ranges: u32, me: &str, members: &[String]) -> u32 {
    let mut all: BTreeSet<&str> = members.iter().map(String::as_str).collect();
    all.insert(me);
    let m = u32::try_from(all.len()).unwrap_or(u32::MAX).max(1);
    let position = all.iter().position(|id| *id == me).unwrap_or(0);
    let position = u32::try_from(position).unwrap_or(u32::MAX);
    position * (ranges / m) + position.min(ranges % m)
}

/// The ranges to take and to hand over.
pub fn plan(view: &View<'_>) -> Plan {
    let share = share(view.ranges, view.me, view.members);
    let mut held = BTreeSet::new();
    let mut taken = BTreeSet::new();
    for l in view.leases.iter().filter(|l| l.range < view.ranges) {
        if l.holder == view.me && l.valid {
            held.insert(l.range);
        } else if l.valid && !l.holder.is_empty() {
            taken.insert(l.range);
        }
    }
    let count = u32::try_from(held.len()).unwrap_or(u32::MAX);
    let mut plan = Plan {
        share,
        ..Plan::default()
    };
    if count > share {
        let surplus = (count - share) as usize;
        plan.hand_over = held.iter().rev().take(surplus).copied().collect();
    } else if count < share {
        let wanted = (share - count) as usize;
        // From this member's own stretch of the ring on (the ranges its share would cover if
        // the members, in identity order, held consecutive stretches): replicas that start
        // together then reach for different free ranges instead of racing for the same ones.
        let home = home(view.ranges, view.me, view.members);
        plan.take = (0..view.ranges)
            .map(|i| (home + i) % view.ranges)
            .filter(|i| !held.contains(i) && !taken.contains(i))
            .take(wanted)
            .collect();
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    fn lease(range: u32, holder: &str, valid: bool) -> RangeLease {
        RangeLease {
            range,
            holder: holder.to_owned(),
            valid,
        }
    }

    #[test]
    fn shares_add_up_to_the_ring() {
        for (ranges, members) in [(16, 3), (16, 1), (16, 16), (3, 5), (1000, 7)] {
            let names: Vec<String> = (0..members).map(|i| format!("r{i:02}")).collect();
            let total: u32 = names.iter().map(|me| share(ranges, me, &names)).sum();
            assert_eq!(total, ranges, "{ranges} ranges over {members}");
        }
        // 16 over 3: the first in identity order gets the extra one.
        let names = ids(&["b", "a", "c"]);
        assert_eq!(share(16, "a", &names), 6);
        assert_eq!(share(16, "b", &names), 5);
        assert_eq!(share(16, "c", &names), 5);
        // More members than ranges: the last ones hold nothing.
        assert_eq!(share(2, "c", &names), 0);
        // Itself counted before its member Lease is seen.
        assert_eq!(share(4, "b", &ids(&["a"])), 2);
    }

    /// The plan of `me` among `members` over `leases`: (share, take, hand over).
    fn planned(
        ranges: u32,
        me: &str,
        members: &[&str],
        leases: &[RangeLease],
    ) -> (u32, Vec<u32>, Vec<u32>) {
        let members = ids(members);
        let p = plan(&View {
            ranges,
            me,
            members: &members,
            leases,
        });
        (p.share, p.take, p.hand_over)
    }

    #[test]
    fn plans_take_free_ranges_up_to_the_share() {
        // Alone on an empty ring: takes everything.
        assert_eq!(planned(4, "a", &["a"], &[]), (4, vec![0, 1, 2, 3], vec![]));
        // The newcomer takes only free ranges, never a valid one.
        let leases = [
            lease(0, "a", true),
            lease(1, "a", true),
            lease(2, "", true),
            lease(3, "a", true),
        ];
        assert_eq!(planned(4, "b", &["a", "b"], &leases), (2, vec![2], vec![]));
        // An expired range of a vanished member is free; a valid one is not.
        let leases = [
            lease(0, "a", true),
            lease(1, "a", true),
            lease(2, "c", false),
            lease(3, "c", true),
        ];
        assert_eq!(planned(4, "a", &["a"], &leases), (4, vec![2], vec![]));
        // Its own expired lease is not held: retaken as free.
        let leases = [lease(0, "a", false), lease(1, "a", true)];
        assert_eq!(planned(2, "a", &["a"], &leases), (2, vec![0], vec![]));
        // Leases of ranges past the ring are ignored.
        assert_eq!(
            planned(2, "a", &["a"], &[lease(5, "a", true)]),
            (2, vec![0, 1], vec![])
        );
    }

    #[test]
    fn replicas_starting_together_reach_for_different_ranges() {
        // Three members see each other on an empty ring of 8 (shares 3, 3, 2): each starts
        // at its own stretch, so their first takes do not collide.
        let members = ["a", "b", "c"];
        assert_eq!(planned(8, "a", &members, &[]), (3, vec![0, 1, 2], vec![]));
        assert_eq!(planned(8, "b", &members, &[]), (3, vec![3, 4, 5], vec![]));
        assert_eq!(planned(8, "c", &members, &[]), (2, vec![6, 7], vec![]));
        // Its stretch taken by someone else: it wraps around to the free ones.
        let leases = [lease(6, "a", true), lease(7, "a", true)];
        assert_eq!(planned(8, "c", &members, &leases), (2, vec![0, 1], vec![]));
    }

    #[test]
    fn plans_hand_over_the_ranges_above_the_share() {
        // A second member joins: the first hands over its highest ranges.
        let all: Vec<RangeLease> = (0..4).map(|i| lease(i, "a", true)).collect();
        assert_eq!(planned(4, "a", &["a", "b"], &all), (2, vec![], vec![3, 2]));
        // At its share: nothing to do.
        let leases = [
            lease(0, "a", true),
            lease(1, "a", true),
            lease(2, "b", true),
        ];
        assert_eq!(planned(3, "b", &["a", "b"], &leases), (1, vec![], vec![]));
        assert_eq!(planned(3, "a", &["a", "b"], &leases), (2, vec![], vec![]));
    }

    #[test]
    fn replicas_following_their_plans_split_the_ring_exactly() {
        // One replica held the whole ring; two more join. Each applies its plan in turn on a
        // shared view.
        let members = ids(&["a", "b", "c"]);
        let mut holders: Vec<String> = vec!["a".to_owned(); 10];
        for _round in 0..10 {
            for me in &members {
                let leases: Vec<RangeLease> = holders
                    .iter()
                    .enumerate()
                    .map(|(i, h)| lease(u32::try_from(i).unwrap_or(0), h, true))
                    .collect();
                let p = plan(&View {
                    ranges: 10,
                    me,
                    members: &members,
                    leases: &leases,
                });
                for i in p.hand_over {
                    holders[i as usize].clear();
                }
                for i in p.take {
                    holders[i as usize].clone_from(me);
                }
            }
        }
        let count = |me: &str| holders.iter().filter(|h| *h == me).count();
        assert_eq!((count("a"), count("b"), count("c")), (4, 3, 3));
    }
}
