//! The host a test ran on, as `result.json` records it: enough to tell two runs' machines apart
//! when their results are compared or aggregated.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The name given with `--host-name`, set once by the command before any result is made.
static NAME_OVERRIDE: OnceLock<String> = OnceLock::new();

/// Names this host `name` in every result this process writes, instead of its hostname: for
/// several runs on one machine (or in network namespaces, which share the hostname) that
/// `jetproof aggregate` must tell apart. The first call wins.
pub fn set_name(name: &str) {
    let _ = NAME_OVERRIDE.set(name.to_string());
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub name: String,
    /// Distribution name (from /etc/os-release) and kernel release.
    pub os: String,
    pub kernel: String,
    pub cpu: String,
    pub cpus: usize,
    pub memory_mb: u64,
}

impl Host {
    /// Describes this machine. Missing information reads "unknown"; it never fails.
    pub fn this() -> Host {
        let name = match NAME_OVERRIDE.get() {
            Some(name) => name.clone(),
            None => hostname::get()
                .ok()
                .and_then(|n| n.into_string().ok())
                .unwrap_or_else(|| "unknown".into()),
        };
        let os = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|v| v.trim_matches('"').to_string())
            })
            .unwrap_or_else(|| std::env::consts::OS.to_string());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| std::env::consts::ARCH.to_string());
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let memory_mb = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map(|kb| kb / 1024)
            .unwrap_or(0);
        Host {
            name,
            os,
            kernel,
            cpu,
            cpus,
            memory_mb,
        }
    }
}
