//! `GET /`: one self-contained page (HTML, CSS and JavaScript embedded in the binary, no
//! build step, nothing fetched from elsewhere) over the API: drop a graph file, read
//! `inspect`'s figures, pick a budget, solve, see the timeline, the stage matrices and
//! the trade-off curve (`POST /v1/plot/*`), download the schedule. API errors are shown
//! as their problem document's text; the page stays usable after them.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use std::sync::LazyLock;

/// The page, its style and script put in place once.
static PAGE: LazyLock<String> = LazyLock::new(|| {
    include_str!("index.html")
        .replace("/*STYLE*/", include_str!("style.css"))
        .replace("/*SCRIPT*/", include_str!("app.js"))
});

/// `GET /`.
pub async fn page() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                     img-src data: blob:; connect-src 'self'; frame-ancestors 'none'",
                ),
            ),
            // No other site may frame the page (clickjacking), nor a browser sniff a type.
            (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        PAGE.as_str(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_embeds_its_style_and_script() {
        let page = super::PAGE.as_str();
        assert!(!page.contains("/*STYLE*/") && !page.contains("/*SCRIPT*/"));
        assert!(page.contains("function solve()") && page.contains("#drop"));
        assert!(
            !page.contains("http://") && !page.contains("https://"),
            "nothing external"
        );
    }
}
