//! CAPA's own AWSCluster controller (scripts/go/capa-manager, CAPA v2.13.0) as a child process of
//! one test: built into the cache on first use (scripts/provision-capa-manager.sh), scoped to the
//! test's namespace, with CAPA's ExternalResourceGC gate on or off, killed when dropped. Its log
//! goes to `$SWEEPER_TEST_ENV/logs/capa-manager-<namespace>.log`.

use super::EnvFacts;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct CapaManager {
    child: Option<Child>,
    pub log: PathBuf,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The manager's binary, built on first use (several minutes on 2 cores; later a no-op).
pub fn binary() -> String {
    let out = Command::new(repo().join("scripts/provision-capa-manager.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/provision-capa-manager.sh");
    assert!(out.status.success(), "building CAPA's controller failed");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

impl CapaManager {
    /// Starts CAPA's controller for the AWSClusters of `namespace`, `ExternalResourceGC` as
    /// `gc_gate` says. AWS: LocalStack, through the SDK's `AWS_ENDPOINT_URL`; the credentials a
    /// cluster's identity gives (a static identity's Secret in capa-system).
    pub fn start(namespace: &str, gc_gate: bool) -> CapaManager {
        let bin = binary();
        let facts = EnvFacts::load();
        let logs = PathBuf::from(facts.get("SWEEPER_TEST_ENV")).join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let log = logs.join(format!("capa-manager-{namespace}.log"));
        let file = std::fs::File::create(&log).unwrap();
        // CAPA's AWSMachine CRD, which its AWSCluster delete lists (provisioned beside the binary).
        let crd = PathBuf::from(&bin).with_file_name("awsmachines.yaml");
        let child = Command::new(bin)
            .envs(facts.aws_env())
            .args(["--kubeconfig", &facts.get("KUBECONFIG")])
            .args(["--namespace", namespace])
            .args(["--feature-gates", &format!("ExternalResourceGC={gc_gate}")])
            .arg("--crds")
            .arg(&crd)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("spawn capa-manager");
        CapaManager {
            child: Some(child),
            log,
        }
    }

    /// Stops it (SIGTERM, as a Deployment scaled to zero; SIGKILL after 10 s).
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Waits until its log has not grown for `quiet` (at most `bound`): the reconciles that
    /// followed the build are over, as for a real cluster, deleted long after it was built. In one
    /// benchmark run a delete 1 s after the cluster was ready, while CAPA was still reconciling
    /// it, was never picked up: CAPA logged nothing for the 3 minutes after (its one worker for
    /// that object still busy, it seems; the cause was not established).
    pub async fn wait_idle(&self, quiet: Duration, bound: Duration) {
        let start = Instant::now();
        let mut last = (self.log_text().len(), Instant::now());
        while start.elapsed() < bound {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let len = self.log_text().len();
            if len != last.0 {
                last = (len, Instant::now());
            } else if last.1.elapsed() >= quiet {
                return;
            }
        }
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for CapaManager {
    fn drop(&mut self) {
        self.stop();
    }
}
