//! What the bench reads of the processes it measures (`/proc`: CPU time, RSS, context
//! switches, syscalls of a process tree) and the open-file limit it raises for many clients.

use std::time::Duration;

/// CPU time (user + system) and RSS of a process, from `/proc`.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ProcSample {
    pub(super) cpu: Duration,
    pub(super) rss_kib: u64,
    pub(super) peak_kib: u64,
}

pub(super) fn sample(pid: u32) -> ProcSample {
    let ticks = 100.0; // USER_HZ on Linux
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let num = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // After the command name: state is field 0; utime and stime are fields 11 and 12.
    let cpu = Duration::from_secs_f64((num(11) + num(12)) / ticks);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    ProcSample {
        cpu,
        rss_kib: kib("VmRSS:"),
        peak_kib: kib("VmHWM:"),
    }
}

/// `pid` and its descendants (a server that forks workers), from `/proc`.
pub(super) fn process_tree(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| {
                    let child = e.file_name().to_str()?.parse().ok()?;
                    let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
                    // After the command name: state, then the parent's pid.
                    let parent = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
                    Some((child, parent.parse().ok()?))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut tree = vec![pid];
    let mut i = 0;
    while let Some(&p) = tree.get(i) {
        tree.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    tree
}

/// [`sample`] summed over processes (RSS counts pages they share once per process).
pub(super) fn sample_all(pids: &[u32]) -> ProcSample {
    pids.iter()
        .map(|&p| sample(p))
        .fold(ProcSample::default(), |a, s| ProcSample {
            cpu: a.cpu + s.cpu,
            rss_kib: a.rss_kib + s.rss_kib,
            peak_kib: a.peak_kib + s.peak_kib,
        })
}

/// Raises the open-file limit to its hard maximum (10,000 runs need about 20,000 sockets in
/// each process); returns the limit in force.
pub(super) fn raise_fd_limit(want: u64) -> u64 {
    // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        let target = want.max(lim.rlim_cur);
        let raised = libc::rlimit {
            rlim_cur: target,
            rlim_max: target.max(lim.rlim_max),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
            return target;
        }
        let capped = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        libc::setrlimit(libc::RLIMIT_NOFILE, &capped);
        lim.rlim_max
    }
}
