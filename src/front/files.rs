//! The graph files a list of paths names, for `remat batch` and `remat bench`: files as
//! given, directories expanded to the `*.json` files they hold; the whole list sorted and
//! without repeats, so the same arguments always give the same graphs in the same order.

use std::path::{Path, PathBuf};

/// A path that names no graph file.
#[derive(Debug, thiserror::Error)]
pub enum GraphFilesError {
    #[error("{}: no such file or directory", .0.display())]
    Missing(PathBuf),
    #[error("cannot read {}: {source}", .path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} holds no .json graph", .0.display())]
    Empty(PathBuf),
    /// A pipe, a device or a socket: graph files are read again when a run resumes.
    #[error("{} is not a regular file (a pipe or a device): name a graph file", .0.display())]
    NotAFile(PathBuf),
}

/// The graph files named by `paths`, directories expanded, sorted, each once (one file
/// named by two paths, `d/g.json` and `./d/g.json`, is read once). A `*.json` entry of a
/// directory that is not a readable regular file (a broken link, a loop of links, a pipe)
/// is an error naming it, not skipped unseen.
pub fn graph_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, GraphFilesError> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let found = json_files(path)?;
            if found.is_empty() {
                return Err(GraphFilesError::Empty(path.clone()));
            }
            files.extend(found);
        } else {
            files.push(graph_file(path)?);
        }
    }
    files.sort();
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(std::fs::canonicalize(f).unwrap_or_else(|_| f.clone())));
    Ok(files)
}

/// `path` when it is a regular file, else why it is not a graph file.
fn graph_file(path: &Path) -> Result<PathBuf, GraphFilesError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => Ok(path.to_path_buf()),
        Ok(_) => Err(GraphFilesError::NotAFile(path.to_path_buf())),
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && std::fs::symlink_metadata(path).is_err() =>
        {
            Err(GraphFilesError::Missing(path.to_path_buf()))
        }
        Err(source) => Err(GraphFilesError::Unreadable {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The `*.json` entries directly in `dir`, each a regular file ([`graph_file`]).
fn json_files(dir: &Path) -> Result<Vec<PathBuf>, GraphFilesError> {
    let entries = std::fs::read_dir(dir).map_err(|source| GraphFilesError::Unreadable {
        path: dir.to_path_buf(),
        source,
    })?;
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json") && !p.is_dir())
        .map(|p| graph_file(&p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_expand_sorted_and_repeats_go() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("graphs");
        let tiny = dir.join("tiny-residual.json");
        let all = graph_files(std::slice::from_ref(&dir)).unwrap();
        assert!(all.windows(2).all(|w| w[0] < w[1]) && all.contains(&tiny));
        assert_eq!(graph_files(&[tiny.clone(), dir.clone()]).unwrap(), all);
        assert!(matches!(
            graph_files(&[dir.join("nope.json")]),
            Err(GraphFilesError::Missing(_))
        ));
        let empty = std::env::temp_dir().join(format!("remat-files-{}", std::process::id()));
        std::fs::create_dir_all(&empty).unwrap();
        let e = graph_files(std::slice::from_ref(&empty)).unwrap_err();
        assert!(e.to_string().ends_with("holds no .json graph"), "{e}");
        std::fs::remove_dir_all(&empty).unwrap();
    }
}
