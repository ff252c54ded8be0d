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

/// A value of deploy/release.env (`KEY=value`).
fn release_env(key: &str) -> String {
    read("deploy/release.env")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
        .unwrap_or_else(|| panic!("deploy/release.env sets no {key}"))
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
    for want in [
        "helm package deploy/helm/sweeper",
        "helm push",
        "SWEEPER_CHART",
    ] {
        assert!(chart.contains(want), "the chart job: {want}");
    }
    assert!(
        release_env("SWEEPER_CHART").starts_with("oci://"),
        "the chart is an OCI artifact"
    );
    // The chart job checks that the default image is the release's: the line it matches exists.
    assert!(
        read("deploy/helm/sweeper/values.yaml").contains(&format!(
            "\n  repository: {}\n",
            release_env("SWEEPER_IMAGE")
        )),
        "values.yaml's image.repository is deploy/release.env's image"
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

/// The owner is written once, in deploy/release.env, in lower case (OCI refuses capitals), and
/// every published address derives from it: the image, the chart, the release page; the chart's
/// default image and the kustomize base's are the release image of Cargo.toml's version; no page
/// says `<owner>` or `OWNER`.
#[test]
fn every_published_address_derives_from_release_env() {
    let owner = release_env("SWEEPER_OWNER");
    assert!(
        !owner.is_empty() && owner == owner.to_lowercase(),
        "SWEEPER_OWNER {owner:?}: lower case"
    );
    assert_eq!(
        release_env("SWEEPER_IMAGE"),
        format!("ghcr.io/{owner}/sweeper")
    );
    assert_eq!(
        release_env("SWEEPER_CHART"),
        format!("oci://ghcr.io/{owner}/charts/sweeper")
    );
    let releases = release_env("SWEEPER_RELEASES");
    assert_eq!(
        releases,
        format!("https://github.com/{owner}/sweeper/releases")
    );
    let version = env!("CARGO_PKG_VERSION");
    let chart: Value = serde_yaml::from_str(&read("deploy/helm/sweeper/Chart.yaml")).unwrap();
    assert_eq!(chart["appVersion"].as_str(), Some(version));
    assert_eq!(chart["version"].as_str(), Some(version));
    let image = format!("{}:{version}", release_env("SWEEPER_IMAGE"));
    for file in [
        "deploy/manifests/base/deployment.yaml",
        "deploy/manifests/uninstall/job.yaml",
    ] {
        assert!(
            read(file).contains(&format!("image: {image}\n")),
            "{file} runs {image}"
        );
    }
    let mut checked = 0;
    for file in [
        "README.md",
        ".krew.yaml",
        "Dockerfile",
        "docs/releases.md",
        "docs/operations.md",
        "docs/capa.md",
        "deploy/helm/sweeper/README.md",
        "deploy/manifests/README.md",
        "CHANGELOG.md",
    ] {
        let text = read(file);
        for stale in ["<owner>", "OWNER/", "/OWNER"] {
            assert!(!text.contains(stale), "{file} says {stale}");
        }
        // Every ghcr.io or github.com/…/sweeper address names the owner.
        for (i, _) in text.match_indices("ghcr.io/") {
            let rest = &text[i + "ghcr.io/".len()..];
            checked += 1;
            let names_owner = rest.strip_prefix(owner.as_str()).is_some_and(|after| {
                !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-')
            });
            assert!(
                names_owner || rest.starts_with("${"),
                "{file}: ghcr.io/{}…",
                &rest[..rest.len().min(30)]
            );
        }
        for (i, _) in text.match_indices("github.com/") {
            let rest = &text[i + "github.com/".len()..];
            if rest
                .split('/')
                .nth(1)
                .is_some_and(|r| r.starts_with("sweeper"))
            {
                checked += 1;
                assert!(
                    rest.starts_with(&format!("{owner}/sweeper")),
                    "{file}: github.com/{}…",
                    &rest[..rest.len().min(30)]
                );
            }
        }
    }
    assert!(checked >= 8, "only {checked} addresses checked");
}

/// The release's test steps without its version check (which a pull request has no tag for).
fn suite_steps(wf: &Value) -> Value {
    let steps = wf["jobs"]["test"]["steps"].as_sequence().expect("steps");
    Value::Sequence(
        steps
            .iter()
            .filter(|s| s["name"].as_str() != Some("the tag is the version everywhere"))
            .cloned()
            .collect(),
    )
}

/// Tests run before anything is published, and they are the whole suite (.ci/run) on a pull
/// request and on a tag alike; one CLI platform's failure does not cancel the others; no retired
/// runner.
#[test]
fn the_release_tests_first_and_pull_requests_are_checked() {
    let wf: Value = serde_yaml::from_str(&read(".github/workflows/release.yml")).expect("YAML");
    // The release's tests are what .ci/run runs: lint and the whole suite, integration included.
    let test = steps_text(&wf["jobs"]["test"]);
    for want in [
        "bash .ci/run",
        "GITHUB_REF_NAME#v",
        "actions/cache@",
        "actions/setup-go@",
    ] {
        assert!(test.contains(want), "the test job: {want}");
    }
    let ci_run = read(".ci/run");
    for want in ["make lint", "make test"] {
        assert!(ci_run.contains(want), ".ci/run: {want}");
    }
    for job in ["image", "cli", "chart"] {
        let needs = &wf["jobs"][job]["needs"];
        let needs: Vec<&str> = match needs {
            Value::String(s) => vec![s.as_str()],
            Value::Sequence(v) => v.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        assert!(needs.contains(&"test"), "{job} needs the tests: {needs:?}");
    }
    assert_eq!(
        wf["jobs"]["cli"]["strategy"]["fail-fast"].as_bool(),
        Some(false),
        "fail-fast: false"
    );
    let text = read(".github/workflows/release.yml");
    for retired in ["macos-13", "macos-12", "ubuntu-20.04"] {
        assert!(!text.contains(retired), "{retired} is a retired runner");
    }
    assert!(
        text.contains("${SWEEPER_IMAGE,,}"),
        "the registry path is lower-cased"
    );
    let ci: Value = serde_yaml::from_str(&read(".github/workflows/ci.yml")).expect("YAML");
    assert!(
        ci["on"].get("pull_request").is_some(),
        "ci runs on pull requests"
    );
    let steps = serde_yaml::to_string(&ci["jobs"]).unwrap();
    for want in ["make lint", "make unit", "bash .ci/run"] {
        assert!(steps.contains(want), "ci: {want}");
    }
    assert_eq!(
        ci["jobs"]["suite"]["steps"],
        suite_steps(&wf),
        "a pull request runs the suite exactly as a release does"
    );
}

/// The CLI archive holds what the README extracts: the release workflow's packaging step, run
/// here on a stand-in binary, then the README's own `tar -xzf …` line in a fresh directory.
#[test]
fn the_readme_extracts_what_the_release_packages() {
    let wf: Value = serde_yaml::from_str(&read(".github/workflows/release.yml")).expect("YAML");
    let package = wf["jobs"]["cli"]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str() == Some("package"))
        .expect("a package step")["run"]
        .as_str()
        .unwrap()
        .replace("${{ matrix.target }}", "x86_64-unknown-linux-musl")
        .replace("${{ matrix.os }}", "linux")
        .replace("${{ matrix.arch }}", "amd64");
    let readme = read("README.md");
    let extract = readme
        .lines()
        .find(|l| l.starts_with("tar -xzf sweeper_"))
        .expect("the README's extract line");
    let extract = extract.split("&&").next().unwrap().trim();
    let dir = std::env::temp_dir().join(format!("sweeper-release-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let work = dir.join("work");
    std::fs::create_dir_all(work.join("target/x86_64-unknown-linux-musl/release")).unwrap();
    std::fs::write(
        work.join("target/x86_64-unknown-linux-musl/release/sweeper"),
        "#!/bin/sh\necho sweeper\n",
    )
    .unwrap();
    for f in ["README.md", "LICENSE"] {
        std::fs::copy(Path::new(ROOT).join(f), work.join(f)).unwrap();
    }
    let run = |cwd: &Path, script: &str| {
        let out = std::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(cwd)
            .env("GITHUB_REF_NAME", "v0.1.0")
            .output()
            .expect("bash");
        assert!(
            out.status.success(),
            "{script}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&work, &package);
    let user = dir.join("user");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::copy(
        work.join("sweeper_v0.1.0_linux_amd64.tar.gz"),
        user.join("sweeper_v0.1.0_linux_amd64.tar.gz"),
    )
    .unwrap();
    run(&user, extract);
    for bin in ["sweeper", "kubectl-sweeper"] {
        assert!(user.join(bin).is_file(), "{extract} gives {bin}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
