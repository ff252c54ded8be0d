//! The live view: the shared board (steps and replicas), the poller that asks each replica for
//! its `/status`, and the table, redrawn in place on a terminal or printed as change lines in a
//! log.

use crate::step::StepState;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use sweeper::status::StatusReport;

/// One `sweeper run` replica the demo started.
pub struct Replica {
    pub name: String,
    pub url: String,
    pub pid: Option<u32>,
    /// `leader`, `standby`, `starting`, `lost`, or `down` when it does not answer.
    pub role: String,
}

pub struct Board {
    /// When the deletes were sent.
    pub t0: Instant,
    pub steps: Vec<StepState>,
    pub replicas: Vec<Replica>,
    /// Things worth a line of their own (leader changes), with their time.
    pub events: Vec<(Duration, String)>,
}

pub type Shared = Arc<Mutex<Board>>;

pub fn lock(b: &Shared) -> std::sync::MutexGuard<'_, Board> {
    b.lock().unwrap_or_else(|p| p.into_inner())
}

impl Board {
    pub fn all_finished(&self) -> bool {
        self.steps.iter().all(|s| s.finished.is_some())
    }

    pub fn roles(&self) -> String {
        self.replicas
            .iter()
            .map(|r| format!("{} {}", r.name, r.role))
            .collect::<Vec<_>>()
            .join(" · ")
    }

    pub fn leader(&self) -> Option<&Replica> {
        self.replicas.iter().find(|r| r.role == "leader")
    }
}

async fn fetch(url: &str) -> Option<StatusReport> {
    let (code, body) = sweeper::http_get::get(&format!("{url}/status"))
        .await
        .ok()?;
    if code != 200 {
        return None;
    }
    serde_json::from_str(&body).ok()
}

/// Asks every replica for its status every 500 ms: roles, and the leader's teardown phases.
pub async fn poll_status(board: Shared) {
    loop {
        let urls: Vec<String> = lock(&board)
            .replicas
            .iter()
            .map(|r| r.url.clone())
            .collect();
        let mut answers = Vec::new();
        for u in &urls {
            answers.push(fetch(u).await);
        }
        record(&mut lock(&board), &answers);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Records the replicas' roles (a change is an event) and the leader's teardown phases.
fn record(b: &mut Board, answers: &[Option<StatusReport>]) {
    let t = b.t0.elapsed();
    let mut changes = Vec::new();
    for (r, a) in b.replicas.iter_mut().zip(answers) {
        let role = a
            .as_ref()
            .map_or("down".to_string(), |s| s.leader.role.clone());
        if role != r.role {
            if r.role != "?" {
                changes.push(format!("{} is now {role}", r.name));
            }
            r.role = role;
        }
    }
    b.events.extend(changes.into_iter().map(|c| (t, c)));
    let Some(leader) = answers.iter().flatten().find(|s| s.leader.role == "leader") else {
        return;
    };
    for step in b.steps.iter_mut() {
        let Some(obj) = &step.teardown_object else {
            continue;
        };
        let t = leader.teardowns.iter().find(|t| &t.object == obj);
        step.sweeper_phase = t.map(|t| {
            if t.detail.is_empty() {
                t.phase.clone()
            } else {
                format!("{} ({})", t.phase, t.detail)
            }
        });
        if let Some(t) = t {
            step.passes = step.passes.max(t.passes);
        }
    }
}

const BAR: usize = 20;
const TITLE: usize = 26;

fn bar(done: usize, total: usize) -> String {
    let filled = (done * BAR).checked_div(total).unwrap_or(BAR);
    format!("{}{}", "█".repeat(filled), "░".repeat(BAR - filled))
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// The table's lines (same count every time, so a terminal can redraw it in place; the redraw
/// clips them to the terminal's width).
pub fn table(b: &Board) -> Vec<String> {
    let now = b.t0.elapsed();
    let mut out = vec![
        format!("t+{:<7} replicas: {}", secs(now), b.roles()),
        format!(
            "  {:<TITLE$} {:<BAR$} {:>4} {:>9} {:>7}  PHASE",
            "STEP", "PROGRESS", "", "DONE", "TIME"
        ),
    ];
    for s in &b.steps {
        let (done, total) = (s.done_count(), s.items.len());
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        let mark = if s.finished.is_some() { "✓" } else { " " };
        out.push(format!(
            "{mark} {:<TITLE$} {} {:>3}% {:>9} {:>7}  {}",
            s.title,
            bar(done, total),
            pct,
            format!("{done}/{total}"),
            secs(s.finished.unwrap_or(now)),
            s.phase()
        ));
    }
    out
}

/// Draws the table until every step finished or `deadline` passed.
pub async fn render(board: Shared, deadline: Duration, tty: bool) {
    let mut drawn = 0usize;
    let mut printed: Vec<String> = Vec::new();
    let mut events_seen = 0usize;
    let tick = if tty { 250 } else { 1000 };
    let width = terminal_width();
    if tty {
        print!("\x1b[?25l");
    }
    loop {
        let (lines, keys, finished, over, events) = {
            let b = lock(&board);
            let events: Vec<String> = b.events[events_seen..]
                .iter()
                .map(|(t, e)| format!("t+{:<7} {e}", secs(*t)))
                .collect();
            events_seen = b.events.len();
            let keys: Vec<String> = b
                .steps
                .iter()
                .map(|s| format!("{} {}", s.done_count(), s.phase()))
                .collect();
            (
                table(&b),
                keys,
                b.all_finished(),
                b.t0.elapsed() > deadline,
                events,
            )
        };
        if tty {
            redraw(&lines, &events, width, &mut drawn);
        } else {
            log_changes(&lines, &keys, &events, &mut printed);
        }
        if finished || over {
            break;
        }
        tokio::time::sleep(Duration::from_millis(tick)).await;
    }
    if tty {
        print!("\x1b[?25h");
    }
    let _ = std::io::stdout().flush();
}

/// Moves up over the last drawing, prints events above the table, then the table.
/// The terminal's width in columns (`stty size` on the controlling terminal), 120 if unknown.
fn terminal_width() -> usize {
    let size = std::fs::File::open("/dev/tty").ok().and_then(|tty| {
        std::process::Command::new("stty")
            .arg("size")
            .stdin(tty)
            .output()
            .ok()
    });
    size.and_then(|o| {
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse::<usize>().ok())
    })
    .filter(|&w| w >= 40)
    .map_or(120, |w| w - 1)
}

/// Lines are clipped to the terminal's width: a wrapped line would break the redraw.
fn redraw(lines: &[String], events: &[String], width: usize, drawn: &mut usize) {
    let mut out = String::new();
    if *drawn > 0 {
        out.push_str(&format!("\x1b[{}A", *drawn));
    }
    for e in events {
        out.push_str(&format!("\x1b[2K{}\n", clip(e, width)));
    }
    for l in lines {
        out.push_str(&format!("\x1b[2K{}\n", clip(l, width)));
    }
    *drawn = lines.len();
    print!("{out}");
    let _ = std::io::stdout().flush();
}

/// Not a terminal: one line per step whose progress or phase changed since the last print, at
/// most once a second.
fn log_changes(lines: &[String], keys: &[String], events: &[String], printed: &mut Vec<String>) {
    for e in events {
        println!("{e}");
    }
    let stamp = lines[0].split_whitespace().next().unwrap_or_default();
    if printed.is_empty() {
        println!("{:<9} {}", "", lines[1]);
        printed.resize(keys.len(), String::new());
    }
    for (i, (row, key)) in lines[2..].iter().zip(keys).enumerate() {
        if &printed[i] != key {
            println!("{stamp:<9} {row}");
            printed[i] = key.clone();
        }
    }
}
