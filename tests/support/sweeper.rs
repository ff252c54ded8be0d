//! Runs the real `sweeper` binary against the test environment, for tests of whole collectors.

use super::{EnvFacts, TestScope};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Sweeper {
    child: Option<Child>,
    pub base: String,
    pub port: u16,
    /// How the test reaches its port: nothing for `--http-insecure` (the default here), skipped
    /// certificate verification for one serving HTTPS (a test about authentication passes its
    /// own tokens to [`Sweeper::get_as`]).
    pub access: ::sweeper::http_get::Credentials,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Sweeper {
    /// Starts `sweeper run <args>` and waits until /readyz says ready (all collectors synced).
    pub async fn start(args: &[&str]) -> Sweeper {
        let s = Sweeper::spawn(args);
        s.wait_ready(Duration::from_secs(60)).await;
        s
    }

    /// [`Sweeper::start`] confined to `scope` ([`TestScope::sweeper_flags`]): how every test of
    /// the external or tenant collector starts its sweeper, so that it never acts on another
    /// test's AWSClusters or Tenants (nor they on its).
    pub async fn start_scoped(scope: &TestScope, args: &[&str]) -> Sweeper {
        let args = scoped(scope, args);
        Sweeper::start(&strs(&args)).await
    }

    /// [`Sweeper::start_scoped`] for a test that runs alone (scripts/test.sh's one-at-a-time
    /// phase), whose sweeper may run the cascade collector too: no other test runs beside it.
    pub async fn start_scoped_alone(scope: &TestScope, args: &[&str]) -> Sweeper {
        let args = scope_flags(scope, args);
        Sweeper::start(&strs(&args)).await
    }

    /// [`Sweeper::start_with_kubeconfig`] confined to `scope`.
    pub async fn start_scoped_with_kubeconfig(
        scope: &TestScope,
        args: &[&str],
        kubeconfig: &str,
    ) -> Sweeper {
        let args = scoped(scope, args);
        Sweeper::start_with_kubeconfig(&strs(&args), kubeconfig).await
    }

    /// [`Sweeper::spawn_with`] confined to `scope`.
    pub fn spawn_scoped_with(scope: &TestScope, args: &[&str], kubeconfig: &str) -> Sweeper {
        let args = scoped(scope, args);
        Sweeper::spawn_with(&strs(&args), kubeconfig)
    }

    /// [`Sweeper::start_external_only`] confined to `scope`.
    pub async fn start_external_only_scoped(scope: &TestScope, args: &[&str]) -> Sweeper {
        // start_external_only sets CascadeGC=false itself.
        let args = scope_flags(scope, args);
        Sweeper::start_external_only(&strs(&args)).await
    }

    /// Like [`Sweeper::start`], connecting with another kubeconfig (e.g. an impersonating one).
    pub async fn start_with_kubeconfig(args: &[&str], kubeconfig: &str) -> Sweeper {
        let s = Sweeper::spawn_with(args, kubeconfig);
        s.wait_ready(Duration::from_secs(60)).await;
        s
    }

    /// Runs as the shipped service account (`SWEEPER_SA_KUBECONFIG`, bound to deploy/manifests'
    /// RBAC by env-up), so every collector test also proves the shipped role suffices.
    pub fn spawn(args: &[&str]) -> Sweeper {
        Sweeper::spawn_with(args, &EnvFacts::load().get("SWEEPER_SA_KUBECONFIG"))
    }

    /// Starts the external collector alone as the external-only install's service account
    /// (`SWEEPER_EXTERNAL_SA_KUBECONFIG`, bound to deploy/manifests/external-only by env-up), so
    /// its least-privilege role is proven to suffice (and, by tests/rbac.rs, to be minimal).
    pub async fn start_external_only(args: &[&str]) -> Sweeper {
        let gates = ["--feature-gates", EXTERNAL_ONLY_GATES];
        let all: Vec<&str> = gates.iter().chain(args).copied().collect();
        let kubeconfig = EnvFacts::load().get("SWEEPER_EXTERNAL_SA_KUBECONFIG");
        Sweeper::start_with_kubeconfig(&all, &kubeconfig).await
    }

    /// Starts `sweeper run <args>` with `kubeconfig`, without waiting for readiness. Serves plain
    /// HTTP without authentication (`--http-insecure`) unless `args` say otherwise
    /// (`--http-insecure=false`, `--http-tls-…`): only tests/http_auth.rs is about the port's
    /// security.
    pub fn spawn_with(args: &[&str], kubeconfig: &str) -> Sweeper {
        Sweeper::spawn_to(args, kubeconfig, Stdio::inherit())
    }

    /// [`Sweeper::start_scoped`] with its log (stderr) written to `log`, for a test that reads it.
    pub async fn start_scoped_logged(scope: &TestScope, args: &[&str], log: &Path) -> Sweeper {
        let args = scoped(scope, args);
        let file = std::fs::File::create(log).expect("create the sweeper log");
        let kubeconfig = EnvFacts::load().get("SWEEPER_SA_KUBECONFIG");
        let s = Sweeper::spawn_to(&strs(&args), &kubeconfig, file.into());
        s.wait_ready(Duration::from_secs(60)).await;
        s
    }

    /// [`Sweeper::spawn_with`], its stderr (the log) sent to `stderr`.
    fn spawn_to(args: &[&str], kubeconfig: &str, stderr: Stdio) -> Sweeper {
        let secure = args
            .iter()
            .any(|a| *a == "--http-insecure=false" || a.starts_with("--http-tls"));
        let insecure_given = args.iter().any(|a| a.starts_with("--http-insecure"));
        let port = free_port();
        let log = std::env::var("SWEEPER_TEST_LOG").unwrap_or_else(|_| "info".into());
        let facts = EnvFacts::load();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sweeper"));
        // LocalStack's coordinates, for the external collector (where set: the cascade and
        // tenant tests need none).
        for key in super::AWS_ENV {
            if let Some(v) = facts.try_get(key) {
                cmd.env(key, v);
            }
        }
        let child = cmd
            .arg("run")
            .args(["--http-addr", &format!("127.0.0.1:{port}")])
            .args(["--discovery-interval", "2s"])
            .args((!secure && !insecure_given).then_some("--http-insecure"))
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", log)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn sweeper");
        Sweeper {
            child: Some(child),
            base: format!(
                "{}://127.0.0.1:{port}",
                if secure { "https" } else { "http" }
            ),
            port,
            access: ::sweeper::http_get::Credentials {
                insecure_skip_tls_verify: secure,
                ..Default::default()
            },
        }
    }

    pub async fn wait_ready(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok((200, _)) =
                ::sweeper::http_get::get_with(&format!("{}/readyz", self.base), &self.access).await
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("sweeper on {} not ready within {timeout:?}", self.base);
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        self.get_as(path, None).await
    }

    /// GET `path` sending `token` (none: no Authorization header).
    pub async fn get_as(&self, path: &str, token: Option<&str>) -> (u16, String) {
        let access = ::sweeper::http_get::Credentials {
            token: token.map(String::from),
            ..self.access.clone()
        };
        ::sweeper::http_get::get_with(&format!("{}{path}", self.base), &access)
            .await
            .expect("sweeper answers")
    }

    /// The value of one metric line, e.g. `sweeper_cascade_deleted_total{resource="/v1/ConfigMap"}`.
    pub async fn metric(&self, series: &str) -> f64 {
        let (_, body) = self.get("/metrics").await;
        body.lines()
            .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// SIGKILL: the crash case.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends a signal by name (`STOP`, `CONT`, `TERM`) with kill(1).
    pub fn signal(&self, sig: &str) {
        let pid = self.pid().expect("sweeper is running");
        let ok = Command::new("kill")
            .args([format!("-{sig}"), pid.to_string()])
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -{sig} {pid}");
    }

    /// Waits for the process to exit by itself; its status, or None if it still runs.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                self.child = None;
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `scope`'s flags, then `args`.
/// The flags of a scoped start. A scoped sweeper must run with CascadeGC=false: the cascade
/// collector has no scope, and .config/nextest.toml runs the scoped tests beside the
/// cluster-wide ones on the promise that their sweepers act only on their own objects.
/// The gates of the external-only install.
const EXTERNAL_ONLY_GATES: &str = "CascadeGC=false,TenantGC=false,ExternalResourceGC=true";

fn scoped(scope: &TestScope, args: &[&str]) -> Vec<String> {
    let gates = args
        .windows(2)
        .filter(|w| w[0] == "--feature-gates")
        .map(|w| w[1])
        .chain(
            args.iter()
                .filter_map(|a| a.strip_prefix("--feature-gates=")),
        );
    assert!(
        gates.into_iter().any(|g| g.contains("CascadeGC=false")),
        "a scoped sweeper runs with --feature-gates CascadeGC=false (the cascade collector has no \
         scope): {args:?}"
    );
    scope_flags(scope, args)
}

fn scope_flags(scope: &TestScope, args: &[&str]) -> Vec<String> {
    let mut all = scope.sweeper_flags();
    all.extend(args.iter().map(|a| a.to_string()));
    all
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Runs a `sweeper <args>` command (`restore`, `pause`, `archive list`, ...) as the test's admin,
/// the identity a platform engineer runs the CLI with; returns (success, stdout, stderr).
pub fn cli(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sweeper"))
        .args(args)
        .env("KUBECONFIG", EnvFacts::load().get("KUBECONFIG"))
        .output()
        .expect("run sweeper");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Polls `check` until it returns true or `timeout` passes; returns whether it did.
pub async fn eventually<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
