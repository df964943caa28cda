//! Writing output files so that a reader never sees half a file: write a temporary file
//! beside the target, flush it to disk, then rename it over the target.
//!
//! The directory may be shared with other runs (two `batch` runs on one `--out`) or with
//! someone hostile (a volume others write to), so:
//! - the temporary file is `.NAME.tmp-R` with `R` 16 hex digits from the thread's
//!   OS-seeded generator, created with `O_CREAT | O_EXCL | O_NOFOLLOW`: a file or link
//!   already at that name is never opened (another name is drawn), so a link planted in
//!   the directory cannot redirect the write;
//! - its writer holds an exclusive `flock` on it until it is renamed or removed, and
//!   [`remove_if_abandoned`] removes a temporary only when it can take that lock: one a
//!   killed process left, never a live run's;
//! - a destination that is a symbolic link is refused (renaming over it would replace the
//!   link, writing through it would leave the directory): name its target instead. So
//!   `-o /dev/stdout` (a link) is refused; a device or named pipe named directly
//!   (`/dev/null`) is written in place.

use std::fs::{File, OpenOptions};
use std::io::{Error, ErrorKind, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// Names drawn for a temporary file before giving up (each is taken only by a collision).
const NAME_TRIES: usize = 16;

/// The temporary file being written, for [`on_interrupt`] (null when none, or when no
/// handler is installed); its name is leaked, so the handler never reads freed memory.
static WRITING: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Whether [`remove_temporary_on_interrupt`] installed its handler.
static ON_INTERRUPT: AtomicBool = AtomicBool::new(false);

/// Installs, for SIGINT and SIGTERM, a handler that removes the temporary file being
/// written ([`write_atomic`]), then dies of the signal as it would have (exit 130 or 143).
/// For commands that handle no signal themselves.
pub(super) fn remove_temporary_on_interrupt() {
    // SAFETY: installs an async-signal-safe handler (an atomic load, unlink, signal, raise).
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_interrupt as *const () as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGTERM,
            on_interrupt as *const () as libc::sighandler_t,
        );
    }
    ON_INTERRUPT.store(true, Ordering::SeqCst);
}

extern "C" fn on_interrupt(signal: libc::c_int) {
    let writing = WRITING.load(Ordering::SeqCst);
    // SAFETY: `writing` is null or a leaked, NUL-terminated name; unlink, signal and raise
    // are async-signal-safe.
    unsafe {
        if !writing.is_null() {
            libc::unlink(writing);
        }
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

/// Publishes `tmp` as the temporary file being written ([`on_interrupt`]); `None` clears it.
fn writing(tmp: Option<&Path>) {
    if !ON_INTERRUPT.load(Ordering::SeqCst) {
        return;
    }
    let name = tmp.and_then(|t| std::ffi::CString::new(t.as_os_str().as_bytes()).ok());
    let ptr = name.map_or(std::ptr::null_mut(), |n| n.into_raw());
    WRITING.store(ptr, Ordering::SeqCst);
}

/// Writes `bytes` to `path` atomically (temporary file + rename in the same directory).
///
/// A path that exists and is neither a regular file nor a directory (`/dev/null`, a named
/// pipe) is written in place: renaming over it would replace the device with a regular
/// file. A symbolic link is refused.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let existing = std::fs::symlink_metadata(path).ok();
    if let Some(meta) = &existing {
        if meta.file_type().is_symlink() {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "it is a symbolic link; output files are replaced by renaming, never written \
                 through a link: name the link's target instead",
            ));
        }
        if !meta.is_file() && !meta.is_dir() {
            return write_in_place(path, bytes);
        }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| Error::new(ErrorKind::InvalidInput, "the path names no file"))?;
    let (tmp, mut file) = create_temporary(dir, &temporary_prefix(&name.to_string_lossy()))?;
    writing(Some(&tmp));
    let result = (|| {
        // A file written again keeps its permissions (a file made private stays so).
        if let Some(meta) = existing.as_ref().filter(|m| m.is_file()) {
            file.set_permissions(meta.permissions())?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    writing(None);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The longest part of a file's name kept in its temporary files' names: with the dot,
/// `.tmp-` and 16 hex digits, a temporary name stays within the 255 bytes a name may have.
const TEMPORARY_NAME_BYTES: usize = 200;

/// The start of the names of `name`'s temporary files (`name` cut to
/// [`TEMPORARY_NAME_BYTES`] on a character boundary).
pub(super) fn temporary_prefix(name: &str) -> String {
    let mut end = name.len().min(TEMPORARY_NAME_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!(".{}.tmp-", &name[..end])
}

/// Writes `bytes` into the device or pipe at `path`. It is opened without waiting (a pipe
/// no process reads is an error at once, not a wait without end), then written in the
/// ordinary, blocking way.
fn write_in_place(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => Error::new(e.kind(), "it is a pipe that no process reads"),
            _ => e,
        })?;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl reads and sets the status flags of `fd`, which `file` owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) < 0 {
            return Err(Error::last_os_error());
        }
    }
    file.write_all(bytes)
}

/// Whether `name` is a temporary file's ([`temporary_prefix`] and 16 hex digits).
pub(super) fn is_temporary_name(name: &str) -> bool {
    let Some((start, suffix)) = name.rsplit_once(".tmp-") else {
        return false;
    };
    start.starts_with('.') && suffix.len() == 16 && suffix.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A new temporary file in `dir` named `prefix` and a random suffix, locked: created
/// exclusively, never through a link, and still under its name once the lock is held (a
/// sweep that removed it between its creation and the lock makes another one be drawn).
fn create_temporary(dir: &Path, prefix: &str) -> std::io::Result<(PathBuf, File)> {
    for _ in 0..NAME_TRIES {
        let tmp = dir.join(format!("{prefix}{:016x}", rand::random::<u64>()));
        let file = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        lock(&file, true)?;
        if names(&tmp, &file) {
            return Ok((tmp, file));
        }
    }
    Err(Error::new(
        ErrorKind::AlreadyExists,
        format!(
            "no free temporary name in {} after {NAME_TRIES} tries",
            dir.display()
        ),
    ))
}

/// Removes `path` when it is a temporary file that no process holds (its writer was
/// killed). Links, pipes, devices and files a live writer holds are left alone.
pub(super) fn remove_if_abandoned(path: &Path) {
    let Ok(file) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    else {
        return;
    };
    if file.metadata().is_ok_and(|m| m.is_file())
        && lock(&file, false).is_ok()
        && names(path, &file)
    {
        let _ = std::fs::remove_file(path);
    }
}

/// Takes the exclusive `flock` on `file`, waiting for it when `wait`; released when the
/// file is closed, or when its process dies.
fn lock(file: &File, wait: bool) -> std::io::Result<()> {
    let how = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    // SAFETY: flock reads no memory of ours; the descriptor is open for the call.
    if unsafe { libc::flock(file.as_raw_fd(), how) } == 0 {
        Ok(())
    } else {
        Err(Error::last_os_error())
    }
}

/// Whether `path` still names the file open as `file` (not removed or replaced).
fn names(path: &Path, file: &File) -> bool {
    match (std::fs::symlink_metadata(path), file.metadata()) {
        (Ok(at), Ok(open)) => at.dev() == open.dev() && at.ino() == open.ino(),
        _ => false,
    }
}

/// Refuses, before any work, an output that would destroy an input or cannot be written:
/// `output` naming the same file as one of `inputs` (the graph, a schedule), or in a
/// directory that does not exist.
pub(super) fn check_output(output: &Path, inputs: &[&Path]) -> Result<(), super::CliError> {
    if let Ok(out) = std::fs::metadata(output) {
        let same = |input: &&&Path| {
            std::fs::metadata(input).is_ok_and(|i| (i.dev(), i.ino()) == (out.dev(), out.ino()))
        };
        if let Some(input) = inputs.iter().find(same) {
            return Err(super::bad(format!(
                "the output {} is the input {}: writing it would destroy the input; name \
                 another file",
                output.display(),
                input.display()
            )));
        }
    }
    let dir = output.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir.filter(|d| !d.is_dir()) {
        let what = if dir.exists() {
            "is not a directory"
        } else {
            "does not exist"
        };
        return Err(super::bad(format!(
            "cannot write {}: {} {what}",
            output.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// [`write_atomic`], its failure a bad-input error naming the file.
pub(super) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), super::CliError> {
    write_atomic(path, bytes)
        .map_err(|e| super::bad(format!("cannot write {}: {e}", path.display())))
}

/// A command's answer: written as JSON to `output` when given, then printed as JSON or,
/// for people, by `table`.
pub(super) fn deliver<T: serde::Serialize>(
    value: &T,
    output: Option<&Path>,
    json: bool,
    table: impl FnOnce(&T),
) -> Result<(), super::CliError> {
    if let Some(path) = output {
        let text = serde_json::to_vec_pretty(value).expect("results serialise");
        write_file(path, &text)?;
    }
    if json {
        super::render::print_json(value);
    } else {
        table(value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{create_temporary, remove_if_abandoned, temporary_prefix, write_atomic};
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    use std::path::PathBuf;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("remat-output-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn regular_files_are_replaced_and_pipes_written_in_place() {
        let dir = scratch("pipe");
        let file = dir.join("out.json");
        write_atomic(&file, b"first").unwrap();
        write_atomic(&file, b"second").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"second");

        // A named pipe stands for /dev/null: opened for reading first (without blocking),
        // so that writing into it in place neither blocks nor needs a second thread.
        let fifo = dir.join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let mut reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        write_atomic(&fifo, b"through the pipe").unwrap();
        let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(kind.is_fifo(), "the named pipe was replaced: {kind:?}");
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        assert_eq!(text, "through the pipe");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 26, item 4: a link planted at the temporary name the writer used to take
    /// (`.NAME.tmp-PID`, predictable with PID 1 in a container) redirected the write to a
    /// file outside the directory. Every name the process could have used is planted here.
    #[test]
    fn a_link_planted_at_a_predictable_temporary_name_is_not_followed() {
        let dir = scratch("planted");
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let out = dir.join("out");
        std::fs::create_dir_all(&out).unwrap();
        for pid in [1, std::process::id()] {
            let link = out.join(format!(".summary.csv.tmp-{pid}"));
            std::os::unix::fs::symlink(&victim, link).unwrap();
        }
        write_atomic(&out.join("summary.csv"), b"rows").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let written = std::fs::symlink_metadata(out.join("summary.csv")).unwrap();
        assert!(written.is_file(), "{written:?}");
        assert_eq!(std::fs::read(out.join("summary.csv")).unwrap(), b"rows");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_destination_that_is_a_link_is_refused() {
        let dir = scratch("link");
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let link = dir.join("out.json");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = write_atomic(&link, b"new").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_temporaries_no_writer_holds_are_removed() {
        let dir = scratch("sweep");
        let prefix = temporary_prefix("r.json");
        let (held, file) = create_temporary(&dir, &prefix).unwrap();
        remove_if_abandoned(&held);
        assert!(held.exists(), "a live writer's temporary was removed");
        drop(file);
        remove_if_abandoned(&held);
        assert!(!held.exists(), "an abandoned temporary was kept");
        // A link with a temporary's name is neither followed nor removed.
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let link = dir.join(format!("{prefix}0123456789abcdef"));
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        remove_if_abandoned(&link);
        assert!(std::fs::symlink_metadata(&link).is_ok());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
