//! A net for tests that prove nothing (not a proof that a test proves something). In
//! test code it finds:
//!
//! - an assertion of `contains("")`, which every string satisfies;
//! - a `return` in a `#[test]` function before any assertion, unless the statement it
//!   is in calls one of [`OPT_OUTS`] (the explicit, reported opt-outs);
//! - a `sleep` followed at once by a negative assertion (`assert!(!…)` or a `!` term,
//!   `assert_ne!`, `assert_eq!` of `0`, `false` or `None`, `is_none()`, `is_empty()`,
//!   `is_err()`): a "must not happen" held for a stretch of time, where it should wait
//!   for counted events.
//!
//! Test code: files under a `tests` directory, `tests.rs` and `*_tests.rs` files, and
//! any file with a `#[test]` or `#[tokio::test]` function.

use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

use crate::limits::Breach;

/// Calls that make an early return an explicit, reported opt-out: they return nothing
/// only when a developer has asked to skip (`BOOTC_SKIP_REAL=1`, `BOOTC_SKIP_IMAGE=1`),
/// and say so.
pub const OPT_OUTS: [&str; 4] = [
    "real_archive",
    "archive_for_test",
    "Fixture::",
    "podman_for_test",
];

/// Macros that assert.
const ASSERTS: [&str; 4] = ["assert", "assert_eq", "assert_ne", "assert_matches"];

/// What a negative assertion's tokens hold.
const NEGATIVE: [&str; 3] = ["is_none()", "is_empty()", "is_err()"];

/// Every `.rs` file under `root` that holds test code, skipping `target/` and hidden
/// directories; with its text.
pub fn test_files(root: &Path) -> std::io::Result<Vec<(PathBuf, String)>> {
    let mut out = Vec::new();
    for rel in crate::limits::rust_files(root)? {
        let text = std::fs::read_to_string(root.join(&rel))?;
        if crate::limits::is_test_path(&rel) || has_tests(&text) {
            out.push((rel, text));
        }
    }
    Ok(out)
}

fn has_tests(text: &str) -> bool {
    text.contains("#[test]") || text.contains("#[tokio::test")
}

/// Every finding under `root`; a file that does not parse is one too.
pub fn check(root: &Path) -> std::io::Result<Vec<Breach>> {
    Ok(crate::limits::check_each(test_files(root)?, check_text))
}

/// The findings in one test file's text.
pub fn check_text(file: &Path, text: &str) -> Result<Vec<Breach>, syn::Error> {
    let ast = syn::parse_file(text)?;
    let mut visitor = Guard {
        file,
        lines: text.lines().collect(),
        found: Vec::new(),
    };
    visitor.visit_file(&ast);
    Ok(visitor.found)
}

/// A token stream as text without spaces, for matching.
fn squeeze(tokens: &proc_macro2::TokenStream) -> String {
    tokens
        .to_string()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect()
}

fn macro_name(m: &syn::Macro) -> String {
    m.path
        .segments
        .last()
        .map(|s| s.ident.to_string())
        .unwrap_or_default()
}

fn is_assert(m: &syn::Macro) -> bool {
    ASSERTS.contains(&macro_name(m).as_str())
}

/// `assert!(!…)` (or a `!` term of it), `assert_ne!`, `assert_eq!` of `0`, `false` or
/// `None`, or an assertion of emptiness, absence or failure.
fn is_negative_assert(m: &syn::Macro) -> bool {
    let name = macro_name(m);
    let body = squeeze(&m.tokens);
    let negated = body.starts_with('!') || body.contains("&&!") || body.contains("||!");
    let second = body.split(',').nth(1).unwrap_or_default();
    name == "assert_ne"
        || (name == "assert" && negated)
        || (name == "assert_eq" && ["0", "false", "None"].contains(&second))
        || (is_assert(m) && NEGATIVE.iter().any(|n| body.contains(n)))
}

/// The macro a statement is, if it is one.
fn stmt_macro(stmt: &syn::Stmt) -> Option<&syn::Macro> {
    match stmt {
        syn::Stmt::Macro(m) => Some(&m.mac),
        syn::Stmt::Expr(syn::Expr::Macro(m), _) => Some(&m.mac),
        _ => None,
    }
}

/// The source lines `spanned` covers, without spaces.
fn source_of(lines: &[&str], spanned: &impl Spanned) -> String {
    let span = spanned.span();
    let (start, end) = (span.start().line.max(1), span.end().line);
    lines
        .get(start - 1..end.min(lines.len()))
        .unwrap_or_default()
        .concat()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect()
}

fn is_test_fn(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let path = a.path();
        path.is_ident("test") || path.segments.last().is_some_and(|s| s.ident == "test")
    })
}

struct Guard<'a> {
    file: &'a Path,
    lines: Vec<&'a str>,
    found: Vec<Breach>,
}

impl Guard<'_> {
    fn push(&mut self, line: usize, what: String) {
        self.found.push(Breach {
            file: self.file.to_path_buf(),
            line,
            what,
        });
    }

    /// The first `return` of a test function's own body before any assertion.
    fn early_return(&mut self, f: &syn::ItemFn) {
        let mut order = Order::default();
        for stmt in &f.block.stmts {
            order.visit_stmt(stmt);
            if let Some(line) = order.early_return.take() {
                let text = source_of(&self.lines, stmt);
                if !OPT_OUTS.iter().any(|o| text.contains(o)) {
                    let name = &f.sig.ident;
                    self.push(
                        line,
                        format!("test {name} returns before any assertion (not an opt-out)"),
                    );
                }
                return;
            }
            if order.asserted {
                return;
            }
        }
    }
}

impl<'ast> Visit<'ast> for Guard<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if is_test_fn(&f.attrs) {
            self.early_return(f);
        }
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_block(&mut self, b: &'ast syn::Block) {
        for pair in b.stmts.windows(2) {
            if sleeps(&pair[0]) && stmt_macro(&pair[1]).is_some_and(is_negative_assert) {
                let line = pair[1].span().start().line;
                self.push(
                    line,
                    "a negative assertion right after a sleep: wait for counted events".into(),
                );
            }
        }
        syn::visit::visit_block(self, b);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let hollow = format!("contains({:?})", "");
        if is_assert(m) && squeeze(&m.tokens).contains(&hollow) {
            self.push(
                m.span().start().line,
                format!("an assertion of {hollow}, which every string satisfies"),
            );
        }
        syn::visit::visit_macro(self, m);
    }
}

/// Whether a statement calls a function or method named `sleep` (outside closures).
fn sleeps(stmt: &syn::Stmt) -> bool {
    let mut finder = SleepFinder(false);
    finder.visit_stmt(stmt);
    finder.0
}

struct SleepFinder(bool);

impl<'ast> Visit<'ast> for SleepFinder {
    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func {
            self.0 |= p.path.segments.last().is_some_and(|s| s.ident == "sleep");
        }
        syn::visit::visit_expr_call(self, c);
    }

    fn visit_expr_method_call(&mut self, c: &'ast syn::ExprMethodCall) {
        self.0 |= c.method == "sleep";
        syn::visit::visit_expr_method_call(self, c);
    }

    fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}

    fn visit_expr_async(&mut self, _: &'ast syn::ExprAsync) {}
}

/// Walks a test body in source order: has an assertion been met, and a `return` of the
/// test itself (not of a closure or an async block) before one?
#[derive(Default)]
struct Order {
    asserted: bool,
    early_return: Option<usize>,
}

impl<'ast> Visit<'ast> for Order {
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if is_assert(m) {
            self.asserted = true;
        }
    }

    fn visit_expr_return(&mut self, r: &'ast syn::ExprReturn) {
        if !self.asserted && self.early_return.is_none() {
            self.early_return = Some(r.span().start().line);
        }
    }

    fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}

    fn visit_expr_async(&mut self, _: &'ast syn::ExprAsync) {}

    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

#[cfg(test)]
mod tests;
