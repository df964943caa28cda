//! `remat probe`: the health check of a container whose image has no HTTP client (a
//! Kubernetes exec probe, a Docker `HEALTHCHECK`): `GET PATH` from the server at `--addr`
//! (`REMAT_ADDR`, as `serve` reads it, so that the check follows the server's address
//! inside its container) over a plain TCP stream, the whole exchange within `--timeout`.
//! Exit 0 on a 2xx answer; 1 when the server refuses, does not answer in time or answers
//! another status, with one line on stderr saying which; 2 for bad arguments.
//!
//! An unspecified address (`0.0.0.0:8080`, `[::]:8080`) is probed on the loopback address of
//! its family: a server listening on every address listens there too.

use super::args::ProbeArgs;
use super::{bad, CliError};
use std::io::{Error, ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The longest status line read: `HTTP/1.1 200 OK` and any reason phrase fit.
const MAX_STATUS_LINE: usize = 1024;

pub(super) fn run(args: &ProbeArgs) -> Result<i32, CliError> {
    let path = &args.path;
    if !path.starts_with('/') || path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(bad(format!(
            "PATH: expected a path such as /healthz (starting with '/', no spaces), got '{path}'"
        )));
    }
    let addr = dialled(args.addr);
    match status(addr, path, Duration::from_secs_f64(args.timeout)) {
        Ok(code) if (200..300).contains(&code) => Ok(0),
        Ok(code) => {
            crate::shell::to_stderr(format_args!("probe: GET {path} at {addr}: status {code}"));
            Ok(1)
        }
        Err(e) => {
            crate::shell::to_stderr(format_args!("probe: GET {path} at {addr}: {e}"));
            Ok(1)
        }
    }
}

/// The address to connect to for a server listening on `addr`.
fn dialled(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

/// The status code of `GET path` at `addr`, all within `limit`.
fn status(addr: SocketAddr, path: &str, limit: Duration) -> std::io::Result<u16> {
    let deadline = Instant::now() + limit;
    let late = || {
        Error::new(
            ErrorKind::TimedOut,
            format!("no answer within {} s", limit.as_secs_f64()),
        )
    };
    let left = || {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(late())
        } else {
            Ok(left)
        }
    };
    let mut stream = TcpStream::connect_timeout(&addr, left()?)?;
    stream.set_write_timeout(Some(left()?))?;
    stream.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    let mut head = Vec::new();
    let mut chunk = [0u8; 256];
    while !head.contains(&b'\n') && head.len() < MAX_STATUS_LINE {
        stream.set_read_timeout(Some(left()?))?;
        let n = stream.read(&mut chunk).map_err(|e| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => late(),
            _ => e,
        })?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let line = line.lines().next().unwrap_or_default();
    let code: Option<u16> = match line.split(' ').collect::<Vec<_>>()[..] {
        [version, code, ..] if version.starts_with("HTTP/") => code.parse().ok(),
        _ => None,
    };
    code.ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidData,
            format!("not an HTTP answer: '{}'", line.escape_debug()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::dialled;

    #[test]
    fn unspecified_addresses_are_probed_on_loopback() {
        for (listen, dial) in [
            ("0.0.0.0:8080", "127.0.0.1:8080"),
            ("[::]:9", "[::1]:9"),
            ("10.1.2.3:80", "10.1.2.3:80"),
        ] {
            assert_eq!(dialled(listen.parse().unwrap()).to_string(), dial);
        }
    }
}
