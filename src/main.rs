use clap::Parser;
use std::process::ExitCode;
use sweeper::cli::{Cli, Command};

#[tokio::main]
async fn main() -> ExitCode {
    sweeper::install_crypto_provider();
    let cli = Cli::parse();
    // The one-shot commands print a report: their logs stay at warn unless RUST_LOG says more.
    let reports = matches!(
        cli.command,
        Command::Scan(_) | Command::Teardown(_) | Command::Check(_) | Command::Gc(_)
    );
    sweeper::telemetry::init(cli.log_format, sweeper::telemetry::default_level(reports));
    match cli.command {
        Command::Version => {
            println!("sweeper {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Crds => match sweeper::api::crds_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: cannot render CRDs: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Graph(args) => match graph(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Status {
            server,
            json,
            access,
        } => {
            let url = format!("{}/status", server.trim_end_matches('/'));
            match sweeper::http_get::get_with(&url, &access).await {
                Ok((200, body)) => {
                    if json {
                        println!("{}", body.trim_end());
                    } else {
                        match serde_json::from_str::<sweeper::status::StatusReport>(&body) {
                            Ok(s) => print!("{}", sweeper::status::render(&s)),
                            Err(e) => {
                                eprintln!("error: {url}: unexpected answer: {e}");
                                return ExitCode::FAILURE;
                            }
                        }
                    }
                    ExitCode::SUCCESS
                }
                Ok((code, body)) => {
                    eprintln!("error: {url}: HTTP {code}: {}", body.trim());
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Gc(cmd) => report(gc(cmd).await),
        Command::Restore(args) => report(restore(args).await),
        Command::Uninstall(args) => report(uninstall(args).await),
        Command::Archive(sweeper::cli::ArchiveCommand::List {
            namespace,
            since,
            sweeper_namespace,
        }) => report(archive_list(namespace, since, sweeper_namespace).await),
        Command::Pause(args) => report(pause(args, true).await),
        Command::Resume(args) => report(pause(args, false).await),
        Command::Check(args) => check(*args).await,
        Command::Scan(args) => report(scan(args).await),
        Command::Teardown(args) => teardown(*args).await,
        Command::Run(args) => match sweeper::run::run(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %e, "sweeper failed");
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// `sweeper check`: the report on stdout, exit 1 when a check failed (2 when it could not start).
async fn check(args: sweeper::cli::CheckArgs) -> ExitCode {
    use sweeper::check::{self, Line, Report};
    use sweeper::cli::CheckOutput;
    let print = |report: &Report| match args.output {
        CheckOutput::Table => print!("{}", report.render()),
        CheckOutput::Json => println!(
            "{}",
            serde_json::to_string_pretty(report)
                .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
        ),
    };
    let exit = |report: &Report| {
        if report.success {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    };
    let mut config = match kube::Config::infer().await {
        Ok(c) => c,
        Err(e) => {
            let report = Report::new(vec![Line::fail(
                "kubernetes-api",
                format!("no cluster configuration: {e}"),
                "set KUBECONFIG, or run in a pod with a service account",
            )]);
            print(&report);
            return exit(&report);
        }
    };
    if let Some(user) = &args.as_user {
        config.auth_info.impersonate = Some(user.clone());
    }
    let namespace = args.run.config.sweeper_namespace();
    let client = match kube::Client::try_from(config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot build a client: {e}");
            return ExitCode::from(2);
        }
    };
    let lease = args.run.config.leader_elect.then(|| {
        let l = args.run.config.leader_config();
        let ns = if l.namespace.is_empty() {
            namespace.clone()
        } else {
            l.namespace
        };
        (ns, l.lease_name, l.lease_duration)
    });
    let cfg = check::Config {
        gates: args.run.feature_gates.clone(),
        namespace,
        capa_namespace: args.run.config.capa_namespace.clone(),
        lease,
        archive: args.run.config.archive.is_on(),
        archive_budget_bytes: args.archive_budget,
        control_plane_namespace: args.control_plane_namespace.clone(),
        cluster_namespace: args.cluster_namespace.clone(),
        external_selector: args.run.config.external_gc_selector.clone(),
        external_dry_run: args.run.config.external_dry_run,
        scan_interval: args.run.config.scan_interval,
    };
    let sessions = if cfg.preflights().contains(&check::Preflight::Aws) && !args.skip_aws {
        Some(sweeper_aws::session::SessionCache::new(
            sweeper_aws::load_config().await,
            None,
        ))
    } else {
        None
    };
    let report = check::run(&client, &cfg, sessions.as_ref()).await;
    print(&report);
    exit(&report)
}

/// `sweeper teardown`: the plan and the passes on stdout (see external::teardown); fails when a
/// target was refused or is not done.
async fn teardown(args: sweeper::cli::TeardownArgs) -> ExitCode {
    let client = match kube::Client::try_default().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot connect: {e}; nothing is deleted");
            return ExitCode::FAILURE;
        }
    };
    let sessions = sweeper_aws::session::SessionCache::new(sweeper_aws::load_config().await, None);
    let out = sweeper::external::teardown::run(&client, &sessions, &args).await;
    print!("{}", out.text);
    if out.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `sweeper scan`: the report on stdout (see external::scan).
async fn scan(args: sweeper::cli::ScanArgs) -> Result<String, String> {
    use sweeper::external::scan;
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let sessions = sweeper_aws::session::SessionCache::new(sweeper_aws::load_config().await, None);
    let targets = scan::ScanTargets {
        regions: args.regions.clone(),
        capa_namespace: args.capa_namespace.clone(),
        not_ours: args.not_ours.iter().cloned().collect(),
    };
    let report =
        scan::scan_with_annotation(&client, &sessions, &args.namespace.namespace, targets).await?;
    Ok(match args.output {
        sweeper::cli::CheckOutput::Table => scan::render::table(&report).trim_end().to_string(),
        sweeper::cli::CheckOutput::Json => serde_json::to_string_pretty(&report)
            .map_err(|e| format!("cannot render the report: {e}"))?,
    })
}

async fn graph(args: sweeper::cli::GraphArgs) -> Result<(), String> {
    use sweeper::cli::GraphQuery;
    use sweeper::http_get::{encode, get_with};
    let base = args.server.trim_end_matches('/');
    let url = match &args.query {
        GraphQuery::Dependents(o) | GraphQuery::Dependencies(o) => {
            let which = if matches!(args.query, GraphQuery::Dependents(_)) {
                "dependents"
            } else {
                "dependencies"
            };
            let mut url = format!(
                "{base}/graph/{which}?gvk={}&name={}&transitive={}",
                encode(&o.gvk),
                encode(o.name()),
                o.transitive
            );
            if let Some(ns) = o.namespace() {
                url.push_str(&format!("&namespace={}", encode(ns)));
            }
            url
        }
        GraphQuery::Dump { format } => format!("{base}/graph?format={}", encode(format)),
    };
    let (status, body) = get_with(&url, &args.access)
        .await
        .map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("{url}: HTTP {status}: {}", body.trim()));
    }
    println!("{}", body.trim_end());
    Ok(())
}

async fn gc(cmd: sweeper::cli::GcCommand) -> Result<String, String> {
    use sweeper::cli::GcCommand;
    use sweeper::external::annotations::GC_ANNOTATION;
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    if let GcCommand::Plan {
        cluster,
        alternative_discovery,
        capa_namespace,
    } = &cmd
    {
        let sessions =
            sweeper_aws::session::SessionCache::new(sweeper_aws::load_config().await, None);
        return sweeper::external::plan::plan(
            &client,
            &sessions,
            capa_namespace,
            &cluster.namespace,
            &cluster.cluster_name,
            *alternative_discovery,
        )
        .await;
    }
    let (cluster, values, what) = match cmd {
        GcCommand::Plan { .. } => unreachable!("handled above"),
        GcCommand::Enable(c) => (
            c,
            vec![(GC_ANNOTATION, Some("true".to_string()))],
            "external resource GC enabled".to_string(),
        ),
        GcCommand::Disable(c) => (
            c,
            vec![(GC_ANNOTATION, Some("false".to_string()))],
            "external resource GC disabled".to_string(),
        ),
        GcCommand::Configure {
            cluster,
            tasks,
            external_dns_owner_id,
        } => {
            return sweeper::external::configure::configure(
                &client,
                &cluster.namespace,
                &cluster.cluster_name,
                &tasks,
                external_dns_owner_id.as_deref(),
            )
            .await;
        }
    };
    let target = sweeper::external::cluster::annotate(
        &client,
        &cluster.namespace,
        &cluster.cluster_name,
        &values,
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(match target {
        (target, None) => format!("{target}: {what}"),
        (target, Some(note)) => format!("{target}: {what}\n{note}"),
    })
}

fn report(r: Result<String, String>) -> ExitCode {
    match r {
        Ok(msg) => {
            println!("{msg}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `sweeper pause` / `sweeper resume`: writes the switch as the caller's identity.
async fn pause(args: sweeper::cli::PauseArgs, on: bool) -> Result<String, String> {
    use sweeper::engine::pause::{self, PauseRecord};
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    if args.after_uninstall {
        if on {
            return Err("--after-uninstall is for `sweeper resume`".into());
        }
        let resumed = sweeper::uninstall::resume_after_uninstall(&client, &args.switch.namespace)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(if resumed.is_empty() {
            "nothing paused by `sweeper uninstall`".to_string()
        } else {
            format!(
                "resumed what `sweeper uninstall` paused: {}",
                resumed.join(", ")
            )
        });
    }
    let record = on.then(|| PauseRecord {
        since: k8s_openapi::jiff::Timestamp::now().to_string(),
        by: std::env::var("USER").ok().filter(|u| !u.is_empty()),
        reason: args.reason.clone(),
    });
    let now = pause::set(
        &client,
        &args.switch.namespace,
        args.collector.as_deref(),
        record,
        &sweeper::collectors::names(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let which = args.collector.as_deref().unwrap_or("every collector");
    let paused: Vec<&str> = now.keys().map(String::as_str).collect();
    Ok(format!(
        "{} {which}; paused now: {}",
        if on { "paused" } else { "resumed" },
        if paused.is_empty() {
            "none".to_string()
        } else {
            paused.join(", ")
        }
    ))
}

/// `sweeper uninstall`: as the caller's identity (it patches objects of every kind).
async fn uninstall(args: sweeper::cli::UninstallArgs) -> Result<String, String> {
    use sweeper::uninstall::{Options, uninstall};
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let opts = Options {
        namespace: args.switch.namespace.clone(),
        keep_tenant_finalizer: args.keep_tenant_finalizer,
        dry_run: args.dry_run,
        collectors: args.collectors.clone(),
        capa_namespace: args.capa_namespace.clone(),
    };
    let summary = uninstall(&client, &opts).await.map_err(|e| e.to_string())?;
    let verb = if args.dry_run {
        "would release"
    } else {
        "released"
    };
    let mut out = String::new();
    if !args.dry_run {
        out.push_str(&format!(
            "paused every collector (namespace {}); nothing was deleted, the archive is kept\n",
            args.switch.namespace
        ));
    }
    for r in &summary.released {
        out.push_str(&format!("{verb} {r}\n"));
    }
    out.push_str(&format!("{} object(s) {verb}", summary.released.len()));
    if let Some(capa) = &summary.capa {
        out.push_str(&format!("\n{capa}"));
    }
    if !args.dry_run {
        out.push_str(&format!(
            "\nthe pause switch stays set ({}/sweeper-pause): a reinstall starts paused until `sweeper resume -n {} --after-uninstall` (the Helm chart's post-install hook runs it)",
            args.switch.namespace, args.switch.namespace
        ));
    }
    if !summary.failed.is_empty() {
        return Err(format!(
            "{out}\nnot finished (run again):\n  {}",
            summary.failed.join("\n  ")
        ));
    }
    Ok(out)
}

/// `sweeper restore`: as the caller's identity.
async fn restore(args: sweeper::cli::RestoreArgs) -> Result<String, String> {
    use sweeper::archive::restore;
    let sel = args.selection()?;
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let archive = restore::load(
        &client,
        args.records_namespace.as_deref(),
        &args.sweeper_namespace,
    )
    .await?;
    for n in &archive.notes {
        eprintln!("note: {n}");
    }
    let entries = restore::select(&archive, &sel)?;
    let summary = restore::restore(&client, &entries, args.dry_run, &mut |line| {
        println!("{line}")
    })
    .await;
    if summary.failed > 0 {
        return Err(format!("{} objects could not be restored", summary.failed));
    }
    Ok(String::new())
}

/// `sweeper archive list`.
async fn archive_list(
    namespace: Option<String>,
    since: Option<std::time::Duration>,
    sweeper_namespace: String,
) -> Result<String, String> {
    use sweeper::archive::restore;
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let archive = restore::load(&client, namespace.as_deref(), &sweeper_namespace).await?;
    // Further back than jiff's timestamps reach is simply "everything".
    let since = since.and_then(|d| {
        let back = k8s_openapi::jiff::SignedDuration::try_from(d).ok()?;
        k8s_openapi::jiff::Timestamp::now().checked_sub(back).ok()
    });
    Ok(restore::render(&archive, since).trim_end().to_string())
}
