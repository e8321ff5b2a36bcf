//! The few Linux calls the file layer needs beyond `std`, each wrapped once with its
//! `// SAFETY:` reasoning: page-cache advice and residency (`posix_fadvise`,
//! `mincore`), flushing (`syncfs`, `sync_file_range`), dropping caches, a
//! no-echo passphrase prompt on the terminal, waiting for input with a timeout
//! (`poll`), unnamed files given a name only when whole (`O_TMPFILE`, `linkat`),
//! and which file system a path is on (a pure parser of `/proc/self/mountinfo`).

use cipherbench_model::file::Filesystem;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::Duration;

/// Opens an unnamed file in `dir` (`O_TMPFILE`): it has no name until
/// [`link_unnamed`] gives it one, and the kernel frees it when the last descriptor
/// closes, so a process killed while writing leaves nothing. `None` where the file
/// system does not support it.
pub fn open_unnamed(dir: &Path, mode: u32) -> io::Result<Option<File>> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .mode(mode)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
    {
        Ok(f) => Ok(Some(f)),
        // EOPNOTSUPP: the file system cannot; EISDIR/EINVAL: a kernel or libc
        // that does not know the flag.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Gives an unnamed file of [`open_unnamed`] the name `target`; fails with
/// `AlreadyExists` if that name exists. Through `/proc/self/fd` (any user), else
/// `AT_EMPTY_PATH` (needs `CAP_DAC_READ_SEARCH`).
pub fn link_unnamed(file: &File, target: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let target = CString::new(target.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("a path with a NUL byte"))?;
    let proc_path = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(|_| io::Error::other("a path with a NUL byte"))?;
    // SAFETY: both paths are NUL-terminated and live for the call; the fd is open.
    let r = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            proc_path.as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ENOENT) {
        return Err(e);
    }
    // No /proc: linkat on the descriptor itself.
    // SAFETY: an empty NUL-terminated path and the open fd, as AT_EMPTY_PATH asks.
    let r = unsafe {
        libc::linkat(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `posix_fadvise` advice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// Read-ahead aggressively: the file is read once from start to end.
    Sequential,
    /// Drop the file's clean pages from the page cache.
    DontNeed,
}

/// Advises the kernel about the whole of `file`.
pub fn fadvise(file: &File, advice: Advice) -> io::Result<()> {
    let advice = match advice {
        Advice::Sequential => libc::POSIX_FADV_SEQUENTIAL,
        Advice::DontNeed => libc::POSIX_FADV_DONTNEED,
    };
    // SAFETY: fadvise only reads its scalar arguments; the fd is open for the call.
    let r = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, advice) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Bytes of `path` that are in the page cache now (`mincore` over a mapping).
pub fn resident_bytes(path: &Path) -> io::Result<u64> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(0);
    }
    let len = usize::try_from(len).map_err(|_| io::Error::other("file too large to map"))?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    // SAFETY: a read-only shared mapping of an open file; we never dereference it,
    // only ask mincore about it, and unmap it below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let pages = len.div_ceil(page);
    let mut vec = vec![0u8; pages];
    // SAFETY: addr is a live mapping of len bytes; vec has one byte per page.
    let r = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    let err = io::Error::last_os_error();
    // SAFETY: unmapping exactly the mapping made above, once.
    unsafe { libc::munmap(addr, len) };
    if r != 0 {
        return Err(err);
    }
    let resident = vec.iter().filter(|&&b| b & 1 == 1).count() as u64;
    Ok((resident * page as u64).min(len as u64))
}

/// Writes out every dirty page of the file system holding `path` (`syncfs`).
pub fn syncfs(path: &Path) -> io::Result<()> {
    let f = File::open(path)?;
    // SAFETY: the fd is open for the duration of the call.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Starts (does not wait for) writeback of `len` bytes at `offset` of `file`.
pub fn start_writeback(file: &File, offset: u64, len: u64) -> io::Result<()> {
    // SAFETY: scalar arguments; the fd is open for the call.
    let r = unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            offset as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this process may drop the page cache (root, with /proc/sys writable).
pub fn can_drop_caches() -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/vm/drop_caches")
        .is_ok()
}

/// `sync; echo 1 > /proc/sys/vm/drop_caches`: the whole page cache (root only).
pub fn drop_caches() -> io::Result<()> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/vm/drop_caches")?
        .write_all(b"1\n")
}

/// The mount (from `/proc/self/mountinfo` text) holding `path`: the longest mount
/// point that is a prefix of it. `path` should be absolute and canonical.
pub fn filesystem_in(mountinfo: &str, path: &Path) -> Option<Filesystem> {
    let mut best: Option<Filesystem> = None;
    for line in mountinfo.lines() {
        // Fields: id parent major:minor root mount-point options [optional...] - type source super-options
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        if left.len() < 5 || right.len() < 2 {
            continue;
        }
        let mount_point = unescape_mount(left[4]);
        if !path.starts_with(&mount_point) {
            continue;
        }
        if best
            .as_ref()
            .is_some_and(|b| b.mount_point.len() > mount_point.len())
        {
            continue;
        }
        best = Some(Filesystem {
            mount_point,
            source: unescape_mount(right[1]),
            fs_type: right[0].to_string(),
        });
    }
    best
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mount(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            let octal = std::str::from_utf8(&bytes[i + 1..i + 4]).ok();
            if let Some(v) = octal.and_then(|o| u8::from_str_radix(o, 8).ok()) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The file system holding `path` on this machine.
pub fn filesystem_of(path: &Path) -> Option<Filesystem> {
    let canonical = path.canonicalize().ok()?;
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    filesystem_in(&text, &canonical)
}

/// Waits up to `timeout` for `fd` to have something to read (data, end of input
/// or an error, which the next `read` reports). Returns false on timeout or when a
/// signal cut the wait short, so the caller can ask whether to stop.
pub fn wait_readable(fd: std::os::fd::BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    use std::os::fd::AsRawFd as _;
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd for a descriptor the borrow keeps open.
    let ready = unsafe { libc::poll(&mut pfd, 1, millis) };
    if ready < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(ready > 0)
}

/// Reads a passphrase from the controlling terminal with echo off. Ctrl-C (through
/// [`crate::interrupt`]) stops the prompt, and the terminal is always restored.
pub fn prompt_passphrase(prompt: &str) -> anyhow::Result<Vec<u8>> {
    use anyhow::Context;
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .context("no terminal to ask for a passphrase on; use --passphrase-file or --key-file")?;
    let fd = tty.as_raw_fd();
    // SAFETY: termios is plain old data; tcgetattr fills it for an open tty fd.
    let mut saved: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: fd is an open terminal; saved is valid for writes.
    if unsafe { libc::tcgetattr(fd, &mut saved) } != 0 {
        return Err(io::Error::last_os_error()).context("reading the terminal's settings");
    }
    let mut quiet = saved;
    quiet.c_lflag &= !(libc::ECHO | libc::ECHONL);
    quiet.c_lflag |= libc::ICANON;
    // SAFETY: fd is an open terminal; quiet is a valid termios.
    if unsafe { libc::tcsetattr(fd, libc::TCSAFLUSH, &quiet) } != 0 {
        return Err(io::Error::last_os_error()).context("turning terminal echo off");
    }
    let result = (|| -> anyhow::Result<Vec<u8>> {
        tty.write_all(prompt.as_bytes())?;
        tty.flush()?;
        let mut line = Vec::new();
        loop {
            crate::interrupt::check()?;
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; the timeout lets us notice Ctrl-C.
            let ready =
                unsafe { libc::poll(&mut pfd, 1, Duration::from_millis(100).as_millis() as i32) };
            if ready <= 0 {
                continue;
            }
            let mut byte = [0u8; 1];
            match tty.read(&mut byte) {
                Ok(0) => break,
                Ok(_) if byte[0] == b'\n' => break,
                Ok(_) => line.push(byte[0]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(line)
    })();
    // SAFETY: restoring the settings read above on the same terminal.
    unsafe { libc::tcsetattr(fd, libc::TCSAFLUSH, &saved) };
    let _ = tty.write_all(b"\n");
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
23 22 0:21 / /proc rw,nosuid - proc proc rw
24 22 0:22 / /tmp rw shared:5 - tmpfs tmpfs rw,size=1024k
25 22 8:1 / /mnt/my\\040disk rw - xfs /dev/sdb1 rw
";

    #[test]
    fn finds_the_longest_matching_mount() {
        let fs = filesystem_in(MOUNTINFO, Path::new("/work/results/x")).unwrap();
        assert_eq!(
            (
                fs.mount_point.as_str(),
                fs.fs_type.as_str(),
                fs.source.as_str()
            ),
            ("/", "ext4", "/dev/vda")
        );
        let fs = filesystem_in(MOUNTINFO, Path::new("/tmp/cb")).unwrap();
        assert_eq!(fs.fs_type, "tmpfs");
        let fs = filesystem_in(MOUNTINFO, Path::new("/mnt/my disk/f")).unwrap();
        assert_eq!(
            (fs.mount_point.as_str(), fs.source.as_str()),
            ("/mnt/my disk", "/dev/sdb1")
        );
        // "/tmpfoo" is not under "/tmp".
        assert_eq!(
            filesystem_in(MOUNTINFO, Path::new("/tmpfoo"))
                .unwrap()
                .fs_type,
            "ext4"
        );
    }

    #[test]
    fn residency_follows_eviction() {
        let dir = std::env::temp_dir().join(format!("cb-resident-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        assert!(
            resident_bytes(&path).unwrap() > 0,
            "just written, so cached"
        );
        let f = File::open(&path).unwrap();
        f.sync_all().unwrap();
        fadvise(&f, Advice::DontNeed).unwrap();
        // tmpfs cannot evict (its pages are the file); anywhere else it drops.
        let fs = filesystem_of(&path).map(|f| f.fs_type).unwrap_or_default();
        if fs != "tmpfs" {
            assert!(
                resident_bytes(&path).unwrap() < 1 << 19,
                "still cached after DONTNEED"
            );
        }
        std::fs::write(dir.join("empty"), b"").unwrap();
        assert_eq!(resident_bytes(&dir.join("empty")).unwrap(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
