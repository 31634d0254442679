//! The `pattern` keyword: Go RE2 patterns run on the `regex` crate, compiled once per thread and pattern.

use std::cell::RefCell;
use std::collections::HashMap;

use regex::{Regex, RegexBuilder};

/// Compiled patterns kept per thread; cleared when it grows past this many.
const CACHE_LIMIT: usize = 1024;

/// Upper bound on the compiled size of one pattern, so a hostile schema makes
/// an error rather than exhausting memory.
const SIZE_LIMIT: usize = 1 << 20;

thread_local! {
    static CACHE: RefCell<HashMap<String, Result<Regex, String>>> = RefCell::new(HashMap::new());
}

/// Whether `text` contains a match of the Go regular expression `pattern`
/// (unanchored, like Go's `regexp.MatchString`). `Err` carries why the
/// pattern does not compile.
pub(crate) fn is_match(pattern: &str, text: &str) -> Result<bool, String> {
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if !cache.contains_key(pattern) {
            if cache.len() >= CACHE_LIMIT {
                cache.clear();
            }
            let compiled = RegexBuilder::new(&translate(pattern))
                .size_limit(SIZE_LIMIT)
                .build()
                .map_err(|e| e.to_string());
            cache.insert(pattern.to_owned(), compiled);
        }
        match cache.get(pattern) {
            Some(Ok(re)) => Ok(re.is_match(text)),
            Some(Err(e)) => Err(e.clone()),
            None => Err("pattern cache lost the pattern".to_owned()),
        }
    })
}

/// ASCII-only replacements of the Perl classes, which RE2 defines over ASCII
/// while the `regex` crate defines them over Unicode: (outside a class, inside one).
fn perl_class(c: char) -> Option<(&'static str, &'static str)> {
    Some(match c {
        'd' => ("[0-9]", "0-9"),
        'D' => ("[^0-9]", "[^0-9]"),
        'w' => ("[0-9A-Za-z_]", "0-9A-Za-z_"),
        'W' => ("[^0-9A-Za-z_]", "[^0-9A-Za-z_]"),
        's' => (r"[\t\n\x0C\r ]", r"\t\n\x0C\r "),
        'S' => (r"[^\t\n\x0C\r ]", r"[^\t\n\x0C\r ]"),
        _ => return None,
    })
}

/// Rewrites the RE2 constructs whose meaning differs in the `regex` crate:
/// `\d \w \s` (and negations) become ASCII classes, `\b \B` ASCII word
/// boundaries, `\Q...\E` an escaped literal, and inside a character class a
/// literal `[`, `&` or `~` (set syntax in the `regex` crate) gets escaped.
fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    // Inside `[...]`: `class_start` while `]` would still be a literal.
    let mut in_class = false;
    let mut class_start = false;
    while let Some(c) = chars.next() {
        let was_class_start = class_start;
        class_start = false;
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push('\\');
                    break;
                };
                if let Some((outside, inside)) = perl_class(next) {
                    out.push_str(if in_class { inside } else { outside });
                } else if (next == 'b' || next == 'B') && !in_class {
                    out.push_str(if next == 'b' {
                        r"(?-u:\b)"
                    } else {
                        r"(?-u:\B)"
                    });
                } else if next == 'Q' && !in_class {
                    let mut literal = String::new();
                    while let Some(q) = chars.next() {
                        if q == '\\' && chars.peek() == Some(&'E') {
                            chars.next();
                            break;
                        }
                        literal.push(q);
                    }
                    out.push_str(&regex::escape(&literal));
                } else {
                    out.push('\\');
                    out.push(next);
                }
            }
            '[' if !in_class => {
                in_class = true;
                class_start = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
            }
            '[' if in_class => {
                if chars.peek() == Some(&':') {
                    // A POSIX class `[:alpha:]`: copy through its closing `:]`.
                    out.push('[');
                    let mut prev = '[';
                    for p in chars.by_ref() {
                        out.push(p);
                        if prev == ':' && p == ']' {
                            break;
                        }
                        prev = p;
                    }
                } else {
                    out.push_str(r"\[");
                }
            }
            ']' if in_class && !was_class_start => {
                in_class = false;
                out.push(']');
            }
            ']' if in_class => out.push_str(r"\]"),
            '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
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
}
