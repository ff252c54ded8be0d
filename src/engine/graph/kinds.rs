//! Interned `(apiVersion, kind)` pairs, and what discovery knows about each (its resource and
//! scope). Nodes and owner links carry a 2-byte [`KindId`] instead of two strings.

use kube::discovery::ApiResource;
use std::collections::HashMap;

pub type KindId = u16;

#[derive(Clone, Debug)]
pub struct KindInfo {
    pub api_version: String,
    pub kind: String,
    /// The API group (empty for core), derived from `api_version`.
    pub group: String,
}

/// The discovered resource serving a `(group, kind)`, whatever version the reference names.
#[derive(Clone, Debug)]
pub struct ResolvedKind {
    pub resource: ApiResource,
    pub namespaced: bool,
}

#[derive(Debug, Default)]
pub struct Kinds {
    infos: Vec<KindInfo>,
    by_name: HashMap<(String, String), KindId>,
    /// `(group, kind)` -> resource, replaced wholesale on every discovery refresh.
    resolved: HashMap<(String, String), ResolvedKind>,
}

pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

impl Kinds {
    /// The id of `(api_version, kind)`, interning it on first sight. Saturates at `u16::MAX`
    /// distinct kinds (far more than any cluster serves); the last id is then shared, which only
    /// weakens identity checks for the overflowing kinds.
    pub fn intern(&mut self, api_version: &str, kind: &str) -> KindId {
        if let Some(id) = self
            .by_name
            .get(&(api_version.to_string(), kind.to_string()))
        {
            return *id;
        }
        if self.infos.len() >= usize::from(KindId::MAX) {
            return KindId::MAX - 1;
        }
        let id = self.infos.len() as KindId;
        self.infos.push(KindInfo {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            group: group_of(api_version).to_string(),
        });
        self.by_name
            .insert((api_version.to_string(), kind.to_string()), id);
        id
    }

    pub fn info(&self, id: KindId) -> &KindInfo {
        &self.infos[usize::from(id).min(self.infos.len().saturating_sub(1))]
    }

    /// Replaces the discovered resources (call after each discovery refresh).
    pub fn set_resolved(&mut self, resources: impl IntoIterator<Item = ResolvedKind>) {
        self.resolved = resources
            .into_iter()
            .map(|r| ((r.resource.group.clone(), r.resource.kind.clone()), r))
            .collect();
    }

    /// The resource serving kind `id`, if discovery knows one.
    pub fn resolve(&self, id: KindId) -> Option<&ResolvedKind> {
        let info = self.info(id);
        self.resolved.get(&(info.group.clone(), info.kind.clone()))
    }

    /// Whether two kind ids name the same group and kind (versions may differ).
    pub fn same_group_kind(&self, a: KindId, b: KindId) -> bool {
        a == b || {
            let (x, y) = (self.info(a), self.info(b));
            x.group == y.group && x.kind == y.kind
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_stable() {
        let mut k = Kinds::default();
        let a = k.intern("apps/v1", "Deployment");
        let b = k.intern("v1", "ConfigMap");
        assert_ne!(a, b);
        assert_eq!(k.intern("apps/v1", "Deployment"), a);
        assert_eq!(k.info(a).group, "apps");
        assert_eq!(k.info(b).group, "");
    }

    #[test]
    fn versions_share_group_kind() {
        let mut k = Kinds::default();
        let a = k.intern("example.com/v1", "Widget");
        let b = k.intern("example.com/v2", "Widget");
        let c = k.intern("other.com/v1", "Widget");
        assert!(k.same_group_kind(a, b));
        assert!(!k.same_group_kind(a, c));
    }
}
