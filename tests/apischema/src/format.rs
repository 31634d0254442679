//! String `format`s checked like kube-openapi's `strfmt` registry.

use std::net::IpAddr;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// Whether `value` is valid for the string format `format`; `None` when the
/// format is not one this crate checks (kube-apiserver ignores unknown
/// formats too). Names are compared like `strfmt` does: case- and
/// dash-insensitive, so `date-time` and `datetime` are the same format.
pub(crate) fn check(format: &str, value: &str) -> Option<bool> {
    let name: String = format
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect();
    Some(match name.as_str() {
        "datetime" => is_date_time(value),
        "date" => is_date(value),
        "uuid" => is_uuid(value),
        "byte" => is_base64(value),
        "ipv4" => value.parse::<IpAddr>().is_ok() && value.contains('.'),
        "ipv6" => value.parse::<IpAddr>().is_ok() && value.contains(':'),
        "cidr" => is_cidr(value),
        _ => return None,
    })
}

/// `strfmt.IsDateTime`: a full date, `t`/`T`, `hh:mm:ss`, optional fraction,
/// `Z` or a `±hh:mm` offset.
fn is_date_time(value: &str) -> bool {
    if value.len() < 4 {
        return false;
    }
    let lower = value.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    is_date(date) && is_time(time)
}

/// The time part of `strfmt.IsDateTime`:
/// `^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$`
/// with hours up to 23 and minutes and seconds up to 59.
fn is_time(time: &str) -> bool {
    let b = time.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let (Some(h), Some(m), Some(s)) = (
        two_digits(&b[0..2]),
        two_digits(&b[3..5]),
        two_digits(&b[6..8]),
    ) else {
        return false;
    };
    if h > 23 || m > 59 || s > 59 {
        return false;
    }
    let mut rest = &time[8..];
    // `(.[0-9]+)?`: any one character, then digits.
    if let Some(c) = rest
        .chars()
        .next()
        .filter(|c| !matches!(c, 'z' | '+' | '-'))
    {
        let after = &rest[c.len_utf8()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        rest = &after[digits..];
    }
    match rest.as_bytes() {
        [b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit()),
        _ => false,
    }
}

fn two_digits(b: &[u8]) -> Option<u32> {
    match b {
        [a, b] if a.is_ascii_digit() && b.is_ascii_digit() => {
            Some(u32::from(a - b'0') * 10 + u32::from(b - b'0'))
        }
        _ => None,
    }
}

/// Go's `time.Parse("2006-01-02", value)`: a real calendar date.
fn is_date(value: &str) -> bool {
    let b = value.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let s = value.get(r)?;
        if s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse().ok()
        } else {
            None
        }
    };
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// `strfmt.IsUUID`: 32 hex digits, optionally grouped 8-4-4-4-12 by dashes.
fn is_uuid(value: &str) -> bool {
    let groups = [8, 4, 4, 4, 12];
    let mut rest = value;
    for (i, len) in groups.iter().enumerate() {
        let Some(group) = rest.get(..*len) else {
            return false;
        };
        if !group.bytes().all(|c| c.is_ascii_hexdigit()) {
            return false;
        }
        rest = &rest[*len..];
        if i + 1 < groups.len() {
            rest = rest.strip_prefix('-').unwrap_or(rest);
        }
    }
    rest.is_empty()
}

/// Go's `base64.StdEncoding.DecodeString` succeeds (it skips `\r` and `\n`).
/// Standard base64 with padding, as kube-openapi checks `format: byte` (line breaks
/// ignored; bits after the last whole byte need not be zero).
pub(crate) const BYTE: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

/// The same alphabet with padding optional, as Go decodes `format: byte` strings.
pub(crate) const BYTE_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

fn is_base64(value: &str) -> bool {
    let data: String = value.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    BYTE.decode(data).is_ok()
}

/// Go's `net.ParseCIDR`: an IP address, `/`, a prefix length that fits it.
fn is_cidr(value: &str) -> bool {
    let Some((ip, bits)) = value.split_once('/') else {
        return false;
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    if bits.is_empty() || bits.len() > 3 || !bits.bytes().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let max = if ip.is_ipv4() { 32 } else { 128 };
    bits.parse::<u32>().is_ok_and(|b| b <= max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_time() {
        for good in [
            "2024-02-29T10:00:00Z",
            "2024-01-01t23:59:59.123456z",
            "2024-01-01T00:00:00+02:00",
            "2024-01-01T00:00:00.5-07:30",
        ] {
            assert_eq!(check("date-time", good), Some(true), "{good}");
        }
        for bad in [
            "2023-02-29T10:00:00Z",
            "2024-01-01",
            "2024-01-01T24:00:00Z",
            "2024-01-01T10:00:00",
            "2024-01-01T10:00Z",
            "2024-01-01T10:00:00.Z",
            "yesterday",
            "",
        ] {
            assert_eq!(check("date-time", bad), Some(false), "{bad}");
        }
        assert_eq!(check("datetime", "2024-01-01T00:00:00Z"), Some(true));
    }

    #[test]
    fn date() {
        assert_eq!(check("date", "2000-02-29"), Some(true));
        assert_eq!(check("date", "1900-02-29"), Some(false));
        assert_eq!(check("date", "2024-13-01"), Some(false));
        assert_eq!(check("date", "2024-1-01"), Some(false));
    }

    #[test]
    fn uuid() {
        assert_eq!(
            check("uuid", "123e4567-e89b-12d3-a456-426614174000"),
            Some(true)
        );
        assert_eq!(
            check("uuid", "123E4567E89B12D3A456426614174000"),
            Some(true)
        );
        assert_eq!(
            check("uuid", "123e4567-e89b-12d3-a456-42661417400"),
            Some(false)
        );
        assert_eq!(
            check("uuid", "g23e4567-e89b-12d3-a456-426614174000"),
            Some(false)
        );
    }

    #[test]
    fn byte() {
        assert_eq!(check("byte", "aGVsbG8="), Some(true));
        assert_eq!(check("byte", ""), Some(true));
        assert_eq!(check("byte", "aGVsbG8"), Some(false));
        assert_eq!(check("byte", "a==="), Some(false));
        assert_eq!(check("byte", "aGV*bG8="), Some(false));
    }

    #[test]
    fn ips_and_cidrs() {
        assert_eq!(check("ipv4", "10.0.0.1"), Some(true));
        assert_eq!(check("ipv4", "::1"), Some(false));
        assert_eq!(check("ipv4", "10.0.0.256"), Some(false));
        assert_eq!(check("ipv6", "fe80::1"), Some(true));
        assert_eq!(check("ipv6", "10.0.0.1"), Some(false));
        assert_eq!(check("cidr", "10.0.0.0/8"), Some(true));
        assert_eq!(check("cidr", "fd00::/64"), Some(true));
        assert_eq!(check("cidr", "10.0.0.0/33"), Some(false));
        assert_eq!(check("cidr", "10.0.0.0"), Some(false));
    }

    #[test]
    fn unknown_formats_are_not_checked() {
        assert_eq!(check("hostname-ish", "anything"), None);
        assert_eq!(check("int32", "anything"), None);
    }
}
