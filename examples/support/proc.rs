//! A process's memory as /proc reports it, for the benchmark drivers
//! (`#[path = "support/proc.rs"] mod proc;`).

/// Field `name` (e.g. `VmRSS:`, `VmHWM:`) of `/proc/<pid>/status`, in bytes; 0 when the process
/// or the field is gone.
pub fn status_bytes(pid: u32, name: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}
