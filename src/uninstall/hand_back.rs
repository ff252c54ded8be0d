//! What `sweeper uninstall` tells about CAPA's own garbage collector. Handing over to sweeper
//! turned CAPA's `ExternalResourceGC` gate off (docs/capa.md); with sweeper gone and that gate
//! still off, nothing deletes the load balancers and security groups of clusters deleted from now
//! on, and CAPA's VPC deletion waits on them. So the uninstall reads CAPA's Deployment, as
//! `sweeper check` does, and says what to do: the gate's state, and the exact change when it is
//! off or cannot be read. It changes nothing of CAPA's: that is the operator's decision.

use crate::check::capa::{find_deployment, gate_value};

/// The change that gives the AWS resources of deleted clusters back to CAPA.
pub const TURN_ON: &str = "turn it back on: EXTERNAL_RESOURCE_GC=true for clusterctl, and on the running manager \
    --feature-gates=…,ExternalResourceGC=true (docs/capa.md#handing-over-from-capas-gc-to-sweeper, the steps in reverse)";

/// Why CAPA's gate could not be told.
#[derive(Debug, thiserror::Error)]
pub enum GateUnknown {
    #[error("CAPA's gate was not read (--capa-namespace is empty)")]
    NoNamespace,
    #[error("cannot read CAPA's Deployment in {namespace}: {source}")]
    Read {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("no CAPA Deployment in {namespace}")]
    NoDeployment { namespace: String },
}

/// CAPA's gate as its Deployment in `namespace` says: Some(on) from its flags (none naming the
/// gate: on, CAPA's default since v2.9), Err(why) when it cannot be read or found.
pub async fn capa_gate(client: &kube::Client, namespace: &str) -> Result<bool, GateUnknown> {
    let d = find_deployment(client, namespace)
        .await
        .map_err(|source| GateUnknown::Read {
            namespace: namespace.to_string(),
            source,
        })?
        .ok_or_else(|| GateUnknown::NoDeployment {
            namespace: namespace.to_string(),
        })?;
    Ok(gate_value(&d).unwrap_or(true))
}

/// The paragraph the uninstall prints after releasing the external collector's finalizers.
pub fn advice(namespace: &str, gate: &Result<bool, GateUnknown>) -> String {
    let namespace = if namespace.is_empty() {
        "CAPA's namespace"
    } else {
        namespace
    };
    match gate {
        Ok(true) => format!(
            "CAPA's own external resource gc is on ({namespace}): it takes over the AWS resources of clusters deleted from now on"
        ),
        Ok(false) => format!(
            "CAPA's ExternalResourceGC gate is OFF ({namespace}): nothing deletes the load balancers and security groups of clusters \
             deleted from now on, and their VPC deletion waits on them; {TURN_ON}"
        ),
        Err(why) => format!(
            "{why}: if CAPA's ExternalResourceGC gate was turned off for sweeper, nothing deletes the load balancers and security \
             groups of clusters deleted from now on; {TURN_ON}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_advice_names_the_gate_and_the_change_unless_capa_already_collects() {
        let on = advice("capa-system", &Ok(true));
        assert!(
            on.contains("takes over") && !on.contains("EXTERNAL_RESOURCE_GC"),
            "{on}"
        );
        let off = advice("capa-system", &Ok(false));
        assert!(
            off.contains("OFF") && off.contains("ExternalResourceGC=true"),
            "{off}"
        );
        let unknown = advice(
            "capa-system",
            &Err(GateUnknown::Read {
                namespace: "capa-system".into(),
                source: kube::Error::Api(Box::new(
                    kube::core::Status::failure("forbidden", "Forbidden").with_code(403),
                )),
            }),
        );
        assert!(
            unknown.contains("forbidden") && unknown.contains("EXTERNAL_RESOURCE_GC=true"),
            "{unknown}"
        );
    }
}
