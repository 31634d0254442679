use super::*;

#[test]
fn matches_unanchored_like_go() {
    assert_eq!(is_match("b+", "abbbc"), Ok(true));
    assert_eq!(is_match("^b+$", "abbbc"), Ok(false));
    assert_eq!(
        is_match("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "my-pool"),
        Ok(true)
    );
    assert_eq!(
        is_match("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "My-pool"),
        Ok(false)
    );
}

#[test]
fn perl_classes_are_ascii_only() {
    // Arabic-Indic digits are \d in the regex crate but not in RE2.
    assert_eq!(is_match(r"^\d+$", "\u{661}\u{662}"), Ok(false));
    assert_eq!(is_match(r"^\d+$", "12"), Ok(true));
    assert_eq!(is_match(r"^[\d.]+$", "1.2"), Ok(true));
    assert_eq!(is_match(r"^\w+$", "é"), Ok(false));
    assert_eq!(is_match(r"^[^\W]+$", "ab_9"), Ok(true));
    assert_eq!(is_match(r"^\S+\s\S+$", "a b"), Ok(true));
    assert_eq!(is_match(r"^\bé", "é"), Ok(false));
}

#[test]
fn go_literal_syntax() {
    assert_eq!(is_match(r"^\Qa.b\E$", "a.b"), Ok(true));
    assert_eq!(is_match(r"^\Qa.b\E$", "axb"), Ok(false));
    assert_eq!(is_match("^[[]$", "["), Ok(true));
    assert_eq!(is_match("^[]a]+$", "]a"), Ok(true));
    assert_eq!(is_match("^[a&&b]+$", "&"), Ok(true));
    assert_eq!(is_match("^[[:alpha:]]+$", "abc"), Ok(true));
    assert_eq!(is_match("^[[:alpha:]]+$", "ab1"), Ok(false));
}

#[test]
fn bad_pattern_is_an_error_every_time() {
    assert!(is_match("(", "x").is_err());
    assert!(is_match("(", "y").is_err());
    assert!(is_match("\\", "y").is_err());
}
