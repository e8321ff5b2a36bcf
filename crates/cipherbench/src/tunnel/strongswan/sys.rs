//! The system calls of `cipherbench __charon`, the few lines between `ip netns exec`
//! and charon: a private mount namespace with the run's own directory over `/run`
//! (charon's pid file is compiled in as `/var/run/charon.pid`, so two charons, or
//! ours and a system one, would otherwise refuse each other and write a
//! system-wide file), and the process's CPU affinity, which charon's threads
//! inherit. The only `unsafe` of the strongSwan stack.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn check(ret: libc::c_int, what: &str) -> io::Result<()> {
    if ret < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(())
}

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

/// Moves the calling process into a new mount namespace whose mounts do not
/// propagate back, and binds `dir` over `/run` there. Only this process and what
/// it executes see the change; the host's `/run` is untouched.
pub fn private_run_dir(dir: &Path) -> io::Result<()> {
    let source = c_path(dir)?;
    let run = c_path(Path::new("/run"))?;
    let root = c_path(Path::new("/"))?;
    check(
        // SAFETY: unshare takes flags only and affects the calling process.
        unsafe { libc::unshare(libc::CLONE_NEWNS) },
        "unshare(CLONE_NEWNS)",
    )?;
    check(
        // SAFETY: valid NUL-terminated paths live across the calls; null source, type
        // and data are allowed for a propagation change and for a bind mount's type
        // and data.
        unsafe {
            libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        },
        "making / private",
    )?;
    check(
        // SAFETY: as above: both paths are valid NUL-terminated strings alive across
        // the call, and a bind mount allows a null type and data.
        unsafe {
            libc::mount(
                source.as_ptr(),
                run.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            )
        },
        "binding the run directory over /run",
    )
}

/// Restricts the calling process (and the threads it will start) to `cpus`.
pub fn set_affinity(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    // SAFETY: cpu_set_t is plain data (all-zero is the empty set); CPU_SET
    // bounds-checks against the set's size; sched_setaffinity with pid 0 reads the
    // set for the call only.
    let ret = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    check(ret, "sched_setaffinity")
}
