//! Who deleted the workload cluster's AWS resources, where CAPA's own controller ran beside
//! sweeper: sweeper's audit trail (every delete it made, `deletedAt`) against CAPA's log (its
//! `Deleted ...` and `released ...` lines name the ids). A resource in neither went with another
//! (a NAT gateway's interface, say) or was deleted by a call neither logs.

use crate::aws_world::{self, AwsRes};
use crate::kube_util::Res;
use crate::workload;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ListParams;
use kube::{Api, Client};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

/// The ids sweeper's audit trail records as deleted for the demo's cluster.
async fn audited(c: &Client) -> Res<BTreeSet<String>> {
    let selector = sweeper::external::core::audit::selector(workload::NS, aws_world::CLUSTER);
    let records = Api::<ConfigMap>::all(c.clone())
        .list(&ListParams::default().labels(&selector))
        .await?;
    let mut ids = BTreeSet::new();
    for r in records.items {
        for entry in r.data.unwrap_or_default().into_values() {
            let v: Value = serde_json::from_str(&entry)?;
            if v["deletedAt"].is_string()
                && let Some(id) = v["id"].as_str()
            {
                ids.insert(id.to_string());
            }
        }
    }
    Ok(ids)
}

/// True if `id` (an id, a name or an ARN) names `r`.
fn names(id: &str, r: &AwsRes) -> bool {
    id == r.id || id.ends_with(&format!("/{}", r.id)) || r.id.ends_with(&format!("/{id}"))
}

/// How CAPA's log may name `r`: by its id, and a load balancer or target group also by the name
/// its ARN carries (`...:loadbalancer/net/<name>/<hash>`, `...:targetgroup/<name>/<hash>`).
fn log_names(r: &AwsRes) -> Vec<String> {
    let mut out = vec![r.id.clone()];
    let parts: Vec<&str> = r.id.split('/').collect();
    match parts.as_slice() {
        [_, "app" | "net", name, _] | [_, name, _] if r.id.starts_with("arn:") => {
            out.push(name.to_string())
        }
        _ => {}
    }
    out
}

/// Prints who deleted each of `resources`, by kind.
pub async fn print(c: &Client, resources: &[AwsRes], capa_log: &Path) -> Res<()> {
    let by_sweeper = audited(c).await?;
    let log = std::fs::read_to_string(capa_log)
        .map_err(|e| format!("CAPA's log {}: {e}", capa_log.display()))?;
    let capa_lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("] \"Deleted") || l.contains("] \"released"))
        .collect();
    let (mut sweeper, mut capa, mut neither) = (vec![], vec![], vec![]);
    for r in resources {
        if by_sweeper.iter().any(|id| names(id, r)) {
            sweeper.push(r.clone());
        } else if log_names(r).iter().any(|n| {
            let quoted = format!("\"{n}\"");
            capa_lines.iter().any(|l| l.contains(&quoted))
        }) {
            capa.push(r.clone());
        } else {
            neither.push(r.clone());
        }
    }
    println!();
    println!(
        "== who deleted cluster {}'s AWS resources (CAPA's controller ran beside sweeper, its ExternalResourceGC gate off)",
        aws_world::CLUSTER
    );
    let rows = [
        ("sweeper (its audit trail)", &sweeper),
        ("CAPA's controller (its log)", &capa),
        ("neither's record", &neither),
    ];
    for (who, rs) in rows {
        if !rs.is_empty() {
            let counts = crate::report::wrap(&aws_world::counts(rs), 34);
            println!("  {who:<30}  {:>2}  {counts}", rs.len());
        }
    }
    // CAPA logs its target groups' delete without naming them.
    let unnamed = "Successfully deleted all associated Target Groups";
    if neither
        .iter()
        .any(|r| r.kind == aws_world::Kind::TargetGroup)
        && log.contains(unnamed)
    {
        println!("  (CAPA's log says \"{unnamed}\" after deleting its load balancer, naming none)");
    }
    println!(
        "  (CAPA's log: {}; sweeper's audit: kubectl get configmaps -A -l '{}')",
        capa_log.display(),
        sweeper::external::core::audit::selector(workload::NS, aws_world::CLUSTER)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws_world::Kind;

    #[test]
    fn an_id_names_its_resource_as_id_name_or_arn() {
        let lb = AwsRes::new(
            Kind::ClassicElb,
            "a5f0c9e21b7d44e8a3c6d1f2e9b8c7d6".to_string(),
        );
        let arn = "arn:aws:elasticloadbalancing:us-east-1:000000000000:loadbalancer/a5f0c9e21b7d44e8a3c6d1f2e9b8c7d6";
        assert!(names(arn, &lb));
        assert!(names("a5f0c9e21b7d44e8a3c6d1f2e9b8c7d6", &lb));
        assert!(!names("loadbalancer/a5f0c9e21b7d44e8a3c6d1f2e9b8c7d", &lb));
        let sg = AwsRes::new(Kind::SecurityGroup, "sg-1".to_string());
        assert!(!names("sg-12", &sg));
    }

    #[test]
    fn capas_log_names_a_load_balancer_by_its_arns_name() {
        let nlb = AwsRes::new(
            Kind::Nlb,
            "arn:aws:elasticloadbalancing:us-east-1:000000000000:loadbalancer/net/demo-wl-apiserver/50dc6c495c0c9188".to_string(),
        );
        assert_eq!(log_names(&nlb)[1], "demo-wl-apiserver");
        let tg = AwsRes::new(
            Kind::TargetGroup,
            "arn:aws:elasticloadbalancing:us-east-1:000000000000:targetgroup/apiserver-target-1/73e2d6bc24d8a067".to_string(),
        );
        assert_eq!(log_names(&tg)[1], "apiserver-target-1");
        let sg = AwsRes::new(Kind::SecurityGroup, "sg-1".to_string());
        assert_eq!(log_names(&sg), vec!["sg-1".to_string()]);
    }
}
