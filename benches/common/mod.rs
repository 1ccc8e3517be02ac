//! What the root package's benches share: the line naming the machine a run measured, so every
//! figure is quoted with its CPU, cores, memory, kernel, load, build and commit (the Python
//! benches print the same line: `benches/machine.py`). Cargo does not take a folder without a
//! `main.rs` for a bench target, hence `common/mod.rs`.

use std::process::Command;

/// The first `key: value` line of a /proc file.
fn proc_value(path: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

/// Prints one line to stderr: CPU model, cores, RAM, kernel, load average, the build (beton's
/// version, release or debug), git commit and UTC time.
pub fn print_machine() {
    let mut cpu = proc_value("/proc/cpuinfo", "model name").unwrap_or_else(|| std::env::consts::ARCH.into());
    if let (Some(family), Some(model)) =
        (proc_value("/proc/cpuinfo", "cpu family"), proc_value("/proc/cpuinfo", "model"))
    {
        // A VM's model name can be as vague as "AMD EPYC".
        cpu += &format!(" (family {family} model {model})");
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let ram = proc_value("/proc/meminfo", "MemTotal")
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or("RAM unknown".into(), |kib| format!("{:.1} GiB RAM", kib / (1u64 << 20) as f64));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let mut commit = git(&["rev-parse", "--short", "HEAD"]);
    if !git(&["status", "--porcelain", "--untracked-files=no"]).is_empty() {
        commit += " (with uncommitted changes)";
    }
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    eprintln!(
        "# machine: {cpu}, {cores} cores, {ram}; {} {}; load {}; beton {} ({profile}); git {commit}; {}",
        std::env::consts::OS,
        kernel.trim(),
        load.join(" "),
        env!("CARGO_PKG_VERSION"),
        utc_now()
    );
}

/// The current time as `YYYY-MM-DD HH:MM UTC`, from `date` (the CLI's manifest times have the
/// date algorithm; a bench does not link the CLI), or "time unknown".
fn utc_now() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "time unknown".to_string(), |s| s.trim().to_string())
}
