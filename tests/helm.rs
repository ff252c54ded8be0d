//! deploy/helm/sweeper renders what deploy/manifests' overlays ship (its defaults: external-only;
//! with the cascade and tenant gates on: full), its values reach the Deployment, and what it
//! renders is valid against a real API server (server-side dry-run create).
//!
//! The renderer is the real helm (tests/support/chart.rs: scripts/provision-helm.sh builds it from
//! helm.sh/helm/v3 at the version scripts/go/helm pins), and `helm lint` must pass on the chart.
//!
//! Chart vs manifests, the rule: render with release `sweeper` in namespace `sweeper-system`; every
//! object of the overlay (`kubectl kustomize`) but the Namespace and the AWS settings of
//! deploy/manifests/aws (the ConfigMap `sweeper-aws-<hash>` and the Deployment's `envFrom` of it:
//! the chart sets the same through its `aws.*` values) must come out equal as JSON, and nothing
//! else may come out, except for two documented additions of the chart:
//! - Helm's standard labels (`helm.sh/chart`, `app.kubernetes.io/{name,instance,version,managed-by}`)
//!   in any label map or selector, when the manifest's map lacks that key. A key the manifest has
//!   is compared like any field.
//! - container env vars the manifest does not set, when each is a `sweeper run` flag's variable
//!   and its value is that flag's default: the chart spells out sweeper's defaults as values, the
//!   manifest leaves them implicit. Different values, or a variable sweeper does not read, fail.

mod support;

use clap::CommandFactory;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::chart::{render, try_render, yaml_docs};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const CHART: &str = support::chart::CHART;

/// Label keys the chart's helpers add to every object (`sweeper.labels`, `sweeper.selectorLabels`).
const HELM_LABELS: [&str; 5] = [
    "helm.sh/chart",
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
];

/// `helm lint --strict` passes on the chart as it ships, and with every collector on.
#[test]
fn helm_lint_passes() {
    for args in [
        &[][..],
        &[
            "--set",
            "featureGates.CascadeGC=true",
            "--set",
            "featureGates.TenantGC=true",
        ][..],
    ] {
        let out = std::process::Command::new(support::chart::helm())
            .args(["lint", "--strict", support::chart::CHART])
            .args(args)
            .output()
            .expect("run helm lint");
        assert!(
            out.status.success(),
            "helm lint {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// An overlay's objects as the chart must render them: without the Namespace (Helm's
/// `--create-namespace`) and the AWS settings of deploy/manifests/aws.
fn manifests(overlay: &str) -> Vec<Value> {
    support::kustomize::render(overlay)
        .into_iter()
        .filter(|m| str_at(m, "/kind") != "Namespace" && !support::kustomize::is_aws_settings(m))
        .map(|mut m| {
            if let Some(Value::Object(c)) = m.pointer_mut("/spec/template/spec/containers/0") {
                c.remove("envFrom");
            }
            m
        })
        .collect()
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// "Kind name" (namespace aside: the chart puts everything in the release namespace).
fn id(v: &Value) -> String {
    format!("{} {}", str_at(v, "/kind"), str_at(v, "/metadata/name"))
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| str_at(o, "/kind") == kind && str_at(o, "/metadata/name") == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

/// `sweeper run`'s environment variables and their defaults, from the CLI definition itself.
fn run_flag_defaults() -> BTreeMap<String, String> {
    let cli = sweeper::cli::Cli::command();
    let run = cli.find_subcommand("run").expect("a run subcommand");
    cli.get_arguments()
        .filter(|a| a.is_global_set())
        .chain(run.get_arguments())
        .filter_map(|a| {
            let env = a.get_env()?.to_string_lossy().into_owned();
            let default = a
                .get_default_values()
                .iter()
                .map(|d| d.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(",");
            Some((env, default))
        })
        .collect()
}

/// Container env as name -> entry (value or valueFrom), for the first container.
fn env_of(deployment: &Value) -> BTreeMap<String, Value> {
    deployment
        .pointer("/spec/template/spec/containers/0/env")
        .and_then(Value::as_array)
        .expect("the container has env")
        .iter()
        .map(|e| (str_at(e, "/name").to_string(), e.clone()))
        .collect()
}

/// Applies the rule of the module doc to a rendered object, against its manifest; env additions
/// that break it are reported in `problems`.
fn normalize(rendered: &mut Value, manifest: &Value, problems: &mut Vec<String>) {
    for pointer in [
        "/metadata/labels",
        "/spec/selector/matchLabels",
        "/spec/template/metadata/labels",
        "/spec/selector",
        "/spec/template/spec/topologySpreadConstraints/0/labelSelector/matchLabels",
        "/spec/podSelector/matchLabels",
    ] {
        let Some(Value::Object(labels)) = rendered.pointer_mut(pointer) else {
            continue;
        };
        let theirs = manifest.pointer(pointer).and_then(Value::as_object);
        labels.retain(|k, _| {
            !HELM_LABELS.contains(&k.as_str()) || theirs.is_some_and(|m| m.contains_key(k))
        });
        if labels.is_empty() && theirs.is_none() {
            let (parent, field) = pointer.rsplit_once('/').expect("a field");
            if let Some(Value::Object(p)) = rendered.pointer_mut(parent) {
                p.remove(field);
            }
        }
    }
    let defaults = run_flag_defaults();
    let containers = manifest
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, container) in containers.iter().enumerate() {
        let wanted: Vec<&str> = container
            .pointer("/env")
            .and_then(Value::as_array)
            .map(|env| env.iter().map(|e| str_at(e, "/name")).collect())
            .unwrap_or_default();
        let Some(Value::Array(env)) =
            rendered.pointer_mut(&format!("/spec/template/spec/containers/{i}/env"))
        else {
            continue;
        };
        env.retain(|e| {
            let name = str_at(e, "/name");
            if wanted.contains(&name) {
                return true;
            }
            match defaults.get(name) {
                Some(default) if e.get("value") == Some(&json!(default)) => {}
                Some(default) => problems.push(format!(
                    "env {name}: the chart sets {}, the manifest leaves sweeper's default {default:?}",
                    e.get("value").unwrap_or(e)
                )),
                None => problems.push(format!(
                    "env {name}: set by the chart, not in the manifest, and not a `sweeper run` variable"
                )),
            }
            false
        });
    }
}

/// Every difference between two JSON values, as "path: chart X, manifest Y".
fn diff(path: &str, chart: &Value, manifest: &Value, out: &mut Vec<String>) {
    match (chart, manifest) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let null = Value::Null;
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                diff(
                    &p,
                    a.get(k).unwrap_or(&null),
                    b.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        // Lists of named entries (containers, env, ports) are matched by name, so a missing or
        // extra entry is named instead of shifting every index after it.
        (Value::Array(a), Value::Array(b)) if named(a) && named(b) => {
            let names = |l: &[Value]| l.iter().map(|e| str_at(e, "/name").to_string()).collect();
            let (na, nb): (Vec<String>, Vec<String>) = (names(a), names(b));
            for (i, n) in nb.iter().enumerate() {
                match a.iter().find(|e| str_at(e, "/name") == n) {
                    Some(x) => diff(&format!("{path}[{n}]"), x, &b[i], out),
                    None => out.push(format!("{path}[{n}]: missing in the chart")),
                }
            }
            for n in na.iter().filter(|n| !nb.contains(n)) {
                out.push(format!("{path}[{n}]: not in the manifest"));
            }
            let common = |x: &[String], y: &[String]| -> Vec<String> {
                x.iter().filter(|n| y.contains(n)).cloned().collect()
            };
            if common(&na, &nb) != common(&nb, &na) {
                out.push(format!("{path}: order: chart {na:?}, manifest {nb:?}"));
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (a, b) if a != b => out.push(format!("{path}: chart {a}, manifest {b}")),
        _ => {}
    }
}

fn named(list: &[Value]) -> bool {
    !list.is_empty()
        && list
            .iter()
            .all(|e| e.get("name").is_some_and(Value::is_string))
}

/// The chart's defaults are the external-only overlay; with the cascade and tenant gates on, the
/// full one.
#[test]
#[ignore = "provisions the chart renderer (Debian's Go and sprig) and needs kubectl on PATH: run with --run-ignored"]
fn chart_defaults_render_the_shipped_manifests() {
    for (overlay, args) in [
        ("external-only", &[][..]),
        (
            "full",
            &[
                "--set",
                "featureGates.CascadeGC=true,featureGates.TenantGC=true",
            ][..],
        ),
    ] {
        compare_with_overlay(overlay, args);
    }
}

fn hooks(v: &Value) -> Vec<&str> {
    v.pointer("/metadata/annotations/helm.sh~1hook")
        .and_then(Value::as_str)
        .map(|h| h.split(',').map(str::trim).collect())
        .unwrap_or_default()
}

fn is_test_hook(v: &Value) -> bool {
    hooks(v).contains(&"test")
}

/// `helm test` runs `sweeper check` as the Deployment's service account and with its environment,
/// so it checks the configuration the service runs with; its command parses with the real CLI;
/// `helmTest.enabled=false` leaves it out.
#[test]
fn helm_test_runs_sweeper_check_as_the_service_with_its_environment() {
    for args in [
        &[][..],
        &[
            "--set",
            "featureGates.CascadeGC=true,aws.region=eu-west-1,external.dryRun=true",
        ][..],
    ] {
        let rendered = render("sweeper", "sweeper-system", args);
        let tests: Vec<&Value> = rendered.iter().filter(|r| is_test_hook(r)).collect();
        assert_eq!(tests.len(), 1, "one helm test pod: {tests:#?}");
        let pod = tests[0];
        assert_eq!(str_at(pod, "/kind"), "Pod");
        assert_eq!(str_at(pod, "/spec/restartPolicy"), "Never");
        let deployment = rendered
            .iter()
            .find(|r| str_at(r, "/kind") == "Deployment")
            .expect("a Deployment");
        let run = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["spec"]["serviceAccountName"], run["serviceAccountName"]);
        assert_eq!(
            pod["spec"]["containers"][0]["env"], run["containers"][0]["env"],
            "the check sees the service's configuration"
        );
        assert_eq!(
            pod["spec"]["containers"][0]["image"],
            run["containers"][0]["image"]
        );
        let mut argv = vec!["sweeper".to_string()];
        argv.extend(
            pod["spec"]["containers"][0]["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string()),
        );
        assert_eq!(argv[1], "check");
        sweeper::cli::Cli::command()
            .try_get_matches_from(&argv)
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    }
    let off = render(
        "sweeper",
        "sweeper-system",
        &["--set", "helmTest.enabled=false"],
    );
    assert!(!off.iter().any(is_test_hook));
}

fn pre_delete_jobs(rendered: &[Value]) -> Vec<&Value> {
    rendered
        .iter()
        .filter(|r| hooks(r).contains(&"pre-delete"))
        .collect()
}

/// The container's args, as the `sweeper` command line they run (the image's entrypoint is
/// `sweeper`).
fn argv(pod_spec: &Value) -> Vec<String> {
    let mut argv = vec!["sweeper".to_string()];
    argv.extend(
        pod_spec["containers"][0]["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("a string arg").to_string()),
    );
    argv
}

/// `helm uninstall` first runs a pre-delete Job: `sweeper uninstall` in the release namespace as
/// the Deployment's service account, with its image and security settings; in the external-only
/// install for the external collector's kinds only (its role reads no others). Once it worked
/// Helm deletes it, a failed one stays for its log until the next attempt. Its pod is not one of
/// the Deployment's (no selector label). It is the Job of deploy/manifests/uninstall, for
/// kubectl and GitOps. `uninstallHook.enabled=false` leaves it out.
#[test]
#[ignore = "provisions the chart renderer and needs kubectl on PATH: run with --run-ignored"]
fn uninstall_hook_runs_sweeper_uninstall_as_the_service_before_helm_deletes_it() {
    for (args, collectors) in [
        (&[][..], Some("external")),
        (
            &[
                "--set",
                "featureGates.CascadeGC=true,featureGates.TenantGC=true",
            ][..],
            None,
        ),
    ] {
        let rendered = render("sweeper", "sweeper-system", args);
        let jobs = pre_delete_jobs(&rendered);
        assert_eq!(jobs.len(), 1, "one pre-delete hook: {jobs:#?}");
        let job = jobs[0];
        assert_eq!(str_at(job, "/kind"), "Job");
        let policy = str_at(job, "/metadata/annotations/helm.sh~1hook-delete-policy");
        assert!(
            policy.contains("hook-succeeded") && policy.contains("before-hook-creation"),
            "{policy}"
        );
        assert!(
            !policy.contains("hook-failed"),
            "a failed Job stays for its log"
        );
        let pod = &job["spec"]["template"]["spec"];
        let deployment = find(&rendered, "Deployment", "sweeper");
        let run = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], run["serviceAccountName"]);
        assert_eq!(pod["containers"][0]["image"], run["containers"][0]["image"]);
        assert_eq!(pod["securityContext"], run["securityContext"]);
        assert_eq!(
            pod["containers"][0]["securityContext"],
            run["containers"][0]["securityContext"]
        );
        assert_eq!(str_at(pod, "/restartPolicy"), "Never");
        let selector = deployment["spec"]["selector"]["matchLabels"]
            .as_object()
            .expect("matchLabels");
        let labels = job["spec"]["template"]["metadata"]["labels"]
            .as_object()
            .expect("pod labels");
        assert!(
            !selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
            "the Job's pod is not selected as a replica: {labels:?}"
        );
        let argv = argv(pod);
        let m = sweeper::cli::Cli::command()
            .try_get_matches_from(&argv)
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let (name, sub) = m.subcommand().expect("a subcommand");
        assert_eq!(name, "uninstall", "{argv:?}");
        assert_eq!(
            sub.get_one::<String>("namespace").map(String::as_str),
            Some("sweeper-system"),
            "the pause switch of this release's namespace: {argv:?}"
        );
        assert!(!sub.get_flag("dry_run"), "{argv:?}");
        let named: Vec<&str> = sub
            .get_many::<String>("collectors")
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        assert_eq!(
            named,
            collectors.into_iter().collect::<Vec<_>>(),
            "{argv:?}"
        );
    }

    // deploy/manifests/uninstall is the same Job, for kubectl and GitOps.
    let rendered = render("sweeper", "sweeper-system", &[]);
    let mut job = pre_delete_jobs(&rendered)[0].clone();
    job["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("annotations");
    let shipped = support::kustomize::render("uninstall");
    assert_eq!(
        shipped.len(),
        1,
        "deploy/manifests/uninstall is the Job alone"
    );
    let mut problems = Vec::new();
    normalize(&mut job, &shipped[0], &mut problems);
    diff("", &job, &shipped[0], &mut problems);
    assert!(
        problems.is_empty(),
        "the chart's pre-delete Job and deploy/manifests/uninstall differ (change both together):\n  {}",
        problems.join("\n  ")
    );

    let off = render(
        "sweeper",
        "sweeper-system",
        &["--set", "uninstallHook.enabled=false"],
    );
    assert!(pre_delete_jobs(&off).is_empty());
}

/// An install pulls: the chart (its defaults, as the release packages it: appVersion is
/// Cargo.toml's version) and every kustomization a user applies run the release image of
/// deploy/release.env, registry included; and the chart refuses an image.repository without a
/// registry (a bare `sweeper` resolves on Docker Hub, where nothing is published).
#[test]
#[ignore = "provisions the chart renderer and needs kubectl on PATH: run with --run-ignored"]
fn chart_and_overlays_run_the_release_image_with_its_registry() {
    let want = support::release::image();
    assert!(support::release::names_a_registry(&want), "{want}");
    let chart: Value = serde_yaml::from_str::<serde_yaml::Value>(
        &std::fs::read_to_string(Path::new(CHART).join("Chart.yaml")).expect("Chart.yaml"),
    )
    .map(|v| serde_json::to_value(v).expect("JSON"))
    .expect("YAML");
    assert_eq!(
        str_at(&chart, "/appVersion"),
        env!("CARGO_PKG_VERSION"),
        "the chart's appVersion is the crate's version (the release sets both from the tag)"
    );
    let rendered = render(
        "sweeper",
        "sweeper-system",
        &["--set", "featureGates.CascadeGC=true"],
    );
    let mut images = support::release::images(&rendered);
    // The archive a release publishes names the same image as the chart directory.
    images.extend(
        support::release::images(&support::chart::render_packaged(
            "sweeper",
            "sweeper-system",
            &[],
        ))
        .into_iter()
        .map(|(o, i)| (format!("packaged chart: {o}"), i)),
    );
    images.extend(support::release::images(&render(
        "sweeper",
        "sweeper-system",
        &[],
    )));
    for kustomization in support::kustomize::APPLIED {
        images.extend(
            support::release::images(&support::kustomize::render(kustomization))
                .into_iter()
                .map(|(o, i)| (format!("{kustomization}: {o}"), i)),
        );
    }
    assert!(images.len() >= 8, "{images:?}");
    for (object, image) in &images {
        assert_eq!(image, &want, "{object}");
    }

    for bare in ["sweeper", "library/sweeper", "my-org/sweeper"] {
        let err = try_render(
            "sweeper",
            "sweeper-system",
            &["--set", &format!("image.repository={bare}")],
        )
        .expect_err(bare);
        assert!(err.contains("names no registry"), "{bare}: {err}");
    }
    for ok in [
        "localhost:5000/sweeper",
        "registry.example.com/team/sweeper",
    ] {
        let objects = render(
            "sweeper",
            "sweeper-system",
            &["--set", &format!("image.repository={ok},image.tag=dev")],
        );
        for (object, image) in support::release::images(&objects) {
            assert_eq!(image, format!("{ok}:dev"), "{object}");
        }
    }
}

fn compare_with_overlay(overlay: &str, args: &[&str]) {
    let rendered = render("sweeper", "sweeper-system", args);
    let shipped = manifests(overlay);
    let mut problems = Vec::new();
    for m in &shipped {
        let Some(r) = rendered.iter().find(|r| id(r) == id(m)) else {
            problems.push(format!(
                "{}: in deploy/manifests, not rendered by the chart",
                id(m)
            ));
            continue;
        };
        let mut r = r.clone();
        let mut found = Vec::new();
        normalize(&mut r, m, &mut found);
        diff("", &r, m, &mut found);
        problems.extend(found.into_iter().map(|p| format!("{}: {p}", id(m))));
    }
    for r in &rendered {
        // Hooks are the chart's own (tested below): `helm test`, which plain manifests lack, and
        // the pre-delete uninstall Job, which is deploy/manifests/uninstall on its own.
        if !hooks(r).is_empty() {
            continue;
        }
        if !shipped.iter().any(|m| id(m) == id(r)) {
            problems.push(format!(
                "{}: rendered by the chart, not in deploy/manifests",
                id(r)
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "deploy/helm/sweeper {args:?} and deploy/manifests/{overlay} differ (change both together):\n  {}",
        problems.join("\n  ")
    );
    assert!(
        shipped.len() >= 7,
        "{overlay}: service account, 2 cluster RBAC, 2 leader-election RBAC, deployment, service: {}",
        shipped.len()
    );
}

/// With CascadeGC and TenantGC off (the defaults), the chart grants the narrow role of
/// deploy/manifests/external-only (same rules; names follow the release), the Secrets Role in
/// `external.capaNamespace` only, and nothing cluster-wide with a wildcard.
#[test]
#[ignore = "provisions the chart renderer (Debian's Go and sprig): run with --run-ignored"]
fn external_only_chart_renders_the_least_privilege_role() {
    let rendered = render(
        "sweeper",
        "sweeper-system",
        &["--set", "external.capaNamespace=capa-tenants"],
    );
    let text =
        std::fs::read_to_string(Path::new(ROOT).join("deploy/manifests/external-only/rbac.yaml"))
            .expect("external-only manifest");
    let shipped = yaml_docs(&text);
    let rules_of = |objs: &[Value], kind: &str, suffix: &str| -> Value {
        objs.iter()
            .find(|o| {
                let name = str_at(o, "/metadata/name");
                // The reader role (deploy/manifests/base) is not the service account's.
                str_at(o, "/kind") == kind
                    && name.ends_with(suffix)
                    && (suffix.contains("metrics-reader") || !name.ends_with("metrics-reader"))
            })
            .unwrap_or_else(|| panic!("no {kind} *{suffix}"))["rules"]
            .clone()
    };
    for (kind, suffix) in [
        ("ClusterRole", ""),
        ("Role", "identity-secrets"),
        ("Role", "configmaps"),
        ("Role", "leader-election"),
    ] {
        assert_eq!(
            rules_of(&rendered, kind, suffix),
            rules_of(&shipped, kind, suffix),
            "{kind} *{suffix}: the chart and deploy/manifests/external-only differ"
        );
    }
    let secrets_role = rendered
        .iter()
        .find(|o| {
            str_at(o, "/kind") == "Role"
                && str_at(o, "/metadata/name").ends_with("identity-secrets")
        })
        .expect("secrets role");
    assert_eq!(str_at(secrets_role, "/metadata/namespace"), "capa-tenants");
    let wide = rules_of(&rendered, "ClusterRole", "");
    assert!(
        !wide.to_string().contains("\"*\""),
        "no wildcard in the external-only ClusterRole: {wide}"
    );
    assert!(
        !wide.to_string().contains("secrets"),
        "no Secrets cluster-wide: {wide}"
    );
    assert!(
        !wide.to_string().contains("configmaps"),
        "no ConfigMaps cluster-wide (audit records and the pause switch: sweeper's namespace): {wide}"
    );
    let configmaps = rendered
        .iter()
        .find(|o| {
            str_at(o, "/kind") == "Role" && str_at(o, "/metadata/name").ends_with("configmaps")
        })
        .expect("configmaps role");
    assert_eq!(str_at(configmaps, "/metadata/namespace"), "sweeper-system");
}

/// The chart installs the CRDs of CAPA, Cluster API and KubeZoo only when asked, per group
/// (`crds.capa`, `crds.clusterAPI`, `crds.kubezoo`, all false): on a management cluster they are
/// the upstream projects'. Each group's template is that group's CRDs of `sweeper crds` (generated from
/// the Rust types) with `helm.sh/resource-policy: keep`, so `helm uninstall` never deletes a CRD
/// (and with it every object of the kind). `make crds` rewrites the templates.
const CRD_GROUPS: [(&str, &str, &[&str]); 3] = [
    (
        "capa",
        "crds-capa.yaml",
        &[
            "infrastructure.cluster.x-k8s.io",
            "controlplane.cluster.x-k8s.io",
        ],
    ),
    ("clusterAPI", "crds-cluster-api.yaml", &["cluster.x-k8s.io"]),
    ("kubezoo", "crds-kubezoo.yaml", &["tenant.kubezoo.io"]),
];

fn crd_template(value: &str, groups: &[&str]) -> String {
    let generated = sweeper::api::crds_yaml().expect("render CRDs");
    let mut out = format!(
        "{{{{- /* Generated by `make crds` from `sweeper crds`: do not edit. */ -}}}}\n\
         {{{{- if .Values.crds.{value} }}}}\n"
    );
    for mut crd in yaml_docs(&generated) {
        if !groups.contains(&str_at(&crd, "/spec/group")) {
            continue;
        }
        crd["metadata"]["annotations"] = json!({"helm.sh/resource-policy": "keep"});
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&sorted(crd)).expect("yaml"));
    }
    out.push_str("{{- end }}\n");
    out
}

/// `v` with every map's keys in order. serde_json keeps insertion order when any crate in the
/// build turns on its `preserve_order` feature (the workspace build does, `cargo test -p sweeper`
/// may not): sorting makes the template the same text whichever build renders it.
fn sorted(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let by_key: BTreeMap<String, Value> =
                m.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            Value::Object(by_key.into_iter().collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}

#[test]
fn chart_crd_templates_are_deploy_crds_per_group() {
    for (value, file, groups) in CRD_GROUPS {
        let path = Path::new(CHART).join("templates").join(file);
        let want = crd_template(value, groups);
        if std::env::var_os("UPDATE_CHART_CRDS").is_some() {
            std::fs::write(&path, &want).expect("write template");
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{}: out of date with `sweeper crds`: run `make crds`",
            path.display()
        );
    }
    assert!(
        !Path::new(CHART).join("crds").exists(),
        "no crds/ directory: Helm would install its CRDs unconditionally"
    );
}

/// Defaults install no foreign CRD; each value installs its group's, kept on uninstall.
#[test]
#[ignore = "provisions the chart renderer (Debian's Go and sprig): run with --run-ignored"]
fn chart_installs_foreign_crds_only_when_asked() {
    let crds = |objs: &[Value]| -> Vec<String> {
        objs.iter()
            .filter(|o| str_at(o, "/kind") == "CustomResourceDefinition")
            .map(|o| {
                assert_eq!(
                    str_at(o, "/metadata/annotations/helm.sh~1resource-policy"),
                    "keep",
                    "{}",
                    id(o)
                );
                str_at(o, "/metadata/name").to_string()
            })
            .collect()
    };
    let default = render("sweeper", "sweeper-system", &["--include-crds"]);
    assert!(
        crds(&default).is_empty(),
        "defaults install no CRD: {:?}",
        crds(&default)
    );
    let kubezoo = render("sweeper", "sweeper-system", &["--set", "crds.kubezoo=true"]);
    assert_eq!(crds(&kubezoo), ["tenants.tenant.kubezoo.io"]);
    let capa = render("sweeper", "sweeper-system", &["--set", "crds.capa=true"]);
    assert_eq!(
        crds(&capa),
        [
            "awsclusters.infrastructure.cluster.x-k8s.io",
            "awsmanagedcontrolplanes.controlplane.cluster.x-k8s.io"
        ]
    );
    let capi = render(
        "sweeper",
        "sweeper-system",
        &["--set", "crds.clusterAPI=true"],
    );
    assert_eq!(crds(&capi), ["clusters.cluster.x-k8s.io"]);
}

/// Installing the chart (defaults) on a management cluster that runs CAPA, Cluster API and
/// KubeZoo changes none of their CRDs: the upstream CRDs from scripts/fixtures.sh are
/// installed, every rendered object is applied (CRDs for real, the rest by server-side dry run),
/// and each upstream CRD is still the same object at the same resourceVersion. Other tests install
/// CRDs too, so `make test` runs this one alone (scripts/test.sh).
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn chart_install_over_upstream_crds_changes_none() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let client = support::kube_client().await;
    let upstream = [
        "capa/infrastructure.cluster.x-k8s.io_awsclusters.yaml",
        "capa/infrastructure.cluster.x-k8s.io_awsmanagedclusters.yaml",
        "capa/controlplane.cluster.x-k8s.io_awsmanagedcontrolplanes.yaml",
        "capa/infrastructure.cluster.x-k8s.io_awsclustercontrolleridentities.yaml",
        "capa/infrastructure.cluster.x-k8s.io_awsclusterroleidentities.yaml",
        "capa/infrastructure.cluster.x-k8s.io_awsclusterstaticidentities.yaml",
        "capi/cluster.x-k8s.io_clusters.yaml",
        "kubezoo/tenants.tenant.kubezoo.io.yaml",
    ];
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let mut names = Vec::new();
    for rel in upstream {
        support::conformance::install_crd(&client, rel).await;
        names.push(
            support::conformance::docs(rel)[0]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    // The API server updates a replaced CRD's status (names, conditions) on its own, a moment
    // after the replace: record each once its resourceVersion has stopped moving, or the chart
    // would be blamed for the server's own write.
    let mut before = Vec::new();
    for name in names {
        let mut crd = crds.get(&name).await.unwrap();
        for _ in 0..20 {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            let again = crds.get(&name).await.unwrap();
            if again.metadata.resource_version == crd.metadata.resource_version {
                break;
            }
            crd = again;
        }
        before.push((name, crd.metadata.resource_version.clone(), crd.spec));
    }
    let rendered = render("sweeper", "sweeper-system", &["--include-crds"]);
    for obj in rendered {
        if str_at(&obj, "/kind") == "CustomResourceDefinition" {
            let crd: CustomResourceDefinition = serde_json::from_value(obj).unwrap();
            support::objects::replace_crd(&client, crd).await;
        } else {
            support::objects::dry_run_create(&client, obj).await;
        }
    }
    for (name, rv, spec) in before {
        let now = crds.get(&name).await.unwrap();
        assert_eq!(now.metadata.resource_version, rv, "{name} was changed");
        assert_eq!(now.spec, spec, "{name}'s spec was changed");
    }
}

#[test]
#[ignore = "provisions the chart renderer (Debian's Go and sprig): run with --run-ignored"]
fn chart_values_reach_the_deployment_and_the_lease_role() {
    let rendered = render(
        "prod",
        "gc",
        &[
            "--set",
            "logFormat=text,aws.region=eu-west-1",
            "--set",
            "aws.endpointUrl=http://localstack:4566",
            "--set",
            "aws.credentialsSecret=aws-creds",
            "--set",
            "featureGates.TenantGC=true",
            "--set",
            "kubeApi.qps=50",
            "--set",
            "leaderElection.leaseName=other",
            "--set",
            "scan.interval=6h,scan.regions={eu-west-1,us-east-1},scan.notOurs={theirs}",
            "--set",
            r"serviceAccount.annotations.eks\.amazonaws\.com/role-arn=arn:aws:iam::123456789012:role/sweeper",
        ],
    );
    // A release not named like the chart prefixes the names.
    let deployment = find(&rendered, "Deployment", "prod-sweeper");
    let env = env_of(deployment);
    let value = |name: &str| {
        env.get(name)
            .unwrap_or_else(|| panic!("env {name} missing: {env:?}"))
            .get("value")
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(value("SWEEPER_LOG_FORMAT"), json!("text"));
    assert_eq!(
        value("SWEEPER_FEATURE_GATES"),
        json!("CascadeGC=false,TenantGC=true,ExternalResourceGC=true,AlternativeGCStrategy=false")
    );
    assert_eq!(value("SWEEPER_KUBE_API_QPS"), json!("50"));
    assert_eq!(value("SWEEPER_KUBE_API_BURST"), json!("30"));
    assert_eq!(value("SWEEPER_LEADER_ELECT_LEASE_NAME"), json!("other"));
    assert_eq!(value("SWEEPER_SCAN_INTERVAL"), json!("6h"));
    assert_eq!(value("SWEEPER_SCAN_REGIONS"), json!("eu-west-1,us-east-1"));
    assert_eq!(value("SWEEPER_SCAN_NOT_OURS"), json!("theirs"));
    assert_eq!(value("AWS_REGION"), json!("eu-west-1"));
    assert_eq!(value("AWS_ENDPOINT_URL"), json!("http://localstack:4566"));
    for (name, key) in [
        ("AWS_ACCESS_KEY_ID", "aws_access_key_id"),
        ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
    ] {
        assert_eq!(
            env[name]["valueFrom"],
            json!({"secretKeyRef": {"name": "aws-creds", "key": key}}),
            "{name}"
        );
    }
    assert_eq!(
        env["SWEEPER_LEADER_ELECT_NAMESPACE"]["valueFrom"],
        json!({"fieldRef": {"fieldPath": "metadata.namespace"}})
    );
    // Every SWEEPER_* variable the chart sets is one `sweeper run` reads.
    let flags = run_flag_defaults();
    for name in env.keys().filter(|n| n.starts_with("SWEEPER_")) {
        assert!(
            flags.contains_key(name),
            "{name} is not a `sweeper run` variable"
        );
    }

    let role = find(&rendered, "Role", "prod-sweeper-leader-election");
    assert_eq!(str_at(role, "/metadata/namespace"), "gc");
    let named: Vec<&Value> = role["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter_map(|r| r.get("resourceNames"))
        .collect();
    assert_eq!(
        named,
        vec![&json!(["other"])],
        "the Role follows the Lease name"
    );

    let sa = find(&rendered, "ServiceAccount", "prod-sweeper");
    assert_eq!(
        sa.pointer("/metadata/annotations"),
        Some(&json!({"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/sweeper"}))
    );
    assert_eq!(
        str_at(deployment, "/spec/template/spec/serviceAccountName"),
        "prod-sweeper"
    );
    let binding = find(&rendered, "ClusterRoleBinding", "prod-sweeper");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "prod-sweeper", "namespace": "gc"}])
    );
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn chart_render_passes_server_side_dry_run() {
    let client = support::kube_client().await;
    let mut checked = Vec::new();
    let renders = [
        render(
            "sweeper",
            "sweeper-system",
            &[
                "--set",
                "crds.capa=true,crds.clusterAPI=true,crds.kubezoo=true",
            ],
        ),
        render(
            "prod",
            "gc",
            &[
                "--set",
                "aws.credentialsSecret=aws-creds,aws.region=eu-west-1",
                "--set",
                "leaderElection.leaseName=other",
            ],
        ),
    ];
    for value in renders.into_iter().flatten() {
        checked.push(support::objects::dry_run_create(&client, value).await);
    }
    for kind in [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
    ] {
        assert!(
            checked.iter().any(|c| c.starts_with(&format!("{kind} "))),
            "no {kind} checked: {checked:?}"
        );
    }
}

/// Every metric family sweeper exports: a registry filled as `sweeper run` fills it. The text
/// encoding leaves out a labelled family until it has a child, so the families are read from the
/// registry's own description instead (its Debug form, of the pinned prometheus-client): each
/// registry's full prefix, then the names of its metrics.
fn exported_metrics() -> std::collections::BTreeSet<String> {
    let mut metrics = sweeper::metrics::Metrics::new();
    let _registered = sweeper::run::register_metrics(&mut metrics, Default::default());
    let described = format!("{:?}", metrics.registry_mut());
    let mut out = std::collections::BTreeSet::new();
    let mut prefix = String::new();
    let (prefix_mark, name_mark) = ("prefix: Some(Prefix(\"", "Descriptor { name: \"");
    let mut rest = described.as_str();
    loop {
        let p = rest.find(prefix_mark);
        let n = rest.find(name_mark);
        match (p, n) {
            (Some(p), n) if n.is_none_or(|n| p < n) => {
                rest = &rest[p + prefix_mark.len()..];
                prefix = rest.split('"').next().unwrap_or_default().to_string();
            }
            (_, Some(n)) => {
                rest = &rest[n + name_mark.len()..];
                let name = rest.split('"').next().unwrap_or_default();
                out.insert(format!("{prefix}_{name}"));
            }
            _ => break,
        }
    }
    out
}

/// Every `sweeper_…` metric a dashboard panel or an alert queries is one sweeper exports (with
/// the OpenMetrics suffixes: `_total` for counters, `_bucket` / `_sum` / `_count` for
/// histograms), and the dashboard and the rules are there when enabled.
#[test]
#[ignore = "provisions the chart renderer (Debian's Go and sprig): run with --run-ignored"]
fn dashboard_and_alerts_query_only_metrics_sweeper_exports() {
    let exported = exported_metrics();
    assert!(
        exported.contains("sweeper_leader_is_leader")
            && exported.contains("sweeper_external_deleted")
            && exported.contains("sweeper_archive_stored_records"),
        "the source scan finds the families: {exported:?}"
    );
    let rendered = render(
        "sweeper",
        "sweeper-system",
        &[
            "--set",
            "monitoring.dashboard.enabled=true,monitoring.prometheusRule.enabled=true",
        ],
    );
    let dashboard = rendered
        .iter()
        .find(|o| {
            str_at(o, "/kind") == "ConfigMap" && str_at(o, "/metadata/name").ends_with("-dashboard")
        })
        .expect("the dashboard ConfigMap");
    assert_eq!(str_at(dashboard, "/metadata/labels/grafana_dashboard"), "1");
    let json: Value = serde_json::from_str(str_at(dashboard, "/data/sweeper.json"))
        .expect("the dashboard is JSON");
    let mut exprs: Vec<String> = json["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect();
    let panels = exprs.len();
    let rule = rendered
        .iter()
        .find(|o| str_at(o, "/kind") == "PrometheusRule")
        .expect("the PrometheusRule");
    let alerts: Vec<String> = rule["spec"]["groups"][0]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| {
            exprs.push(r["expr"].as_str().expect("expr").to_string());
            r["alert"].as_str().expect("alert").to_string()
        })
        .collect();
    for want in [
        "SweeperTeardownStuck",
        "SweeperDeleteFailures",
        "SweeperPausedTooLong",
        "SweeperNoLeader",
        "SweeperScanStale",
    ] {
        assert!(alerts.iter().any(|a| a == want), "alert {want}: {alerts:?}");
    }
    let mut checked = 0;
    for e in &exprs {
        for token in e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if !token.starts_with("sweeper_") {
                continue;
            }
            checked += 1;
            let known = exported.contains(token)
                || ["_total", "_bucket", "_sum", "_count"].iter().any(|s| {
                    token
                        .strip_suffix(s)
                        .is_some_and(|base| exported.contains(base))
                });
            assert!(known, "{token} (in `{e}`) is not a metric sweeper exports");
        }
    }
    assert!(
        panels >= 9 && checked >= 20,
        "{panels} panel queries, {checked} metric uses"
    );
}

/// promtool from Debian's `prometheus` package (scripts/provision-promtool.sh).
fn promtool() -> PathBuf {
    let out = Command::new(Path::new(ROOT).join("scripts/provision-promtool.sh"))
        .output()
        .expect("run scripts/provision-promtool.sh");
    assert!(
        out.status.success(),
        "scripts/provision-promtool.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = String::from_utf8(out.stdout).expect("utf-8 path");
    PathBuf::from(path.lines().last().expect("promtool's path").trim())
}

/// The alerts that must judge per teardown, see a missing scrape and watch the scheduled scan,
/// evaluated by promtool on sample series: `SweeperTeardownStuck` fires for one teardown older
/// than `teardownStuckFor`, never for a steady stream of short ones; `SweeperNoLeader` fires when
/// every replica stands by and when no replica is scraped at all (`absent`), not while one leads;
/// `SweeperScanStale` fires when the last success is older than three intervals or the last scan
/// failed, never while the scan is off.
#[test]
#[ignore = "provisions the chart renderer and promtool (Debian packages): run with --run-ignored"]
fn alerts_fire_on_sample_series_under_promtool() {
    let rendered = render(
        "sweeper",
        "sweeper-system",
        &["--set", "monitoring.prometheusRule.enabled=true"],
    );
    let rule = rendered
        .iter()
        .find(|o| str_at(o, "/kind") == "PrometheusRule")
        .expect("the PrometheusRule");
    let dir = std::env::temp_dir().join(format!("sweeper-alerts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("rules.yaml"),
        serde_yaml::to_string(&json!({"groups": rule["spec"]["groups"]})).expect("yaml"),
    )
    .expect("write rules");
    let annotations = |alert: &str| -> Value {
        let r = rule["spec"]["groups"][0]["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .find(|r| r["alert"] == alert)
            .unwrap_or_else(|| panic!("alert {alert}"));
        assert!(
            !r["annotations"].to_string().contains("{{"),
            "{alert}'s annotations are plain text"
        );
        r["annotations"].clone()
    };
    let stuck = |eval: &str, fires: bool| {
        let alerts = if fires {
            json!([{"exp_labels": {"severity": "warning", "namespace": "sweeper-system", "collector": "external"},
                    "exp_annotations": annotations("SweeperTeardownStuck")}])
        } else {
            json!([])
        };
        json!({"eval_time": eval, "alertname": "SweeperTeardownStuck", "exp_alerts": alerts})
    };
    let no_leader = |eval: &str, fires: bool| {
        let alerts = if fires {
            json!([{"exp_labels": {"severity": "critical", "namespace": "sweeper-system"},
                    "exp_annotations": annotations("SweeperNoLeader")}])
        } else {
            json!([])
        };
        json!({"eval_time": eval, "alertname": "SweeperNoLeader", "exp_alerts": alerts})
    };
    let scan_stale = |eval: &str, fires: bool| {
        let alerts = if fires {
            json!([{"exp_labels": {"severity": "warning", "namespace": "sweeper-system"},
                    "exp_annotations": annotations("SweeperScanStale")}])
        } else {
            json!([])
        };
        json!({"eval_time": eval, "alertname": "SweeperScanStale", "exp_alerts": alerts})
    };
    let scan = |metric: &str, pod: &str| {
        format!("sweeper_scan_{metric}{{namespace=\"sweeper-system\",pod=\"{pod}\"}}")
    };
    let oldest = |pod: &str| {
        format!(
            "sweeper_teardown_oldest_seconds{{namespace=\"sweeper-system\",collector=\"external\",pod=\"{pod}\"}}"
        )
    };
    let leader = |pod: &str| {
        format!("sweeper_leader_is_leader{{namespace=\"sweeper-system\",pod=\"{pod}\"}}")
    };
    // A new 5-minute teardown starts as soon as the last ends, for 4 hours: always one in progress.
    let sawtooth = std::iter::repeat_n("0 60 120 180 240 300", 48)
        .collect::<Vec<_>>()
        .join(" ");
    let tests = json!({
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {"interval": "1m",
             "input_series": [{"series": oldest("a"), "values": sawtooth}],
             "alert_rule_test": [stuck("2h", false), stuck("3h50m", false)]},
            {"interval": "1m",
             "input_series": [{"series": oldest("a"), "values": "0+60x200"}],
             "alert_rule_test": [stuck("59m", false), stuck("61m", true), stuck("3h", true)]},
            {"interval": "1m",
             "input_series": [{"series": leader("a"), "values": "1x30"},
                              {"series": leader("b"), "values": "0x30"}],
             "alert_rule_test": [no_leader("20m", false)]},
            {"interval": "1m",
             "input_series": [{"series": leader("a"), "values": "0x30"},
                              {"series": leader("b"), "values": "0x30"}],
             "alert_rule_test": [no_leader("3m", false), no_leader("10m", true)]},
            // The leak scan every 10 minutes (600 s) on the leader "a", "b" standing by: a
            // success at 10m is stale after 40m; a failed scan fires at once; off, never.
            {"interval": "1m",
             "input_series": [{"series": scan("interval_seconds", "a"), "values": "600x60"},
                              {"series": scan("interval_seconds", "b"), "values": "0x60"},
                              {"series": scan("last_success_timestamp_seconds", "a"), "values": "0x9 600x50"},
                              {"series": scan("last_success_timestamp_seconds", "b"), "values": "0x60"},
                              {"series": scan("last_failed", "a"), "values": "0x60"},
                              {"series": scan("last_failed", "b"), "values": "0x60"}],
             "alert_rule_test": [scan_stale("5m", false), scan_stale("39m", false), scan_stale("41m", true)]},
            {"interval": "1m",
             "input_series": [{"series": scan("interval_seconds", "a"), "values": "600x30"},
                              {"series": scan("last_success_timestamp_seconds", "a"), "values": "0x9 600x20"},
                              {"series": scan("last_failed", "a"), "values": "0x19 1x10"}],
             "alert_rule_test": [scan_stale("15m", false), scan_stale("21m", true)]},
            {"interval": "1m",
             "input_series": [{"series": scan("interval_seconds", "a"), "values": "0x60"},
                              {"series": scan("last_success_timestamp_seconds", "a"), "values": "0x60"},
                              {"series": scan("last_failed", "a"), "values": "0x60"}],
             "alert_rule_test": [scan_stale("50m", false)]},
            // Nothing scraped at all: only absent() can see it.
            {"interval": "1m",
             "input_series": [{"series": "up{job=\"other\"}", "values": "1x30"}],
             "alert_rule_test": [no_leader("3m", false), no_leader("10m", true)]},
        ]
    });
    std::fs::write(
        dir.join("tests.yaml"),
        serde_yaml::to_string(&tests).expect("yaml"),
    )
    .expect("write tests");
    let promtool = promtool();
    for args in [
        &["check", "rules", "rules.yaml"][..],
        &["test", "rules", "tests.yaml"],
    ] {
        let out = Command::new(&promtool)
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("run promtool");
        assert!(
            out.status.success(),
            "promtool {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
