//! Which requests the service reads at all, against a hostile web page in the browser of
//! someone who runs the service (a page can send requests to a loopback address: a
//! cross-origin `no-cors` POST of a `text/plain` body needs no CORS preflight, and a page
//! whose name is rebound by DNS to the service's address can read the answers too).
//!
//! - A POST must carry `Content-Type: application/json` (415 otherwise). A page can send
//!   that header to another origin only after a CORS preflight, which the service grants
//!   to no origin but those configured. Its body is read as sent: a `Content-Encoding`
//!   other than `identity` is 415 too.
//! - `Host` (HTTP/2: the authority) must name the address the server listens on (any IP
//!   address when that is unspecified, `0.0.0.0`), `localhost` when it listens on a
//!   loopback or unspecified address, or a name of `--allowed-host` (`*`: any); 403
//!   otherwise. A rebinding page's requests carry its own name. A request without one
//!   (HTTP/1.0) passes: browsers always send it.
//! - A request with an `Origin` must come from the server's own origin (`http://` or
//!   `https://` and its `Host`: the page at `/` calls the API that way) or from one of
//!   `--allowed-origin` (`*`: any), which also get CORS headers; 403 otherwise. Clients that
//!   are not browsers (curl, the Python client) send no `Origin`.
//!
//! Ports are not compared: the address a client dials may be forwarded to another port.

use super::problem::{ApiProblem, Kind};
use super::{AppState, Config};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The hosts and origins a server accepts, from its settings and the address it listens on.
#[derive(Clone, Debug)]
pub(super) struct Guard {
    addr: SocketAddr,
    /// `--allowed-host`, lower case, without a trailing dot; `None`: any (`*`).
    hosts: Option<Vec<String>>,
    /// `--allowed-origin`, lower case; `None`: any (`*`).
    origins: Option<Vec<String>>,
}

/// `None` when the list holds `*` (anything goes), else the list in lower case.
fn list(items: &[String], trim: &[char]) -> Option<Vec<String>> {
    let items: Vec<String> = items
        .iter()
        .map(|s| s.trim().trim_end_matches(trim).to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    (!items.iter().any(|s| s == "*")).then_some(items)
}

impl Guard {
    pub fn new(config: &Config) -> Guard {
        Guard {
            addr: config.addr,
            hosts: list(&config.allowed_hosts, &['.']),
            origins: list(&config.allowed_origins, &['/']),
        }
    }

    /// CORS headers for the configured origins (none when no origin is configured).
    pub fn cors(&self) -> CorsLayer {
        let origins = match &self.origins {
            None => AllowOrigin::any(),
            Some(list) => AllowOrigin::list(
                list.iter()
                    .filter_map(|o| HeaderValue::from_str(o).ok())
                    .collect::<Vec<_>>(),
            ),
        };
        CorsLayer::new()
            .allow_origin(origins)
            .allow_methods([Method::GET, Method::POST, Method::DELETE])
            .allow_headers([header::CONTENT_TYPE])
    }

    /// Whether `host` (a `Host` header: name or address, with or without a port) names
    /// this server.
    fn host_allowed(&self, host: &str) -> bool {
        let name = without_port(host)
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let ip = self.addr.ip();
        let listed = self
            .hosts
            .as_ref()
            .is_none_or(|hosts| hosts.contains(&name));
        let own = match name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            Ok(asked) => asked == ip || ip.is_unspecified(),
            Err(_) => name == "localhost" && (ip.is_loopback() || ip.is_unspecified()),
        };
        own || listed
    }

    /// Whether a request from `origin` with `host` in its `Host` header is answered.
    fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        let origin = origin.trim().to_ascii_lowercase();
        let own = host.is_some_and(|h| {
            let h = h.to_ascii_lowercase();
            origin == format!("http://{h}") || origin == format!("https://{h}")
        });
        own || self
            .origins
            .as_ref()
            .is_none_or(|list| list.contains(&origin))
    }

    /// The problem that refuses `req`, if any.
    fn check(&self, req: &Request) -> Option<ApiProblem> {
        let headers = req.headers();
        let text = |name| {
            headers
                .get(name)
                .map(|v: &HeaderValue| v.to_str().unwrap_or("\u{fffd}"))
        };
        let host = text(header::HOST).or_else(|| req.uri().authority().map(|a| a.as_str()));
        if let Some(host) = host.filter(|h| !self.host_allowed(h)) {
            return Some(ApiProblem::new(
                Kind::Forbidden,
                format!(
                    "the Host header names '{host}', not this server ({}); another name is \
                     answered when given to --allowed-host (REMAT_ALLOWED_HOSTS)",
                    self.addr
                ),
            ));
        }
        if let Some(origin) = text(header::ORIGIN).filter(|o| !self.origin_allowed(o, host)) {
            return Some(ApiProblem::new(
                Kind::Forbidden,
                format!(
                    "a cross-origin request (Origin '{origin}') is refused: this server \
                     answers its own page and the origins given to --allowed-origin \
                     (REMAT_ALLOWED_ORIGINS)"
                ),
            ));
        }
        if req.method() == Method::POST {
            let media = text(header::CONTENT_TYPE);
            let json = media.is_some_and(|m| {
                m.split(';')
                    .next()
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
            });
            if !json {
                return Some(ApiProblem::new(
                    Kind::UnsupportedMediaType,
                    format!(
                        "the body must be JSON sent with 'Content-Type: application/json'; \
                         got {}",
                        media.map_or("no Content-Type".to_string(), |m| format!("'{m}'"))
                    ),
                ));
            }
            // Bodies are read as sent: a compressed one would be "malformed JSON".
            let coding = text(header::CONTENT_ENCODING);
            if let Some(coding) = coding.filter(|c| !c.trim().eq_ignore_ascii_case("identity")) {
                return Some(ApiProblem::new(
                    Kind::UnsupportedMediaType,
                    format!("the body must be sent uncompressed; got 'Content-Encoding: {coding}'"),
                ));
            }
        }
        None
    }
}

/// `host` without its port: `[::1]:8080` -> `[::1]`, `example.org:80` -> `example.org`.
fn without_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// Refuses the requests [`Guard`] does not admit with a problem document.
pub(super) async fn admit(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    match state.guard.check(&req) {
        Some(problem) => problem.into_response(),
        None => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(addr: &str, hosts: &[&str]) -> Guard {
        Guard::new(&Config {
            addr: addr.parse().unwrap(),
            allowed_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ..Config::default()
        })
    }

    #[test]
    fn hosts_name_the_bound_address_localhost_or_an_allowed_name() {
        let loopback = guard("127.0.0.1:8080", &["Remat.Internal."]);
        for ok in [
            "127.0.0.1",
            "127.0.0.1:9999",
            "localhost",
            "LOCALHOST:8080",
            "remat.internal:80",
        ] {
            assert!(loopback.host_allowed(ok), "{ok}");
        }
        for refused in [
            "evil.example",
            "evil.example:8080",
            "10.0.0.1",
            "[::1]:8080",
            "localhost.evil",
        ] {
            assert!(!loopback.host_allowed(refused), "{refused}");
        }
        let any_ip = guard("0.0.0.0:8080", &[]);
        assert!(any_ip.host_allowed("10.1.2.3:8080") && any_ip.host_allowed("localhost"));
        assert!(!any_ip.host_allowed("rebound.example"));
        let v6 = guard("[::1]:8080", &[]);
        assert!(v6.host_allowed("[::1]:8080") && !v6.host_allowed("127.0.0.1"));
        assert!(guard("127.0.0.1:8080", &["*"]).host_allowed("anything.example"));
    }

    #[test]
    fn origins_are_the_servers_own_or_allowed_ones() {
        let g = Guard::new(&Config {
            allowed_origins: vec!["https://app.example/".into()],
            ..Config::default()
        });
        let host = Some("127.0.0.1:8080");
        assert!(g.origin_allowed("http://127.0.0.1:8080", host));
        assert!(g.origin_allowed("https://app.example", host));
        for refused in [
            "http://evil.example",
            "null",
            "http://127.0.0.1:9090",
            "http://127.0.0.1",
        ] {
            assert!(!g.origin_allowed(refused, host), "{refused}");
        }
        assert!(!g.origin_allowed("http://127.0.0.1:8080", None));
    }
}
