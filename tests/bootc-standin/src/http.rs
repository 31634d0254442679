//! The registry client's HTTP: the test infrastructure's one client
//! (`test_registry::http_client`, plain HTTP, loopback registries only), and base64 for
//! basic auth.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::general_purpose::STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
pub use test_registry::http_client::{Response as HttpResponse, request};

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
}
