//! One name, one owner (external/claims.rs): no cluster name is claimed by two AWSClusters or
//! AWSManagedControlPlanes in one region. Accounts are not compared here (that takes each
//! object's identity and an AWS call); the collector compares them before it holds a teardown.

use super::Line;
use crate::external::core::claims;

const CATEGORY: &str = "cluster-names";

pub async fn check(client: &kube::Client) -> Vec<Line> {
    let all = match claims::list(client).await {
        Ok(all) => all,
        Err(e) => {
            return vec![Line::warn(
                CATEGORY,
                e.to_string(),
                "grant list on awsclusters and awsmanagedcontrolplanes in every namespace (the shipped ClusterRole does)",
            )];
        }
    };
    lines(&claims::collisions(&all), all.len())
}

/// The lines for what [`claims::collisions`] found among `objects` objects. Pure.
pub fn lines(collisions: &[(String, Vec<String>)], objects: usize) -> Vec<Line> {
    if collisions.is_empty() {
        return vec![Line::pass(
            CATEGORY,
            format!(
                "no cluster name is claimed by two of the {objects} cluster objects in one region"
            ),
        )];
    }
    collisions
        .iter()
        .map(|(name, who)| {
            Line::warn(
                CATEGORY,
                format!("cluster name {name:?} is claimed by {}", who.join(", ")),
                "AWS tags carry only the name: in one account their resources cannot be told apart, and sweeper holds the teardown of each while the other exists (docs/capa.md, \"One name, one owner\"); rename one cluster, or keep them in different accounts",
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Status;

    #[test]
    fn a_shared_name_is_a_warning_naming_both() {
        let found = vec![(
            "dev".to_string(),
            vec![
                "AWSCluster a/dev (eu-west-1)".to_string(),
                "AWSCluster m/x (eu-west-1)".to_string(),
            ],
        )];
        let l = lines(&found, 3);
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].status, Status::Warn);
        assert!(
            l[0].message.contains("AWSCluster a/dev") && l[0].message.contains("AWSCluster m/x")
        );
        assert_eq!(lines(&[], 3)[0].status, Status::Pass);
    }
}
