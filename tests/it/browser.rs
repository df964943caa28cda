//! The page at `GET /` in a real browser: headless Chromium (Debian's `chromium` and
//! `chromium-driver`, installed by scripts/deps.sh) driven over chromedriver's WebDriver
//! protocol (plain HTTP and JSON, spoken with the tests' own client) against a real
//! `remat serve` on loopback.
//!
//! The test loads a malformed file (the error text is shown), a bundled graph (inspect's
//! figures), solves below the minimum feasible budget (the error text), then at a real
//! budget (the result's figures, the timeline and the stage matrices), runs the trade-off
//! sweep (its curve), and saves a screenshot to `target/browser-screenshot.png`. It needs
//! Chromium and chromedriver, so it is ignored; CI runs it (`cargo test -- --ignored
//! chromium_`), and it fails where they are missing.

use crate::common;
use crate::server;

use serde_json::{json, Value};
use server::Process;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The element reference key of the WebDriver protocol.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

fn which(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

/// One HTTP/1.1 exchange with a JSON body, reading the answer by its `Content-Length`
/// (chromedriver says `Connection: close` and keeps the socket open).
fn http(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut length = 0;
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap();
            }
        }
    }
    let mut bytes = vec![0; length];
    reader.read_exact(&mut bytes).unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

/// A WebDriver session on a chromedriver process.
struct Browser {
    driver: std::process::Child,
    addr: SocketAddr,
    session: String,
}

impl Browser {
    fn start(chromium: &std::path::Path, chromedriver: &std::path::Path) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = std::process::Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let start = Instant::now();
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut browser = Browser {
            driver,
            addr,
            session: String::new(),
        };
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.to_str().unwrap(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,3000"]
            }
        }}});
        let reply = browser.call("POST", "/session", Some(caps));
        browser.session = reply["sessionId"].as_str().unwrap().to_string();
        browser
    }

    /// A WebDriver command; returns its `value`, failing on a WebDriver error.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = http(self.addr, method, path, body.as_ref());
        assert_eq!(status, 200, "{method} {path}: {v}");
        v["value"].clone()
    }

    fn command(&self, method: &str, what: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{what}", self.session);
        self.call(method, &path, body)
    }

    fn run(&self, script: &str) -> Value {
        self.command(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }

    fn element(&self, css: &str) -> String {
        let e = self.command(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        e[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {e}"))
            .to_string()
    }

    fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css);
        if !css.contains("file") {
            self.command("POST", &format!("/element/{id}/clear"), Some(json!({})));
        }
        self.command(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({ "text": text })),
        );
    }

    fn click(&self, css: &str) {
        let id = self.element(css);
        self.command("POST", &format!("/element/{id}/click"), Some(json!({})));
    }

    /// Waits until `expression` (JavaScript) is truthy; returns its value.
    fn wait(&self, expression: &str, limit: Duration) -> Value {
        let start = Instant::now();
        loop {
            let v = self.run(&format!("return ({expression});"));
            if !(v.is_null() || v == false || v == "") {
                return v;
            }
            if start.elapsed() > limit {
                let error = self.run("return document.getElementById('error').textContent");
                panic!("timed out waiting for {expression}; the page's error box says: {error}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn error_text(&self) -> String {
        let v = self
            .wait(
                "!document.getElementById('error').hidden && document.getElementById('error').textContent",
                Duration::from_secs(30),
            )
            ;
        v.as_str().unwrap().to_string()
    }

    fn screenshot(&self, path: &std::path::Path) {
        let data = self.command("GET", "/screenshot", None);
        std::fs::write(path, decode_base64(data.as_str().unwrap())).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn decode_base64(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in text
        .bytes()
        .filter(|&c| c != b'=' && !c.is_ascii_whitespace())
    {
        let v = ALPHABET.iter().position(|&a| a == c).expect("base64") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

#[test]
#[ignore = "needs chromium and chromedriver: cargo test -- --ignored chromium_ (CI runs it)"]
fn chromium_the_page_loads_a_graph_solves_and_draws_the_three_pictures() {
    let chromium = which(&["chromium", "chromium-browser", "google-chrome"]);
    let driver = which(&["chromedriver"]);
    let (Some(chromium), Some(driver)) = (chromium, driver) else {
        panic!(
            "chromium or chromedriver is missing (apt-get install chromium chromium-driver, \
             or bash scripts/deps.sh)"
        );
    };
    let (server, _) = Process::start(env!("CARGO_BIN_EXE_remat"), &[], None);
    let browser = Browser::start(&chromium, &driver);
    let url = format!("http://{}/", server.addr);
    browser.command("POST", "/url", Some(json!({ "url": url })));
    browser.wait(
        "document.getElementById('solver').options.length > 5",
        Duration::from_secs(10),
    );

    // A malformed file: its error text, and the page goes on.
    let dir = std::env::temp_dir().join(format!("remat-browser-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("broken.json");
    std::fs::write(&bad, "{\"nodes\": [").unwrap();
    browser.type_into("#file", bad.to_str().unwrap());
    let error = browser.error_text();
    assert!(error.contains("broken.json is not JSON"), "{error}");

    // A bundled graph: inspect's figures.
    let graph = common::root().join("graphs/tiny-residual.json");
    browser.type_into("#file", graph.to_str().unwrap());
    browser.wait(
        "document.getElementById('figures').textContent.includes('minimum feasible budget')",
        Duration::from_secs(10),
    );
    assert_eq!(
        browser.run("return document.getElementById('error').hidden"),
        true
    );

    // A budget below the minimum: the answer's text, and the page goes on.
    browser.type_into("#budget", "1000");
    browser.click("#solve");
    let error = browser.error_text();
    assert!(
        error.contains("no schedule fits") && error.contains("1000"),
        "{error}"
    );

    // A real budget: the result's figures, the timeline and the matrices.
    browser.type_into("#budget", "92%");
    browser.click("#solve");
    browser.wait(
        "document.querySelector('#stages svg') && document.querySelector('#timeline svg')",
        Duration::from_secs(60),
    );
    let figures = browser.run("return document.getElementById('result-figures').textContent");
    let figures = figures.as_str().unwrap();
    assert!(
        figures.contains("total cost") && figures.contains("peak memory"),
        "{figures}"
    );
    assert_eq!(
        browser.run("return document.getElementById('error').hidden"),
        true
    );
    let peak = browser
        .run("return document.querySelector('#timeline svg').getAttribute('data-peak-node')");
    assert!(peak.as_str().is_some_and(|p| !p.is_empty()), "{peak}");
    let href = browser
        .run("return document.getElementById('download').hidden ? '' : document.getElementById('download').href")
        ;
    assert!(href.as_str().unwrap().starts_with("blob:"), "{href}");

    // The trade-off curve, as a job the page polls.
    browser.click("#tradeoff");
    let points = browser
        .wait("document.querySelector('#tradeoff-svg svg') && document.querySelector('#tradeoff-svg svg').getAttribute('data-points')", Duration::from_secs(120))
        ;
    assert!(
        points.as_str().unwrap().parse::<usize>().unwrap() > 0,
        "{points}"
    );
    assert_eq!(
        browser.run("return document.getElementById('error').hidden"),
        true
    );

    let shot = common::root().join("target/browser-screenshot.png");
    browser.screenshot(&shot);
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    browser.command("DELETE", "", None);
    std::fs::remove_dir_all(&dir).unwrap();
    eprintln!("screenshot: {}", shot.display());
}
