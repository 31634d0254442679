//! The size limits every non-test source file keeps: a file at most [`MAX_FILE_LINES`]
//! lines, a function at most [`MAX_FN_LINES`] lines and [`MAX_FN_ARGS`] arguments
//! (`self` not counted). Test code — `tests/` directories of a crate, `tests.rs` module
//! files and items under `#[cfg(test)]` — is left out: a table of cases may be long.

use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

/// Most lines in one non-test source file.
pub const MAX_FILE_LINES: usize = 600;
/// Most lines in one function, signature and body.
pub const MAX_FN_LINES: usize = 80;
/// Most arguments of one function, `self` not counted.
pub const MAX_FN_ARGS: usize = 6;

/// One place that breaks a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach {
    /// The file, relative to the root that was checked.
    pub file: PathBuf,
    /// The first line of what breaks the limit (1 for a whole file).
    pub line: usize,
    /// What is too large, and by how much.
    pub what: String,
}

impl std::fmt::Display for Breach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.what)
    }
}

/// Whether a path (relative to the root) holds test code only.
pub fn is_test_path(path: &Path) -> bool {
    let parts: Vec<&str> = path.iter().filter_map(|p| p.to_str()).collect();
    let Some((file, dirs)) = parts.split_last() else {
        return false;
    };
    if *file == "tests.rs" || file.ends_with("_tests.rs") {
        return true;
    }
    // `CRATE/tests/…` (integration tests), `…/src/…/tests/…` (test modules in a folder),
    // and the fuzz and bench harnesses; the crates that live under the top-level `tests/`
    // folder are test infrastructure with sources of their own, which do count.
    let src = dirs.iter().position(|d| *d == "src");
    match src {
        Some(i) => dirs[i..].contains(&"tests"),
        None => dirs
            .iter()
            .skip(1)
            .any(|d| *d == "tests" || *d == "benches"),
    }
}

/// Every `.rs` file under `root` that the limits apply to, skipping `target/` and hidden
/// directories.
pub fn source_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = rust_files(root)?;
    files.retain(|f| !is_test_path(f));
    Ok(files)
}

/// Every `.rs` file under `root`, relative to it and sorted, skipping `target/` and hidden
/// directories.
pub fn rust_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The breaches in one file's text.
pub fn check_text(file: &Path, text: &str) -> Result<Vec<Breach>, syn::Error> {
    let mut breaches = Vec::new();
    let lines = text.lines().count();
    if lines > MAX_FILE_LINES {
        breaches.push(Breach {
            file: file.to_path_buf(),
            line: 1,
            what: format!("file has {lines} lines (limit {MAX_FILE_LINES})"),
        });
    }
    let ast = syn::parse_file(text)?;
    let mut visitor = FnVisitor {
        file,
        breaches: &mut breaches,
    };
    visitor.visit_file(&ast);
    Ok(breaches)
}

/// Every breach under `root`; files that do not parse are reported as breaches too.
pub fn check(root: &Path) -> std::io::Result<Vec<Breach>> {
    let mut files = Vec::new();
    for file in source_files(root)? {
        let text = std::fs::read_to_string(root.join(&file))?;
        files.push((file, text));
    }
    Ok(check_each(files, check_text))
}

/// What `check_text` finds in each `(file, text)`; a file that does not parse is a
/// breach too.
pub fn check_each(
    files: Vec<(PathBuf, String)>,
    check_text: fn(&Path, &str) -> Result<Vec<Breach>, syn::Error>,
) -> Vec<Breach> {
    let mut breaches = Vec::new();
    for (file, text) in files {
        match check_text(&file, &text) {
            Ok(found) => breaches.extend(found),
            Err(e) => breaches.push(Breach {
                line: e.span().start().line,
                file,
                what: format!("does not parse: {e}"),
            }),
        }
    }
    breaches
}

struct FnVisitor<'a> {
    file: &'a Path,
    breaches: &'a mut Vec<Breach>,
}

impl FnVisitor<'_> {
    fn function(&mut self, name: &syn::Ident, sig: &syn::Signature, span: proc_macro2::Span) {
        let (start, end) = (span.start().line, span.end().line);
        let lines = end + 1 - start;
        if lines > MAX_FN_LINES {
            self.breaches.push(Breach {
                file: self.file.to_path_buf(),
                line: start,
                what: format!("fn {name} has {lines} lines (limit {MAX_FN_LINES})"),
            });
        }
        let args = sig
            .inputs
            .iter()
            .filter(|a| matches!(a, syn::FnArg::Typed(_)))
            .count();
        if args > MAX_FN_ARGS {
            self.breaches.push(Breach {
                file: self.file.to_path_buf(),
                line: start,
                what: format!("fn {name} has {args} arguments (limit {MAX_FN_ARGS})"),
            });
        }
    }
}

/// Whether attributes mark test-only code (`#[cfg(test)]`, `#[test]`, `#[tokio::test]`).
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let path = a.path();
        if path.is_ident("test") || path.segments.last().is_some_and(|s| s.ident == "test") {
            return true;
        }
        path.is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

impl<'ast> Visit<'ast> for FnVisitor<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test_only(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test_only(&f.attrs) {
            self.function(&f.sig.ident, &f.sig, f.span());
            syn::visit::visit_item_fn(self, f);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            self.function(&f.sig.ident, &f.sig, f.span());
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if f.default.is_some() && !is_test_only(&f.attrs) {
            self.function(&f.sig.ident, &f.sig, f.span());
        }
        syn::visit::visit_trait_item_fn(self, f);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if !is_test_only(&i.attrs) {
            syn::visit::visit_item_impl(self, i);
        }
    }
}

#[cfg(test)]
mod tests;
