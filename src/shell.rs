//! What the two shells, `cli` and `service`, share that is no part of the front door: the
//! process's shutdown signal, the message of a caught panic, and lines on standard error.
//! Neither knows a solver or a graph.

/// Resolves on SIGTERM or Ctrl-C with the signal's number (`remat batch` exits 128 + it; `remat
/// serve` drains and stops); a signal that cannot be watched is never awaited.
pub async fn shutdown_signal() -> i32 {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => libc::SIGINT,
        () = term => libc::SIGTERM,
    }
}

/// The message of a panic payload (`&str` or `String`), else a placeholder.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".into())
}

/// Writes `line` and a newline to standard error. A standard error that cannot be written
/// (`2>/dev/full`, a closed pipe) loses the line and nothing else: `eprintln!` would panic,
/// and the process would exit 101 instead of the code that says how the command ended.
pub fn to_stderr(line: std::fmt::Arguments) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
