//! The memory one solve may use (`SolveOptions::memory_limit`), for the command line and
//! the service alike: `--solve-memory` / `REMAT_SOLVE_MEMORY`, bytes or a size (`1.5GiB`)
//! per solve, or a share of the machine's memory (`50%`) split among the solves that run
//! at once. Without a setting, [`DEFAULT_SHARE`] of the machine's memory is split among
//! them ([`DEFAULT_SHARE_OF_ADDRESS_SPACE`] under an address-space limit).
//!
//! The machine's memory is what the process may really use: the container's limit from
//! the cgroup (v2 `/sys/fs/cgroup/memory.max`, v1
//! `/sys/fs/cgroup/memory/memory.limit_in_bytes`), else the physical memory
//! (`/proc/meminfo`'s `MemTotal`), never more than the physical memory nor than the
//! process's address-space limit (`ulimit -v`, `prlimit --as`).
//!
//! A solver whose model is estimated larger refuses before allocating
//! (`SolveError::TooLarge`: HTTP 413, exit 2); the share left over covers the graph, the
//! schedules and the server itself.

use crate::budget::Budget;
use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

/// The share of the machine's memory that solves may use together by default.
pub const DEFAULT_SHARE: f64 = 0.75;
/// The default share when the figure is an address-space limit: virtual memory runs
/// about twice the resident set (a 599-node MILP: 3.1 GB virtual at 1.7 GB resident;
/// malloc arenas and thread stacks are reserved, not used).
pub const DEFAULT_SHARE_OF_ADDRESS_SPACE: f64 = 0.3;

/// Assumed when no memory size can be read (not Linux, no `/proc`).
const FALLBACK_MEMORY: u64 = 4 << 30;

/// How much memory one solve may use, as the user wrote it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SolveMemory {
    /// Bytes per solve.
    Bytes(u64),
    /// A share of the machine's memory for all the solves that run at once.
    Share(f64),
}

impl std::str::FromStr for SolveMemory {
    type Err = String;
    fn from_str(s: &str) -> Result<SolveMemory, String> {
        let bad =
            || format!("expected bytes, a size such as 2GiB or a share such as 50%, got '{s}'");
        match s.parse::<Budget>().map_err(|_| bad())? {
            Budget::Bytes(b) if b > 0 => Ok(SolveMemory::Bytes(b)),
            Budget::OfPeak(f) if f.is_finite() && f > 0.0 && f <= 1.0 => Ok(SolveMemory::Share(f)),
            _ => Err(bad()),
        }
    }
}

/// Where the machine's memory figure came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemorySource {
    CgroupV2,
    CgroupV1,
    AddressSpace,
    Physical,
    Unknown,
}

impl fmt::Display for MemorySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemorySource::CgroupV2 => "the cgroup v2 limit (memory.max)",
            MemorySource::CgroupV1 => "the cgroup v1 limit (memory.limit_in_bytes)",
            MemorySource::AddressSpace => "the address-space limit (RLIMIT_AS)",
            MemorySource::Physical => "the physical memory",
            MemorySource::Unknown => "an assumed 4 GiB",
        })
    }
}

/// The memory this process may use and where the figure comes from, read once.
pub fn machine_memory() -> (u64, MemorySource) {
    static MEMORY: OnceLock<(u64, MemorySource)> = OnceLock::new();
    *MEMORY.get_or_init(|| {
        let (bytes, source) = read_machine_memory(Path::new("/"));
        match address_space_limit() {
            Some(limit) if limit < bytes => (limit, MemorySource::AddressSpace),
            _ => (bytes, source),
        }
    })
}

/// The soft `RLIMIT_AS` of this process, when there is one.
fn address_space_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the limit into the struct it is given.
        let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0;
        // rlim_t is u64 on 64-bit Linux, not everywhere.
        #[allow(clippy::unnecessary_cast)]
        let current = limit.rlim_cur as u64;
        (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(current)
    }
    #[cfg(not(unix))]
    None
}

/// [`machine_memory`] under `root` (a test points it at a fake tree).
fn read_machine_memory(root: &Path) -> (u64, MemorySource) {
    let read = |p: &str| std::fs::read_to_string(root.join(p)).ok();
    let physical = read("proc/meminfo").and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    });
    // v1 reports "no limit" as a huge number (about 2^63 rounded to pages).
    let limit = |p: &str| {
        read(p)
            .and_then(|t| t.trim().parse::<u64>().ok())
            .filter(|&b| b > 0 && b < 1 << 60)
    };
    let cgroup = limit("sys/fs/cgroup/memory.max")
        .map(|b| (b, MemorySource::CgroupV2))
        .or_else(|| {
            limit("sys/fs/cgroup/memory/memory.limit_in_bytes").map(|b| (b, MemorySource::CgroupV1))
        });
    match (cgroup, physical) {
        (Some((c, source)), Some(p)) if c < p => (c, source),
        (Some(c), None) => c,
        (_, Some(p)) => (p, MemorySource::Physical),
        (None, None) => (FALLBACK_MEMORY, MemorySource::Unknown),
    }
}

/// The bytes one solve may use: `setting` resolved against `machine` bytes shared by
/// `concurrent` solves (the default: [`DEFAULT_SHARE`] of it).
pub fn per_solve(setting: Option<SolveMemory>, machine: u64, concurrent: usize) -> u64 {
    let share = |f: f64| (machine as f64 * f / concurrent.max(1) as f64) as u64;
    match setting {
        Some(SolveMemory::Bytes(b)) => b,
        Some(SolveMemory::Share(f)) => share(f),
        None => share(DEFAULT_SHARE),
    }
}

/// [`per_solve`] on this machine.
pub fn solve_memory_limit(setting: Option<SolveMemory>, concurrent: usize) -> u64 {
    let (bytes, source) = machine_memory();
    let setting = match (setting, source) {
        (None, MemorySource::AddressSpace) => {
            Some(SolveMemory::Share(DEFAULT_SHARE_OF_ADDRESS_SPACE))
        }
        (setting, _) => setting,
    };
    per_solve(setting, bytes, concurrent)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake root holding `files`, under a fresh directory.
    struct Tree(std::path::PathBuf);

    impl Tree {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tree(files: &[(&str, &str)]) -> Tree {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("remat-memory-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (path, text) in files {
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        Tree(dir)
    }

    const MEMINFO: (&str, &str) = ("proc/meminfo", "MemTotal:       16384 kB\nMemFree: 1 kB\n");

    #[test]
    fn the_cgroup_limit_wins_when_below_the_physical_memory() {
        let v2 = tree(&[MEMINFO, ("sys/fs/cgroup/memory.max", "4096\n")]);
        assert_eq!(
            read_machine_memory(v2.path()),
            (4096, MemorySource::CgroupV2)
        );
        let unlimited = tree(&[MEMINFO, ("sys/fs/cgroup/memory.max", "max\n")]);
        assert_eq!(
            read_machine_memory(unlimited.path()),
            (16 << 20, MemorySource::Physical)
        );
        let v1 = tree(&[
            MEMINFO,
            ("sys/fs/cgroup/memory/memory.limit_in_bytes", "8192"),
        ]);
        assert_eq!(
            read_machine_memory(v1.path()),
            (8192, MemorySource::CgroupV1)
        );
        let v1_unlimited = tree(&[
            MEMINFO,
            (
                "sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712",
            ),
        ]);
        assert_eq!(
            read_machine_memory(v1_unlimited.path()).1,
            MemorySource::Physical
        );
        let above = tree(&[MEMINFO, ("sys/fs/cgroup/memory.max", "99999999999")]);
        assert_eq!(read_machine_memory(above.path()).1, MemorySource::Physical);
        let nothing = tree(&[]);
        assert_eq!(
            read_machine_memory(nothing.path()),
            (FALLBACK_MEMORY, MemorySource::Unknown)
        );
    }

    #[test]
    fn settings_parse_and_resolve_per_solve() {
        assert_eq!("2GiB".parse(), Ok(SolveMemory::Bytes(2 << 30)));
        assert_eq!("1000".parse(), Ok(SolveMemory::Bytes(1000)));
        assert_eq!("50%".parse(), Ok(SolveMemory::Share(0.5)));
        for bad in ["0", "0%", "150%", "lots", "-1"] {
            let err = bad.parse::<SolveMemory>().unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
        assert_eq!(per_solve(Some(SolveMemory::Bytes(7)), 1000, 4), 7);
        assert_eq!(per_solve(Some(SolveMemory::Share(0.5)), 1000, 4), 125);
        assert_eq!(per_solve(None, 4000, 2), 1500);
        assert_eq!(per_solve(None, 4000, 0), 3000);
    }
}
