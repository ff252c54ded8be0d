//! Writing sweeper's condition onto a CAPA object without disturbing CAPA's own conditions:
//! read the status as JSON, replace only our condition type, write back guarded by
//! resourceVersion (a JSON merge patch replaces lists whole, so a blind patch would drop CAPA's).
//!
//! The condition follows Cluster API's v1beta1 Condition schema, which CAPA's CRDs enforce (the
//! server answers 422 to anything else, so a write breaking it would fail on every retry and
//! hold the finalizer forever): `type`, `status`, `lastTransitionTime` always; `severity` only
//! when the status is False (a string, never null or empty); `reason` and `message` non-empty.

use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value, json};

pub const CONDITION: &str = "ExternalResourcesDeleted";

/// Cluster API's condition severities (set only while the condition is False).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Something an operator must fix (bad configuration, a failing delete).
    Error,
    /// Not fixable by waiting alone, but not blocking either.
    Warning,
    /// Work in progress.
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "Error",
            Severity::Warning => "Warning",
            Severity::Info => "Info",
        }
    }
}

/// What sweeper wants its condition to say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desired<'a> {
    /// True: every AWS resource is deleted. False: not yet, `severity` says why.
    pub done: bool,
    pub severity: Severity,
    pub reason: &'a str,
    pub message: &'a str,
}

impl<'a> Desired<'a> {
    pub fn done(reason: &'a str, message: &'a str) -> Self {
        Desired {
            done: true,
            severity: Severity::Info,
            reason,
            message,
        }
    }
    pub fn not_done(severity: Severity, reason: &'a str, message: &'a str) -> Self {
        Desired {
            done: false,
            severity,
            reason,
            message,
        }
    }
}

/// `message` is at most this long in the schema (CAPI: maxLength 10240); longer is cut.
const MAX_MESSAGE: usize = 10240;
/// `reason` is at most this long in the schema (CAPI: maxLength 256).
const MAX_REASON: usize = 256;

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The conditions list with ours set to `want`, or None when ours already says the same (so a
/// requeue loop neither rewrites the status nor repeats its Event). Pure: `now` is the time
/// stamped when the status changes. Other conditions are returned untouched, in order.
pub fn render(existing: &[Value], want: Desired<'_>, now: &str) -> Option<Vec<Value>> {
    let status = if want.done { "True" } else { "False" };
    // The schema requires non-empty reason and message: an empty one from a caller is a bug,
    // but the write must still succeed, so it gets a default that says what the status means.
    let reason = match want.reason.trim() {
        "" if want.done => "Deleted",
        "" => "Deleting",
        r => r,
    };
    let message = match want.message.trim() {
        "" if want.done => "all AWS resources of the cluster are deleted",
        "" => "AWS teardown in progress",
        m => m,
    };
    let mut ours = Map::new();
    ours.insert("type".into(), json!(CONDITION));
    ours.insert("status".into(), json!(status));
    if !want.done {
        ours.insert("severity".into(), json!(want.severity.as_str()));
    }
    ours.insert("reason".into(), json!(truncate(reason, MAX_REASON)));
    ours.insert("message".into(), json!(truncate(message, MAX_MESSAGE)));
    let position = existing.iter().position(|c| c["type"] == CONDITION);
    let previous = position.map(|i| &existing[i]);
    let since = previous
        .filter(|c| c["status"] == status)
        .and_then(|c| c["lastTransitionTime"].as_str())
        .filter(|t| !t.is_empty())
        .unwrap_or(now);
    ours.insert("lastTransitionTime".into(), json!(since));
    let ours = Value::Object(ours);
    if previous == Some(&ours) {
        return None;
    }
    let mut conditions = existing.to_vec();
    match position {
        Some(i) => conditions[i] = ours,
        None => conditions.push(ours),
    }
    Some(conditions)
}

/// Sets our condition on `name`; false when it already said the same (nothing written).
pub async fn set(
    api: &Api<DynamicObject>,
    name: &str,
    want: Desired<'_>,
) -> Result<bool, kube::Error> {
    let obj = api.get(name).await?;
    let existing = obj.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let Some(conditions) = render(&existing, want, &now) else {
        return Ok(false);
    };
    let patch = json!({
        "metadata": {"resourceVersion": obj.metadata.resource_version},
        "status": {"conditions": conditions},
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2026-01-01T00:00:00Z";
    const T1: &str = "2026-01-02T00:00:00Z";

    /// The rules of Cluster API's v1beta1 Condition schema as CAPA's CRDs state them.
    fn assert_schema_valid(c: &Value) {
        let obj = c.as_object().expect("a condition is an object");
        for required in ["type", "status", "lastTransitionTime"] {
            assert!(
                obj.get(required).and_then(Value::as_str).is_some(),
                "{required} missing in {c}"
            );
        }
        for non_empty in ["type", "reason", "message"] {
            if let Some(v) = obj.get(non_empty) {
                let s = v
                    .as_str()
                    .unwrap_or_else(|| panic!("{non_empty} not a string: {c}"));
                assert!(!s.is_empty(), "{non_empty} empty in {c}");
            }
        }
        assert!(obj["reason"].as_str().unwrap().len() <= MAX_REASON);
        assert!(obj["message"].as_str().unwrap().len() <= MAX_MESSAGE);
        match obj.get("severity") {
            None => assert_ne!(obj["status"], "False", "False needs a severity: {c}"),
            Some(s) => {
                assert_eq!(obj["status"], "False", "severity only when False: {c}");
                let s = s
                    .as_str()
                    .unwrap_or_else(|| panic!("severity not a string: {c}"));
                assert!(["Error", "Warning", "Info"].contains(&s), "{c}");
            }
        }
        assert!(
            obj["lastTransitionTime"]
                .as_str()
                .unwrap()
                .parse::<k8s_openapi::jiff::Timestamp>()
                .is_ok(),
            "date-time: {c}"
        );
    }

    fn ours(list: &[Value]) -> &Value {
        list.iter().find(|c| c["type"] == CONDITION).unwrap()
    }

    fn capa_conditions() -> Vec<Value> {
        vec![
            json!({"type": "Ready", "status": "False", "severity": "Info", "reason": "Deleting", "lastTransitionTime": T0}),
            json!({"type": "VpcReady", "status": "True", "lastTransitionTime": T0}),
        ]
    }

    #[test]
    fn true_has_no_severity_key_at_all() {
        let out = render(&[], Desired::done("Deleted", "all gone"), T0).unwrap();
        let c = ours(&out);
        assert_schema_valid(c);
        assert!(c.get("severity").is_none(), "{c}");
        assert_eq!(c["status"], "True");
    }

    #[test]
    fn false_has_a_string_severity() {
        for sev in [Severity::Error, Severity::Warning, Severity::Info] {
            let out = render(&[], Desired::not_done(sev, "Deleting", "in progress"), T0).unwrap();
            let c = ours(&out);
            assert_schema_valid(c);
            assert_eq!(c["severity"], sev.as_str());
        }
    }

    #[test]
    fn from_false_to_true_drops_the_severity() {
        let blocked = render(
            &capa_conditions(),
            Desired::not_done(Severity::Error, "DeletionFailed", "x"),
            T0,
        )
        .unwrap();
        let done = render(&blocked, Desired::done("Deleted", "gone"), T1).unwrap();
        let c = ours(&done);
        assert_schema_valid(c);
        assert!(c.get("severity").is_none());
        assert_eq!(c["lastTransitionTime"], T1, "the status changed");
    }

    #[test]
    fn empty_reason_and_message_get_meaningful_defaults() {
        for want in [
            Desired::done("", ""),
            Desired::not_done(Severity::Info, " ", ""),
        ] {
            let out = render(&[], want, T0).unwrap();
            let c = ours(&out);
            assert_schema_valid(c);
            assert!(c["message"].as_str().unwrap().contains("AWS"), "{c}");
        }
    }

    #[test]
    fn overlong_fields_are_cut_to_the_schema_limits() {
        let long = "é".repeat(MAX_MESSAGE);
        let out = render(&[], Desired::not_done(Severity::Error, &long, &long), T0).unwrap();
        assert_schema_valid(ours(&out));
    }

    #[test]
    fn transition_time_is_kept_while_the_status_stays() {
        let first = render(&[], Desired::not_done(Severity::Info, "Deleting", "a"), T0).unwrap();
        let second = render(
            &first,
            Desired::not_done(Severity::Error, "DeletionFailed", "b"),
            T1,
        )
        .unwrap();
        assert_eq!(ours(&second)["lastTransitionTime"], T0);
        assert_eq!(ours(&second)["reason"], "DeletionFailed");
    }

    #[test]
    fn same_condition_is_no_write() {
        let first = render(&[], Desired::not_done(Severity::Info, "Deleting", "a"), T0).unwrap();
        assert_eq!(
            render(
                &first,
                Desired::not_done(Severity::Info, "Deleting", "a"),
                T1
            ),
            None
        );
        // A changed severity alone is a change.
        assert!(
            render(
                &first,
                Desired::not_done(Severity::Error, "Deleting", "a"),
                T1
            )
            .is_some()
        );
    }

    #[test]
    fn capa_conditions_stay_untouched_and_in_order() {
        let capa = capa_conditions();
        let out = render(&capa, Desired::done("Deleted", "gone"), T1).unwrap();
        assert_eq!(&out[..2], &capa[..]);
        assert_eq!(out.len(), 3);
        // Ours in place, not appended again.
        let again = render(&out, Desired::not_done(Severity::Info, "Deleting", "x"), T1).unwrap();
        assert_eq!(again.len(), 3);
        assert_eq!(&again[..2], &capa[..]);
    }

    #[test]
    fn an_old_invalid_condition_of_ours_is_rewritten_valid() {
        // What an earlier sweeper wrote: severity "" on True (or null).
        let old = vec![
            json!({"type": CONDITION, "status": "True", "severity": null,
            "reason": "Deleted", "message": "gone", "lastTransitionTime": T0}),
        ];
        let out = render(&old, Desired::done("Deleted", "gone"), T1).unwrap();
        assert_schema_valid(ours(&out));
        assert_eq!(ours(&out)["lastTransitionTime"], T0);
    }
}
