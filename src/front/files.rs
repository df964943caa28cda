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
}

/// The graph files named by `paths`, directories expanded, sorted, each once.
pub fn graph_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, GraphFilesError> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let found = json_files(path)?;
            if found.is_empty() {
                return Err(GraphFilesError::Empty(path.clone()));
            }
            files.extend(found);
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            return Err(GraphFilesError::Missing(path.clone()));
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// The regular `*.json` files directly in `dir`.
fn json_files(dir: &Path) -> Result<Vec<PathBuf>, GraphFilesError> {
    let entries = std::fs::read_dir(dir).map_err(|source| GraphFilesError::Unreadable {
        path: dir.to_path_buf(),
        source,
    })?;
    Ok(entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
        .collect())
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
