//! Where a session acts (partition, region, account): anything discovered outside it is not the
//! cluster's. Below `model`, which carries it in `AwsClients`; `session` builds it.

use crate::arn::Arn;

/// The account, region and partition a session acts in: anything discovered that names another
/// is not the cluster's, whatever its tags say.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scope {
    pub partition: String,
    pub region: String,
    pub account: String,
}

impl Scope {
    /// Why `arn` is outside this scope, or `None` when it is inside.
    pub fn foreign(&self, arn: &Arn) -> Option<String> {
        let mismatch = |what: &str, got: &str, want: &str| {
            Some(format!("{what} {got:?}, not the session's {want:?}"))
        };
        if arn.partition != self.partition {
            return mismatch("partition", &arn.partition, &self.partition);
        }
        if arn.region != self.region {
            return mismatch("region", &arn.region, &self.region);
        }
        if arn.account != self.account {
            return mismatch("account", &arn.account, &self.account);
        }
        None
    }
}
