//! The release workflow (.github/workflows/release.yml) cannot run here; this checks what can be
//! checked without GitHub: it is valid YAML of the workflow's shape, runs on version tags, builds
//! the image `make image` builds for amd64 and arm64, static Linux CLI binaries named for krew as
//! well, and pushes the chart as an OCI artifact; every action is pinned to a major version; and
//! the krew manifest installs the binary the workflow packages.

use serde_yaml::Value;
use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn steps_text(job: &Value) -> String {
    serde_yaml::to_string(&job["steps"]).expect("yaml")
}

#[test]
fn the_release_workflow_builds_every_artifact_on_a_tag() {
    let wf: Value = serde_yaml::from_str(&read(".github/workflows/release.yml")).expect("YAML");
    let tags = &wf["on"]["push"]["tags"];
    assert_eq!(
        tags,
        &serde_yaml::from_str::<Value>("[\"v*\"]").unwrap(),
        "on: push: tags"
    );
    let jobs = wf["jobs"].as_mapping().expect("jobs");
    for (name, job) in jobs {
        let name = name.as_str().expect("job name");
        assert!(job["runs-on"].is_string(), "{name}: runs-on");
        let steps = job["steps"].as_sequence().expect("steps");
        assert!(!steps.is_empty(), "{name}: steps");
        for step in steps {
            match (step.get("uses"), step.get("run")) {
                (Some(uses), None) => {
                    let uses = uses.as_str().expect("uses");
                    let (action, version) = uses.split_once('@').expect("action@version");
                    assert!(
                        action.contains('/')
                            && version.starts_with(|c: char| c == 'v' || c.is_ascii_digit()),
                        "{name}: {uses} is pinned to a released version"
                    );
                }
                (None, Some(run)) => assert!(run.is_string(), "{name}: run is a script"),
                _ => panic!("{name}: a step has exactly one of uses or run: {step:?}"),
            }
        }
    }
    let image = steps_text(&wf["jobs"]["image"]);
    for want in ["linux/amd64,linux/arm64", "file: Dockerfile", "push: true"] {
        assert!(image.contains(want), "the image job: {want}");
    }
    let cli = &wf["jobs"]["cli"];
    let targets: Vec<&str> = cli["strategy"]["matrix"]["include"]
        .as_sequence()
        .expect("matrix")
        .iter()
        .map(|t| t["target"].as_str().expect("target"))
        .collect();
    for want in ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"] {
        assert!(
            targets.contains(&want),
            "static binary for {want}: {targets:?}"
        );
    }
    let cli = steps_text(cli);
    assert!(
        cli.contains("kubectl-sweeper"),
        "the CLI ships as a kubectl plugin too"
    );
    let chart = steps_text(&wf["jobs"]["chart"]);
    for want in ["helm package deploy/helm/sweeper", "helm push", "$CHARTS"] {
        assert!(chart.contains(want), "the chart job: {want}");
    }
    assert!(
        wf["env"]["CHARTS"]
            .as_str()
            .is_some_and(|c| c.starts_with("oci://")),
        "the chart is an OCI artifact"
    );
    // The chart job rewrites the image repository: the line it matches must exist.
    assert!(
        read("deploy/helm/sweeper/values.yaml").contains("\n  repository: sweeper\n"),
        "values.yaml's image.repository line the chart job rewrites"
    );
    // `make image` builds the same Dockerfile.
    let make = read("Makefile");
    assert!(make.contains("\nimage:") && make.contains("-f Dockerfile"));
}

#[test]
fn the_krew_manifest_installs_the_packaged_plugin() {
    let text = read(".krew.yaml");
    // krew-release-bot's template lines are not YAML until rendered: check them as text.
    let platforms: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("addURIAndSha"))
        .collect();
    assert_eq!(platforms.len(), 4, "linux and darwin, amd64 and arm64");
    for l in platforms {
        assert!(
            l.contains("sweeper_{{ .TagName }}_"),
            "{l}: the workflow's archive name"
        );
    }
    let bins = text
        .lines()
        .filter(|l| l.trim() == "bin: kubectl-sweeper")
        .count();
    assert_eq!(bins, 4, "every platform runs kubectl-sweeper");
    assert!(text.contains("name: sweeper"), "kubectl sweeper …");
}
