//! Runs teardown passes for one cluster until done (or 20 passes), printing each report.
//! `cargo run -p sweeper-aws --example teardown_cluster -- <cluster-name> [--dry-run]`

use sweeper_aws::phases::{AwsClients, PassRequest, teardown_pass};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let name = args
        .next()
        .ok_or("usage: teardown_cluster <cluster-name> [--dry-run]")?;
    let dry_run = args.any(|a| a == "--dry-run");
    let clients = AwsClients::new(&sweeper_aws::load_config().await);
    let req = PassRequest {
        dry_run,
        ..PassRequest::new(name)
    };
    for pass in 1..=20 {
        let r = teardown_pass(&clients, &req).await;
        for p in &r.phases {
            println!(
                "pass {pass} phase {}: started={} deleted={} remaining={} errors={} planned={}",
                p.phase,
                p.started,
                p.deleted.len(),
                p.remaining.len(),
                p.errors.len(),
                p.planned.len()
            );
            for e in &p.errors {
                println!("  error: {e}");
            }
        }
        if r.done || dry_run {
            println!("done={}", r.done);
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    Err("not done after 20 passes".into())
}
