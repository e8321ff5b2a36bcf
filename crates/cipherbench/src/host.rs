//! Facts about this machine and this process that every layer needs: how many
//! cores, which CPUs we may run on, pinning a thread, CPU time of a thread, of this
//! process and of other processes (from `/proc`), whether we are root, and the
//! open-file limit, start times and parents of processes, and an exclusive file
//! lock.
//!
//! One home for what the layers used to write each for themselves. The `unsafe`
//! calls here are plain libc queries, each with its `SAFETY:` argument; nothing here
//! measures crypto or knows about a layer.

use std::io;

/// Number of online CPUs.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The CPUs this process may run on, in order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: the cpu_set_t is zeroed and then written by sched_getaffinity for this
    // process (pid 0); CPU_ISSET only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..cores()).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins the calling thread to one CPU. Callers that pin as an optimisation ignore
/// the error (a cpuset may forbid the core): the thread then stays where the
/// scheduler put it.
pub fn pin_to_core(core: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data (all-zero is the empty set); CPU_SET bounds-
    // checks against the set's size; sched_setaffinity with pid 0 reads the set for
    // the call and affects only the calling thread.
    let ret = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Restricts the calling thread to a set of CPUs (the scheduler balances it
/// among them): how the workers of a gateway pipeline share the gateway's cores.
/// Callers ignore the error as for [`pin_to_core`].
pub fn pin_to_cores(cores: &[usize]) -> io::Result<()> {
    if cores.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "an empty CPU set",
        ));
    }
    // SAFETY: as in pin_to_core: a zeroed set, bounds-checked CPU_SET, and an
    // affinity call on the calling thread only.
    let ret = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &core in cores {
            libc::CPU_SET(core, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Restricts a whole process (every thread it has now, as `taskset -a -p` does) to
/// `cpus`: how a placement is applied to a program started by the supervisor (nginx,
/// iperf3), whose threads and children made later inherit it. Fails for an empty
/// set, a CPU outside this process's cpuset, or a process we may not change.
pub fn set_process_affinity(pid: u32, cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "an empty CPU set",
        ));
    }
    let tasks: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    for tid in tasks {
        // SAFETY: cpu_set_t is plain data (all-zero is the empty set); CPU_SET bounds-
        // checks against the set's size; sched_setaffinity reads the set for the call
        // and changes only thread `tid`'s mask.
        let ret = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &cpu in cpus {
                libc::CPU_SET(cpu, &mut set);
            }
            libc::sched_setaffinity(
                tid as libc::pid_t,
                std::mem::size_of::<libc::cpu_set_t>(),
                &set,
            )
        };
        if ret < 0 {
            let e = io::Error::last_os_error();
            // A thread that exited since the listing is no failure.
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// The CPUs a process may run on, from `Cpus_allowed_list` in `/proc/<pid>/status`.
pub fn process_affinity(pid: u32) -> io::Result<Vec<usize>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(cipherbench_model::topology::parse_cpu_list)
        .ok_or_else(|| io::Error::other(format!("no Cpus_allowed_list for process {pid}")))
}

/// CPU time of the calling thread, nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Dependent additions per pass of [`add_chain`].
pub const ADD_CHAIN: u64 = 64;

/// Runs `passes` passes of [`ADD_CHAIN`] dependent additions to one register (one
/// cycle each, never overlapped: `machine::clock` times them) and returns the
/// register: `passes * ADD_CHAIN`. None on an architecture without the chain. The
/// addend is a register holding 1, not an immediate: Intel cores from Golden Cove on
/// fold small immediate adds at rename, at zero latency, which would read the clock
/// about 5x too high.
pub fn add_chain(passes: u64) -> Option<u64> {
    let (mut x, mut n) = (0u64, passes);
    if n == 0 {
        return Some(0);
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: register arithmetic only: no memory, no stack; the flags are
    // clobbered, which `asm!` assumes without `preserves_flags`.
    unsafe {
        std::arch::asm!(
            "2:", ".rept 64", "add {x}, {one}", ".endr", "dec {n}", "jnz 2b",
            x = inout(reg) x, n = inout(reg) n, one = in(reg) 1u64,
            options(nomem, nostack),
        );
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above.
    unsafe {
        std::arch::asm!(
            "2:", ".rept 64", "add {x}, {x}, {one}", ".endr", "subs {n}, {n}, #1", "b.ne 2b",
            x = inout(reg) x, n = inout(reg) n, one = in(reg) 1u64,
            options(nomem, nostack),
        );
    }
    if cfg!(not(any(target_arch = "x86_64", target_arch = "aarch64"))) {
        return None;
    }
    (n == 0).then_some(x)
}

/// CPU time of the whole process so far, in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CLOCK_MONOTONIC in nanoseconds: the same clock in every process, so a parent
/// can place a child's snapshots on its own time line.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The CPU-time clock of a thread, readable from any thread of the process.
#[derive(Debug, Clone, Copy)]
pub struct ThreadClock(libc::clockid_t);

impl ThreadClock {
    /// The clock of a running thread (from its join handle's pthread id).
    pub fn of(thread: libc::pthread_t) -> io::Result<ThreadClock> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: `thread` is a live thread (the caller holds its join handle) and
        // `id` is a live out-parameter.
        let ret = unsafe { libc::pthread_getcpuclockid(thread, &mut id) };
        if ret != 0 {
            return Err(io::Error::from_raw_os_error(ret));
        }
        Ok(ThreadClock(id))
    }

    /// The calling thread's clock, readable from the other threads afterwards.
    pub fn current() -> io::Result<ThreadClock> {
        // SAFETY: pthread_self has no preconditions and names the calling thread,
        // which is live for the call.
        let me = unsafe { libc::pthread_self() };
        ThreadClock::of(me)
    }

    /// CPU time used so far, in nanoseconds.
    pub fn read_ns(self) -> u64 {
        clock_ns(self.0)
    }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a live out-parameter; an invalid clock only returns an error.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The first two fields of a `schedstat` file (`/proc/PID/schedstat`,
/// `/proc/thread-self/schedstat`): (CPU time, time runnable but waiting for a CPU),
/// cumulative nanoseconds. None where the file is missing or unreadable.
pub fn schedstat(path: &str) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut fields = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??))
}

/// (CPU time, time runnable but waiting for a CPU), cumulative nanoseconds. The wait
/// comes from `/proc/PID/schedstat` and is 0 where only `/proc/PID/stat` exists.
pub fn process_times(pid: u32) -> Option<(u64, u64)> {
    if let Some(times) = schedstat(&format!("/proc/{pid}/schedstat")) {
        return Some(times);
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu_ticks(&stat).map(|ticks| (ticks * 1_000_000_000 / clock_ticks_per_sec(), 0))
}

fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// utime + stime from a `/proc/PID/stat` line (fields 14 and 15, counted after the
/// parenthesised command name, which may itself hold spaces).
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14 -> index 11.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The parent of a process (field 4 of `/proc/PID/stat`).
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Children of `parent` (from `/proc/*/stat`), sorted.
pub fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

/// Opens /dev/null on any of fds 0-2 that is closed (`cipherbench ... >&-`), so
/// that no file or pipe we open later takes a standard descriptor's number (a
/// child would then get it as its stdin, stdout or stderr).
pub fn ensure_standard_fds() {
    for fd in 0..=2 {
        // SAFETY: F_GETFD only asks whether the descriptor is open.
        let closed = unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0;
        if closed {
            // The lowest free descriptor is `fd` itself; leaked on purpose.
            if let Ok(null) = std::fs::OpenOptions::new()
                .read(fd == 0)
                .write(fd != 0)
                .open("/dev/null")
            {
                std::mem::forget(null);
            }
        }
    }
}

/// Takes an exclusive `flock` on `file` without waiting: `Ok(false)` if another
/// open file holds it. The kernel releases it when the last descriptor of this open
/// file closes, however the process ends.
pub fn try_lock_exclusive(file: &std::fs::File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on a descriptor that `file` keeps open for the call.
        let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(e),
        }
    }
}

/// The real user id of this process.
pub fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// The start time of a process in clock ticks since boot (field 22 of
/// `/proc/PID/stat`): with the pid, it names a process uniquely, so a name that
/// carries both tells whether its owner still runs.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields after it are plain.
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process `pid` that started at `start` still runs (a zombie counts
/// as gone).
pub fn process_alive(pid: u32, start: u64) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some((_, after)) = stat.rsplit_once(')') else {
        return false;
    };
    let mut fields = after.split_whitespace();
    let state = fields.next().unwrap_or("");
    let started = fields.nth(18).and_then(|f| f.parse::<u64>().ok());
    state != "Z" && started == Some(start)
}

/// Whether any process has the pid `pid` (a zombie counts as gone).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, after)| after.split_whitespace().next() != Some("Z")),
    }
}

/// Where [`env_var_of`] found a process's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvSource {
    /// `/proc/<pid>/environ`, the block the process was started with.
    Environ,
    /// The process's writable memory: it overwrote its start-up block (nginx writes its
    /// process title over argv and the environment, after moving the environment to
    /// the heap), so the moved copy was read instead.
    Memory,
}

/// The value of environment variable `key` in process `pid` (None: not set), and
/// where it was read. Reads `/proc/<pid>/environ`; if that block holds no variable
/// at all (a program that overwrote it with its title), it reads the process's
/// heap and anonymous writable mappings (`/proc/<pid>/maps`, `/proc/<pid>/mem`,
/// at most 256 MiB) for `key=`, and every copy found must agree. Needs the right to
/// trace the process (our own descendants, or root).
pub fn env_var_of(pid: u32, key: &str) -> io::Result<(Option<String>, EnvSource)> {
    let block = std::fs::read(format!("/proc/{pid}/environ"))?;
    let entries: Vec<&[u8]> = block
        .split(|&b| b == 0)
        .filter(|e| e.contains(&b'='))
        .collect();
    let prefix = format!("{key}=");
    if !entries.is_empty() {
        let value = entries
            .iter()
            .find_map(|e| e.strip_prefix(prefix.as_bytes()))
            .map(|v| String::from_utf8_lossy(v).into_owned());
        return Ok((value, EnvSource::Environ));
    }
    let found = scan_memory(pid, prefix.as_bytes())?;
    let mut values: Vec<String> = found
        .iter()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    values.dedup();
    match values.len() {
        0 => Ok((None, EnvSource::Memory)),
        1 => Ok((values.pop(), EnvSource::Memory)),
        _ => Err(io::Error::other(format!(
            "several values of {key} in the process's memory: {}",
            values.join(", ")
        ))),
    }
}

/// Every NUL-terminated string starting with `prefix` in the heap and anonymous
/// writable mappings of `pid`, without the prefix.
fn scan_memory(pid: u32, prefix: &[u8]) -> io::Result<Vec<Vec<u8>>> {
    use std::io::{Read, Seek, SeekFrom};
    const LIMIT: u64 = 256 << 20;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem"))?;
    let mut out = Vec::new();
    let mut budget = LIMIT;
    for line in maps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(range), Some(perms)) = (fields.first(), fields.get(1)) else {
            continue;
        };
        let name = fields.get(5).copied().unwrap_or("");
        if !perms.starts_with("rw") || !(name.is_empty() || name == "[heap]") {
            continue;
        }
        let Some((start, end)) = range.split_once('-').and_then(|(a, b)| {
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        }) else {
            continue;
        };
        let len = end.saturating_sub(start).min(budget);
        budget -= len;
        let mut data = vec![0u8; len as usize];
        if mem.seek(SeekFrom::Start(start)).is_err() || mem.read_exact(&mut data).is_err() {
            continue; // a mapping that went away or cannot be read
        }
        let mut i = 0;
        while let Some(at) = find(&data[i..], prefix) {
            let from = i + at + prefix.len();
            let to = data[from..]
                .iter()
                .position(|&b| b == 0)
                .map_or(data.len(), |n| from + n);
            // Only a whole string: the byte before the key is a NUL or the mapping's
            // start, as for an environment entry.
            if i + at == 0 || data[i + at - 1] == 0 {
                out.push(data[from..to].to_vec());
            }
            i = from;
        }
        if budget == 0 {
            break;
        }
    }
    Ok(out)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// This kernel's boot id (`/proc/sys/kernel/random/boot_id`, a UUID drawn at
/// boot): the same in every namespace and container of one running kernel, and
/// different on any other machine or boot. Empty where it cannot be read.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Whether the process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Raises this process's open-file limit to its hard maximum (capped at 2^20) and
/// returns the soft limit in force afterwards (1024 if it cannot be read).
pub fn raise_open_file_limit() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is a valid rlimit to fill and then to pass back; RLIMIT_NOFILE
    // only concerns this process.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            let want = lim.rlim_max.min(1 << 20);
            if lim.rlim_cur < want {
                lim.rlim_cur = want;
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
            }
            lim.rlim_cur as usize
        } else {
            1024
        }
    }
}

/// The CPU's vendor: `vendor_id` of `/proc/cpuinfo` (x86), else its `CPU
/// implementer` code (ARM); empty if neither is there.
pub fn cpu_vendor() -> String {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    for key in ["vendor_id", "CPU implementer"] {
        let value = text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        });
        if let Some(v) = value {
            return v;
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_ticks_from_a_stat_line_with_spaces_in_the_name() {
        let stat = "1234 (nginx: worker process) S 1200 1200 1200 0 -1 4194624 500 0 0 0 250 40 0 0 20 0 1 0 100 0 0";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(290));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn reads_a_child_s_environment_variable() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .env("CIPHERBENCH_TEST_VAR", "~0x1:~0")
            .spawn()
            .unwrap();
        // Until the child has exec'd, /proc shows the fork's copy of our memory.
        let exec_done = || {
            std::fs::read(format!("/proc/{}/cmdline", child.id()))
                .is_ok_and(|c| c.starts_with(b"sleep\0"))
        };
        let start = std::time::Instant::now();
        while !exec_done() && start.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let got = env_var_of(child.id(), "CIPHERBENCH_TEST_VAR");
        let absent = env_var_of(child.id(), "CIPHERBENCH_NOT_SET");
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            got.unwrap(),
            (Some("~0x1:~0".to_string()), EnvSource::Environ)
        );
        assert_eq!(absent.unwrap(), (None, EnvSource::Environ));
    }

    #[test]
    fn pins_another_process_and_reads_its_affinity_back() {
        let cpu = *allowed_cpus().last().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let set = set_process_affinity(child.id(), &[cpu]);
        let read = process_affinity(child.id());
        let empty = set_process_affinity(child.id(), &[]);
        child.kill().unwrap();
        child.wait().unwrap();
        set.unwrap();
        assert_eq!(read.unwrap(), vec![cpu]);
        assert_eq!(empty.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            process_affinity(std::process::id()).unwrap(),
            allowed_cpus()
        );
    }

    #[test]
    fn finds_whole_strings_in_memory_only() {
        assert_eq!(find(b"abcKEY=x", b"KEY="), Some(3));
        assert_eq!(find(b"abc", b"KEY="), None);
    }

    #[test]
    fn measures_this_process_and_thread() {
        let before = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(thread_cpu_ns() > before);
        assert!(process_times(std::process::id()).unwrap().0 > 0);
        assert!(!allowed_cpus().is_empty());
    }
}
