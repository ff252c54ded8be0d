//! Converting watched metadata into the graph's compact form ([`MetaLite`]).

use crate::engine::graph::node::{MetaLite, OwnerRefLite, flag};
use crate::engine::graph::uid::Uid;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";
pub const FINALIZER_ORPHAN: &str = "orphan";
pub const FINALIZER_CASCADE_COMPLETE: &str = "sweeper.dev/cascade-complete";

/// How sweeper names an object in logs, Events, errors and `sweeper status`: `Kind ns/name`, or
/// `Kind name` when cluster-scoped (as `kubectl describe` does).
pub fn object_label(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// [`object_label`] of a typed object.
pub fn label_of<K: kube::Resource>(obj: &K) -> String
where
    K::DynamicType: Default,
{
    object_label(
        &K::kind(&K::DynamicType::default()),
        obj.meta().namespace.as_deref(),
        obj.meta().name.as_deref().unwrap_or_default(),
    )
}

/// Whether a DELETE of the object with `uid` took effect, from what a read finds under its name
/// now: nothing, another object (the name re-used), or the object itself being deleted. Asked
/// when a DELETE's answer was lost or refused, to settle its archive entry truthfully.
pub fn deleted_or_deleting(found: Option<&ObjectMeta>, uid: &str) -> bool {
    found.is_none_or(|m| m.uid.as_deref() != Some(uid) || m.deletion_timestamp.is_some())
}

/// A short stable fingerprint of `s` (FNV-1a, 32 bits, hex): keeps two long or unusual names
/// that shorten to the same text apart in the object names and label values derived from them.
fn fingerprint(s: &str) -> String {
    let h = s.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("{h:08x}")
}

/// A part of an object name derived from arbitrary text (an EKS cluster name such as
/// `eksns_ek1-control-plane`, up to 100 characters with `_` and capitals): lower-cased, every
/// character outside `[a-z0-9-]` made `-`, at most `max` characters, starting and ending with
/// an alphanumeric, so that `prefix-<part>-suffix` is a DNS-1123 subdomain (and label). When
/// anything was changed or cut, a fingerprint of the original is appended (within `max`), so
/// different names never collide. `max` must leave room for it (at least 10).
pub fn dns_name_part(text: &str, max: usize) -> String {
    let mapped: String = text
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .collect();
    let trim = |s: &str| s.trim_matches('-').to_string();
    let clean = trim(&mapped);
    if clean == text && !clean.is_empty() && clean.len() <= max {
        return clean;
    }
    let fp = fingerprint(text);
    let room = max.saturating_sub(fp.len() + 1);
    let head = trim(&clean.chars().take(room).collect::<String>());
    if head.is_empty() {
        fp
    } else {
        format!("{head}-{fp}")
    }
}

/// A label value derived from arbitrary text: the text itself when it is a valid label value
/// (at most 63 characters of `[A-Za-z0-9._-]`, alphanumeric at both ends), else a cleaned,
/// shortened form with a fingerprint of the original, as [`dns_name_part`].
pub fn label_value(text: &str) -> String {
    let valid = text.len() <= 63
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && text
            .chars()
            .next()
            .is_none_or(|c| c.is_ascii_alphanumeric())
        && text
            .chars()
            .last()
            .is_none_or(|c| c.is_ascii_alphanumeric());
    if valid {
        text.to_string()
    } else {
        dns_name_part(text, 63)
    }
}

/// A uid as the graph keys it: canonical UUIDs parsed, anything else hashed (text kept).
pub fn uid_key(text: &str) -> (Uid, Option<String>) {
    match Uid::parse_uuid(text) {
        Some(u) => (u, None),
        None => (Uid::hash_of(text), Some(text.to_string())),
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MetaError {
    #[error("object {name:?} has no metadata.uid")]
    NoUid { name: String },
    #[error("object {name:?} has an owner reference with an empty {field}")]
    BadOwnerRef { name: String, field: &'static str },
}

/// Reduces `meta` to what the graph needs. An owner reference missing its uid, kind, apiVersion
/// or name is dropped with an error reported for the object (it can never be resolved); the
/// object itself is still tracked with its valid references.
pub fn lite(meta: &ObjectMeta) -> Result<(MetaLite, Vec<MetaError>), MetaError> {
    let name = meta.name.clone().unwrap_or_default();
    let uid_text = meta
        .uid
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| MetaError::NoUid { name: name.clone() })?;
    let (uid, odd_uid) = uid_key(uid_text);
    let mut flags = 0;
    if meta.deletion_timestamp.is_some() {
        flags |= flag::DELETING;
    }
    for f in meta.finalizers.iter().flatten() {
        flags |= match f.as_str() {
            FINALIZER_FOREGROUND => flag::FOREGROUND,
            FINALIZER_ORPHAN => flag::ORPHAN,
            FINALIZER_CASCADE_COMPLETE => flag::CASCADE_COMPLETE,
            _ => 0,
        };
    }
    let mut problems = Vec::new();
    let mut owners = Vec::new();
    for r in meta.owner_references.iter().flatten() {
        let missing = [
            ("uid", r.uid.is_empty()),
            ("kind", r.kind.is_empty()),
            ("apiVersion", r.api_version.is_empty()),
            ("name", r.name.is_empty()),
        ]
        .into_iter()
        .find(|(_, empty)| *empty);
        if let Some((field, _)) = missing {
            problems.push(MetaError::BadOwnerRef {
                name: name.clone(),
                field,
            });
            continue;
        }
        owners.push(OwnerRefLite {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            uid: uid_key(&r.uid).0,
            controller: r.controller.unwrap_or(false),
            block_owner_deletion: r.block_owner_deletion.unwrap_or(false),
        });
    }
    let resource_version = meta
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Ok((
        MetaLite {
            uid,
            odd_uid,
            name,
            namespace: meta.namespace.clone().filter(|n| !n.is_empty()),
            resource_version,
            flags,
            owners,
        },
        problems,
    ))
}

/// A DNS-1123 label (what the API server accepts as a namespace's name): lower-case
/// alphanumerics and '-', alphanumeric at both ends, at most 63.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    #[test]
    fn names_derived_from_any_eks_name_are_valid_and_distinct() {
        assert_eq!(
            dns_name_part("c1", 30),
            "c1",
            "a valid name is kept as it is"
        );
        let eks = dns_name_part("eksns_ek1-control-plane", 30);
        assert!(is_dns_label(&eks), "{eks}");
        assert!(eks.starts_with("eksns-ek1"), "{eks}");
        assert_ne!(eks, dns_name_part("eksns-ek1-control-plane", 30));
        let long_a = format!("{}a", "x_".repeat(126));
        let long_b = format!("{}b", "x_".repeat(126));
        assert_eq!(long_a.len(), 253);
        for (text, max) in [
            (long_a.as_str(), 30),
            ("_", 30),
            ("__--..", 12),
            ("Eks_Cluster", 30),
            ("ünïcode", 30),
        ] {
            let part = dns_name_part(text, max);
            assert!(
                is_dns_label(&part) && part.len() <= max,
                "{text:?} -> {part:?}"
            );
        }
        assert_ne!(dns_name_part(&long_a, 30), dns_name_part(&long_b, 30));
    }

    #[test]
    fn label_values_keep_valid_text_and_repair_the_rest() {
        assert_eq!(
            label_value("eksns_ek1-control-plane"),
            "eksns_ek1-control-plane"
        );
        let long = "y".repeat(253);
        let v = label_value(&long);
        assert!(v.len() <= 63 && is_dns_label(&v), "{v}");
        assert_ne!(v, label_value(&"y".repeat(252)));
        assert!(is_dns_label(&label_value("_x_")));
    }

    #[test]
    fn a_delete_took_effect_when_the_name_is_empty_reused_or_terminating() {
        let live = ObjectMeta {
            uid: Some("u1".into()),
            ..Default::default()
        };
        assert!(!deleted_or_deleting(Some(&live), "u1"), "still there");
        assert!(deleted_or_deleting(None, "u1"), "gone");
        assert!(deleted_or_deleting(Some(&live), "u0"), "the name re-used");
        let terminating = ObjectMeta {
            deletion_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            )),
            ..live
        };
        assert!(
            deleted_or_deleting(Some(&terminating), "u1"),
            "being deleted"
        );
    }

    fn owner(uid: &str, kind: &str) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: kind.into(),
            name: "o".into(),
            uid: uid.into(),
            block_owner_deletion: Some(true),
            controller: None,
        }
    }

    #[test]
    fn reads_flags_owners_and_version() {
        let meta = ObjectMeta {
            name: Some("a".into()),
            namespace: Some("ns".into()),
            uid: Some("0a1b2c3d-4e5f-4061-8a9b-0c1d2e3f4a5b".into()),
            resource_version: Some("42".into()),
            finalizers: Some(vec!["foregroundDeletion".into(), "example.com/x".into()]),
            owner_references: Some(vec![owner(
                "11111111-2222-4333-8444-555555555555",
                "ConfigMap",
            )]),
            ..Default::default()
        };
        let (m, problems) = lite(&meta).unwrap();
        assert!(problems.is_empty());
        assert_eq!(m.resource_version, 42);
        assert_eq!(m.flags, flag::FOREGROUND);
        assert_eq!(m.owners.len(), 1);
        assert!(m.owners[0].block_owner_deletion);
        assert!(m.odd_uid.is_none());
    }

    #[test]
    fn malformed_owner_reference_is_reported_and_skipped_not_fatal() {
        let meta = ObjectMeta {
            name: Some("a".into()),
            uid: Some("not-a-uuid".into()),
            owner_references: Some(vec![owner("", "ConfigMap"), owner("u2", "")]),
            ..Default::default()
        };
        let (m, problems) = lite(&meta).unwrap();
        assert!(m.owners.is_empty());
        assert_eq!(problems.len(), 2);
        assert_eq!(m.odd_uid.as_deref(), Some("not-a-uuid"));
    }

    #[test]
    fn object_without_uid_is_an_error() {
        assert!(matches!(
            lite(&ObjectMeta::default()),
            Err(MetaError::NoUid { .. })
        ));
    }
}
