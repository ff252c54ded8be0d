//! Target groups (phase 2, `target-group`): the phase-2 ownership rule decides whose they are;
//! one the cluster owns waits while a load balancer that still exists uses it (the load
//! balancers go first; a load balancer AWS or an emulator still lists after its delete does not
//! count, the cleaner drops those before asking).

use super::Verdict;

/// `users`: the load balancers (ARNs) still attached to the group that still exist.
pub fn decide(users: &[String]) -> Verdict {
    if users.is_empty() {
        Verdict::Delete
    } else {
        Verdict::blocked(format!("in use by load balancer(s) {}", users.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    #[test]
    fn a_target_group_in_use_waits_for_its_load_balancers() {
        let lb = |a: &str| a.to_string();
        table::check(&[
            (decide(&[]), Delete, "no load balancer uses it"),
            (decide(&[lb("arn:lb/1")]), Blocked, "one still uses it"),
            (decide(&[lb("arn:lb/1"), lb("arn:lb/2")]), Blocked, "two do"),
        ]);
        assert_eq!(
            decide(&[lb("a"), lb("b")]),
            Verdict::blocked("in use by load balancer(s) a, b"),
            "the reason names them, as reported today"
        );
    }
}
