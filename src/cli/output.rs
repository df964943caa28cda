//! Writing output files so that a reader never sees half a file: write a temporary file
//! beside the target, flush it to disk, then rename it over the target.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically (temporary file + rename in the same directory).
///
/// A path that exists and is not a regular file (`/dev/null`, `/dev/stdout`, a named pipe)
/// is written in place: renaming over it would replace the device with a regular file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Ok(meta) = std::fs::metadata(path) {
        if !meta.is_file() && !meta.is_dir() {
            return std::fs::OpenOptions::new()
                .write(true)
                .open(path)?
                .write_all(bytes);
        }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
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
    use super::write_atomic;
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

    #[test]
    fn regular_files_are_replaced_and_pipes_written_in_place() {
        let dir = std::env::temp_dir().join(format!("remat-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
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
}
