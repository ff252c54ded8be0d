//! Kubernetes API types sweeper owns or reads. CRD YAML is generated from these types
//! (`sweeper crds`), never written by hand.

pub mod capa;
pub mod tenant;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// Every CRD sweeper ships, in a stable order.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    vec![
        tenant::Tenant::crd(),
        capa::AWSCluster::crd(),
        capa::AWSManagedControlPlane::crd(),
        capa::cluster_crd(),
    ]
}

/// The CRDs as one multi-document YAML stream, as `sweeper crds` prints it.
pub fn crds_yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for crd in all_crds() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crds_yaml_has_one_document_per_crd() {
        let yaml = crds_yaml().unwrap();
        assert_eq!(yaml.matches("---\n").count(), all_crds().len());
        assert!(yaml.contains("name: tenants.tenant.kubezoo.io"));
    }
}
