//! The test infrastructure's one HTTP/1.1 client: plain HTTP, one request per connection
//! (`Connection: close`), with timeouts, a body cap, and chunked bodies decoded. Tests
//! talk to the registry through [`http`] and [`http_with_body`]; the bootc stand-in's
//! registry client uses [`request`].

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::base64;

/// Largest response read (manifests, configs and metrics are small).
const MAX_RESPONSE: u64 = 64 * 1024 * 1024;
/// The timeout of [`http`] and [`http_with_body`].
const TIMEOUT: Duration = Duration::from_secs(10);

/// One HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Header names (lowercased) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// A request to `host` (`127.0.0.1:PORT`) with optional basic auth, for tests that talk
/// to the registry (or another loopback server) directly.
pub fn http(
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    basic: Option<(&str, &str)>,
) -> io::Result<Response> {
    http_with_body(host, method, path, headers, basic, &[])
}

/// Like [`http`], with a request body.
pub fn http_with_body(
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    basic: Option<(&str, &str)>,
    body: &[u8],
) -> io::Result<Response> {
    let mut all: Vec<(&str, String)> = headers.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
    if let Some((u, p)) = basic {
        let auth = format!("Basic {}", base64(format!("{u}:{p}").as_bytes()));
        all.push(("Authorization", auth));
    }
    request(method, host, path, &all, body, TIMEOUT)
}

/// Sends one request to `authority` (`host:port`, port 80 when none) and reads the whole
/// response, each step within `timeout`. A body (or a PUT or POST) gets its
/// `Content-Length`.
pub fn request(
    method: &str,
    authority: &str,
    path_and_query: &str,
    headers: &[(&str, String)],
    body: &[u8],
    timeout: Duration,
) -> io::Result<Response> {
    let target = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let mut last_err = io::Error::new(io::ErrorKind::NotFound, "no address");
    let mut stream = None;
    for addr in target.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last_err = e,
        }
    }
    let mut stream = stream.ok_or(last_err)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut req =
        format!("{method} {path_and_query} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "PUT" || method == "POST" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()?;
    let mut raw = Vec::new();
    stream.take(MAX_RESPONSE).read_to_end(&mut raw)?;
    parse_response(&raw, method == "HEAD")
}

fn parse_response(raw: &[u8], head_only: bool) -> io::Result<Response> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("incomplete HTTP response head"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| bad("HTTP head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("bad HTTP status line {status_line:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut resp = Response {
        status,
        headers,
        body: Vec::new(),
    };
    let rest = &raw[end + 4..];
    if head_only || status == 204 || status == 304 {
        return Ok(resp);
    }
    if resp
        .header("transfer-encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"))
    {
        resp.body = dechunk(rest)?;
    } else if let Some(len) = resp.header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| bad(format!("bad Content-Length {len:?}")))?;
        if rest.len() < len {
            return Err(bad(format!(
                "HTTP body cut short: {} of {len} bytes",
                rest.len()
            )));
        }
        resp.body = rest[..len].to_vec();
    } else {
        resp.body = rest.to_vec();
    }
    Ok(resp)
}

fn dechunk(mut data: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| bad("bad chunked encoding"))?;
        let size_text =
            std::str::from_utf8(&data[..line_end]).map_err(|_| bad("bad chunk size"))?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| bad("bad chunk size"))?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            return Err(bad("chunked body cut short"));
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chunked_and_sized_bodies() {
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!(r.body, b"abcde");
        let r = parse_response(
            b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\nWWW-Authenticate: Basic realm=\"x\"\r\n\r\nhi",
            false,
        )
        .unwrap();
        assert_eq!(r.status, 401);
        assert_eq!(r.body, b"hi");
        assert_eq!(r.header("www-authenticate"), Some("Basic realm=\"x\""));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab", false).is_err());
    }
}
