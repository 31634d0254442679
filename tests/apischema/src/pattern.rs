//! The `pattern` keyword: Go RE2 patterns run on the `regex` crate, compiled once per thread and pattern.

use std::cell::RefCell;
use std::collections::HashMap;
use std::iter::Peekable;
use std::str::Chars;

use regex::{Regex, RegexBuilder};

/// Compiled patterns kept per thread; cleared when it grows past this many.
const CACHE_LIMIT: usize = 1024;

/// Upper bound on the compiled size of one pattern, so a hostile schema makes
/// an error rather than exhausting memory.
const SIZE_LIMIT: usize = 1 << 20;

/// Patterns compiled, or why they do not compile, by pattern text.
pub(crate) type Compiled = RefCell<HashMap<String, Result<Regex, String>>>;

thread_local! {
    static CACHE: Compiled = RefCell::new(HashMap::new());
}

/// `then` of `pattern` compiled by `compile`, each pattern compiled once per thread in
/// `cache` (cleared when it grows past [`CACHE_LIMIT`]).
pub(crate) fn with_compiled<T>(
    cache: &'static std::thread::LocalKey<Compiled>,
    pattern: &str,
    compile: impl FnOnce(&str) -> Result<Regex, String>,
    then: impl FnOnce(&Result<Regex, String>) -> T,
) -> T {
    cache.with(|cache| {
        let mut cache = cache.borrow_mut();
        if !cache.contains_key(pattern) {
            if cache.len() >= CACHE_LIMIT {
                cache.clear();
            }
            let compiled = compile(pattern);
            cache.insert(pattern.to_owned(), compiled);
        }
        match cache.get(pattern) {
            Some(compiled) => then(compiled),
            None => then(&Err("pattern cache lost the pattern".to_owned())),
        }
    })
}

/// Whether `text` contains a match of the Go regular expression `pattern`
/// (unanchored, like Go's `regexp.MatchString`). `Err` carries why the
/// pattern does not compile.
pub(crate) fn is_match(pattern: &str, text: &str) -> Result<bool, String> {
    let compile = |pattern: &str| {
        RegexBuilder::new(&translate(pattern))
            .size_limit(SIZE_LIMIT)
            .build()
            .map_err(|e| e.to_string())
    };
    with_compiled(&CACHE, pattern, compile, |compiled| match compiled {
        Ok(re) => Ok(re.is_match(text)),
        Err(e) => Err(e.clone()),
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
            '\\' => translate_escape(&mut chars, in_class, &mut out),
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

/// Translates the escape after a backslash (see [`translate`]); a trailing
/// backslash is copied as it is.
fn translate_escape(chars: &mut Peekable<Chars<'_>>, in_class: bool, out: &mut String) {
    let Some(next) = chars.next() else {
        out.push('\\');
        return;
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

#[cfg(test)]
mod tests;
