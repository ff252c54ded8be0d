//! What a collector tells `sweeper check` about itself, beyond the kinds it reads
//! ([`crate::engine::served::ServedKind`]): the permissions it needs ([`Permission`], reviewed one
//! by one in check/rbac.rs) and the further sections that apply while it is enabled
//! ([`Preflight`]). The check names no collector: it asks each enabled one's `CollectorDescriptor`.

/// One permission: a verb on a resource, in a namespace (empty: every namespace) and on a name
/// (empty: any).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Permission {
    pub group: &'static str,
    pub resource: &'static str,
    pub subresource: &'static str,
    pub verb: &'static str,
    pub namespace: String,
    pub name: String,
}

impl Permission {
    /// Each of `verbs` on `group`/`resource` in `namespace` (empty: every namespace), any name.
    pub fn verbs(
        group: &'static str,
        resource: &'static str,
        verbs: &[&'static str],
        namespace: &str,
    ) -> Vec<Permission> {
        verbs
            .iter()
            .map(|verb| Permission {
                group,
                resource,
                subresource: "",
                verb,
                namespace: namespace.to_string(),
                name: String::new(),
            })
            .collect()
    }
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)?;
        if !self.subresource.is_empty() {
            write!(f, "/{}", self.subresource)?;
        }
        if !self.name.is_empty() {
            write!(f, " {:?}", self.name)?;
        }
        if self.namespace.is_empty() {
            f.write_str(" (all namespaces)")
        } else {
            write!(f, " in {}", self.namespace)
        }
    }
}

/// What the permissions a collector needs depend on (from `sweeper run`'s flags).
#[derive(Clone, Copy, Debug)]
pub struct Access<'a> {
    /// Deleted objects are archived (`--archive` other than `none`).
    pub archive: bool,
    /// CAPA's namespace, where static identities' Secrets live (`--capa-namespace`).
    pub capa_namespace: &'a str,
}

/// What a collector that deletes whatever it discovers needs, like kube-controller-manager's
/// garbage collector: every verb it uses on every kind, and with the archive on, the records.
pub fn every_kind(access: Access<'_>) -> Vec<Permission> {
    let mut own = Permission::verbs("*", "*", &["get", "list", "watch", "patch", "delete"], "");
    if access.archive {
        // A Secret's record is a Secret, in the deleted object's namespace.
        own.extend(Permission::verbs(
            "",
            "secrets",
            &["create", "deletecollection"],
            "",
        ));
        own.extend(Permission::verbs(
            "",
            "configmaps",
            &["create", "deletecollection"],
            "",
        ));
    }
    own
}

/// A section of `sweeper check` that applies only while some collector is enabled, in the order
/// the sections run (a section runs once, however many enabled collectors ask for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Preflight {
    /// `capa`: the hand-over from CAPA's own gc (check/capa.rs).
    Capa,
    /// `aws`: every cluster identity in use builds its session (check/aws.rs).
    Aws,
    /// `kube-gc`: kube-controller-manager's garbage collector is not racing ours
    /// (check/kube_gc.rs).
    KubeGc,
    /// `archive`: the archive's size and expiry, when it is on (check/archive.rs).
    Archive,
}
