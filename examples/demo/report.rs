//! The final report: per step what was deleted and how long it took, what was left if anything,
//! and the survivors checked.

use crate::live::Board;
use crate::step::{count_by_kind, format_counts};
use std::time::Duration;

const WIDTH: usize = 70;

/// Wraps `text` at commas to `WIDTH` columns, continuation lines indented by `indent`.
pub fn wrap(text: &str, indent: usize) -> String {
    let mut out = String::new();
    let mut line = 0usize;
    for (i, part) in text.split(", ").enumerate() {
        let piece = if i == 0 {
            part.to_string()
        } else {
            format!(", {part}")
        };
        if line > 0 && line + piece.len() > WIDTH {
            out.push_str(",\n");
            out.push_str(&" ".repeat(indent));
            let rest = piece.trim_start_matches(", ");
            out.push_str(rest);
            line = rest.len();
        } else {
            out.push_str(&piece);
            line += piece.len();
        }
    }
    out
}

/// Prints the report; returns what went wrong (a step not finished in time, a survivor gone).
pub fn print(b: &Board, survivors: &[(String, bool)], timeout: Duration) -> Vec<String> {
    println!();
    println!(
        "== report: the three deletes were sent at once; TOOK = until the step's last item was done"
    );
    println!("  {:<26} {:>7}  DELETED (by kind)", "STEP", "TOOK");
    let mut problems = Vec::new();
    for s in &b.steps {
        let took = s.finished.map_or(format!(">{}s", timeout.as_secs()), |d| {
            format!("{:.1}s", d.as_secs_f64())
        });
        let mut what = format_counts(&s.done_by_kind());
        if what.is_empty() {
            what = "nothing".into();
        }
        if s.passes > 0 {
            let plural = if s.passes == 1 { "" } else { "es" };
            what.push_str(&format!(" (sweeper: {} pass{plural})", s.passes));
        }
        let mark = if s.finished.is_some() { "✓" } else { "✗" };
        println!("{mark} {:<26} {:>7}  {}", s.title, took, wrap(&what, 38));
        if s.finished.is_none() {
            let left = s.left();
            problems.push(format!(
                "{}: {} of {} not deleted within {}s",
                s.title,
                left.len(),
                s.items.len(),
                timeout.as_secs()
            ));
            println!(
                "{:38}NOT DONE: {}",
                "",
                wrap(&format_counts(&count_by_kind(left.iter().copied())), 48)
            );
            for i in left.iter().take(8) {
                println!("{:40}{}", "", i.key);
            }
        }
    }
    println!();
    println!("== replicas");
    if b.events.is_empty() {
        println!("  {} throughout", b.roles());
    }
    for (t, e) in &b.events {
        println!("  t+{:<7} {e}", format!("{:.1}s", t.as_secs_f64()));
    }
    println!();
    println!("== survivors (must still exist)");
    for (what, there) in survivors {
        println!("  {}  {what}", if *there { "ok     " } else { "MISSING" });
        if !there {
            problems.push(format!("survivor deleted: {what}"));
        }
    }
    println!();
    let total: usize = b.steps.iter().map(|s| s.done_count()).sum();
    let slowest = b
        .steps
        .iter()
        .filter_map(|s| s.finished)
        .max()
        .unwrap_or_default();
    if problems.is_empty() {
        println!(
            "demo OK: {total} objects and AWS resources deleted or released in {:.1}s; every survivor intact",
            slowest.as_secs_f64()
        );
    }
    problems
}
