//! What an archive record is stored as: a ConfigMap, or a Secret when it holds archived Secrets
//! (their data stays as secret as it was). Every call that creates, patches, lists or deletes
//! records goes through [`RecordKind`], so the choice is made once per record and each call is
//! written once for both kinds. The calls go through `Api<DynamicObject>`: the same paths, verbs
//! and bodies as the typed APIs, so RBAC and the audit log see no difference.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ObjectMeta};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordKind {
    ConfigMap,
    Secret,
}

impl RecordKind {
    pub fn of(secret: bool) -> Self {
        if secret {
            RecordKind::Secret
        } else {
            RecordKind::ConfigMap
        }
    }

    fn resource(self) -> ApiResource {
        match self {
            RecordKind::ConfigMap => ApiResource::erase::<ConfigMap>(&()),
            RecordKind::Secret => ApiResource::erase::<Secret>(&()),
        }
    }

    /// The records of one namespace, or of every namespace (None).
    pub fn api(self, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
        let ar = self.resource();
        match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        }
    }

    /// A record of this kind with `metadata` and the entries `data` (key to JSON text); a
    /// Secret's values are encoded here, as the API expects them.
    pub fn object(self, metadata: ObjectMeta, data: BTreeMap<String, String>) -> DynamicObject {
        let ar = self.resource();
        let mut o = DynamicObject::new(metadata.name.as_deref().unwrap_or_default(), &ar);
        o.metadata = metadata;
        o.data = match self {
            RecordKind::ConfigMap => serde_json::json!({ "data": data }),
            RecordKind::Secret => {
                let data: BTreeMap<String, ByteString> = data
                    .into_iter()
                    .map(|(k, v)| (k, ByteString(v.into_bytes())))
                    .collect();
                serde_json::json!({ "type": super::SECRET_TYPE, "data": data })
            }
        };
        o
    }

    /// The keys of a record as the API server returned it (both kinds keep them under `data`).
    pub fn keys(o: &DynamicObject) -> Vec<String> {
        match o.data.get("data") {
            Some(Value::Object(m)) => m.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// The record's entries, and the keys whose value is not an entry (see
    /// [`super::read_configmap`]). A record the API server returned that is not of its kind
    /// reads as empty.
    pub fn read(self, o: &DynamicObject) -> (Vec<super::ArchiveEntry>, Vec<String>) {
        let o = o.clone();
        match self {
            RecordKind::ConfigMap => o
                .try_parse::<ConfigMap>()
                .map(|c| super::read_configmap(&c))
                .unwrap_or_default(),
            RecordKind::Secret => o
                .try_parse::<Secret>()
                .map(|s| super::read_secret(&s))
                .unwrap_or_default(),
        }
    }

    /// The record's entries.
    pub fn entries(self, o: &DynamicObject) -> Vec<super::ArchiveEntry> {
        self.read(o).0
    }
}

impl std::fmt::Display for RecordKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RecordKind::ConfigMap => "ConfigMaps",
            RecordKind::Secret => "Secrets",
        })
    }
}

/// Both kinds, ConfigMaps first.
pub const BOTH: [RecordKind; 2] = [RecordKind::ConfigMap, RecordKind::Secret];

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> ObjectMeta {
        ObjectMeta {
            name: Some("r".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_secret_record_is_a_typed_secret_with_encoded_entries() {
        let data = BTreeMap::from([("u1.json".to_string(), "{\"a\":1}".to_string())]);
        let o = RecordKind::Secret.object(meta(), data.clone());
        assert_eq!(o.types.as_ref().unwrap().kind, "Secret");
        assert_eq!(RecordKind::keys(&o), vec!["u1.json"]);
        let s: Secret = serde_json::from_value(serde_json::to_value(&o).unwrap()).unwrap();
        assert_eq!(s.type_.as_deref(), Some(super::super::SECRET_TYPE));
        assert_eq!(s.data.unwrap()["u1.json"].0, b"{\"a\":1}");
        let c: ConfigMap = serde_json::from_value(
            serde_json::to_value(RecordKind::ConfigMap.object(meta(), data)).unwrap(),
        )
        .unwrap();
        assert_eq!(c.data.unwrap()["u1.json"], "{\"a\":1}");
    }
}
