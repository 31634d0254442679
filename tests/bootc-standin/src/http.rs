//! A tiny HTTP/1.1 client over `std::net::TcpStream` (plain HTTP, loopback registries
//! only), and base64 for basic auth.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::general_purpose::STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// Largest response body read (manifests and configs are small).
const MAX_BODY: u64 = 64 * 1024 * 1024;

/// One HTTP response.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Header names (lowercased) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl HttpResponse {
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

/// Sends one request to `authority` (`host:port`) and reads the whole response
/// (`Connection: close`).
pub fn request(
    method: &str,
    authority: &str,
    path_and_query: &str,
    headers: &[(&str, String)],
    timeout: Duration,
) -> io::Result<HttpResponse> {
    let target = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let addrs: Vec<_> = target.to_socket_addrs()?.collect();
    let mut last_err = io::Error::new(io::ErrorKind::NotFound, "no address");
    let mut stream = None;
    for addr in addrs {
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
    let mut req = format!(
        "{method} {path_and_query} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: bootc-standin\r\nConnection: close\r\n"
    );
    for (k, v) in headers {
        req.push_str(k);
        req.push_str(": ");
        req.push_str(v);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes())?;
    stream.flush()?;
    let mut raw = Vec::new();
    stream.take(MAX_BODY).read_to_end(&mut raw)?;
    parse_response(&raw, method == "HEAD")
}

fn parse_response(raw: &[u8], head_only: bool) -> io::Result<HttpResponse> {
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
    let mut resp = HttpResponse {
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

/// Standard base64 with padding.
pub fn base64_encode(input: &[u8]) -> String {
    STANDARD.encode(input)
}

/// Padding optional: decoding stops at the first `=`.
const PADDING_OPTIONAL: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// Decodes standard base64 (padding optional, white space ignored); `None` on a bad
/// character.
pub fn base64_decode(input: &str) -> Option<Vec<u8>> {
    let text: String = input
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .take_while(|c| *c != '=')
        .collect();
    PADDING_OPTIONAL.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trip() {
        for (plain, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("user:pass", "dXNlcjpwYXNz"),
        ] {
            assert_eq!(base64_encode(plain.as_bytes()), enc);
            assert_eq!(base64_decode(enc).unwrap(), plain.as_bytes());
        }
        assert!(base64_decode("a*b").is_none());
    }

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
