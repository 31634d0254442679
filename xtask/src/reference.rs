//! `docs/reference.md`: every metric, condition type and reason, Event reason, label,
//! annotation and finalizer, read from the code that defines them (their names, values
//! and doc comments), so that the page cannot drift from the code: `cargo xtask check`
//! fails when it is stale.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use syn::visit::Visit;

/// Where the page is written.
pub const REFERENCE: &str = "docs/reference.md";

/// A `pub const NAME: &str = "value";` with its doc comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrConst {
    pub name: String,
    pub value: String,
    pub doc: String,
}

/// A module's string constants: the module's own doc comment and its constants (the
/// file's top level is the module named "").
pub type Modules = BTreeMap<String, (String, Vec<StrConst>)>;

fn doc_of(attrs: &[syn::Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            lines.push(s.value().trim().to_owned());
        }
    }
    // Rustdoc links read as plain code on the page.
    lines.join(" ").trim().replace("[`", "`").replace("`]", "`")
}

fn collect(items: &[syn::Item], module: &str, out: &mut Modules) {
    for item in items {
        match item {
            syn::Item::Const(c) if matches!(c.vis, syn::Visibility::Public(_)) => {
                if let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) = &*c.expr
                {
                    out.entry(module.to_owned()).or_default().1.push(StrConst {
                        name: c.ident.to_string(),
                        value: s.value(),
                        doc: doc_of(&c.attrs),
                    });
                }
            }
            syn::Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    let name = m.ident.to_string();
                    out.entry(name.clone()).or_default().0 = doc_of(&m.attrs);
                    collect(inner, &name, out);
                }
            }
            _ => {}
        }
    }
}

/// The public string constants of a Rust source, by module.
pub fn str_consts(source: &str) -> Result<Modules, String> {
    let file = syn::parse_file(source).map_err(|e| e.to_string())?;
    let mut out = Modules::new();
    collect(&file.items, "", &mut out);
    Ok(out)
}

/// The metric families' help texts, from `register(name, help, …)` and
/// `register_with_unit(name, help, …)` calls: name → help.
pub fn metric_helps(source: &str) -> Result<BTreeMap<String, String>, String> {
    struct Calls(BTreeMap<String, String>);
    impl<'ast> Visit<'ast> for Calls {
        fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
            if call.method.to_string().starts_with("register") {
                let text = |e: Option<&syn::Expr>| match e {
                    Some(syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    })) => Some(s.value()),
                    _ => None,
                };
                let mut args = call.args.iter();
                if let (Some(name), Some(help)) = (text(args.next()), text(args.next())) {
                    self.0.insert(name, help);
                }
            }
            syn::visit::visit_expr_method_call(self, call);
        }
    }
    let file = syn::parse_file(source).map_err(|e| e.to_string())?;
    let mut calls = Calls(BTreeMap::new());
    calls.visit_file(&file);
    Ok(calls.0)
}

/// The family table in a module's doc comment (`//! | `name` | type | labels |`).
fn family_rows(source: &str) -> Vec<(String, String, String)> {
    source
        .lines()
        .filter_map(|l| l.strip_prefix("//! | `"))
        .filter_map(|l| {
            let (name, rest) = l.split_once('`')?;
            let cells: Vec<&str> = rest.split('|').map(str::trim).collect();
            Some((
                name.to_owned(),
                cells.get(1)?.to_string(),
                cells.get(2)?.to_string(),
            ))
        })
        .collect()
}

fn read(root: &Path, file: &str) -> Result<String, String> {
    std::fs::read_to_string(root.join(file)).map_err(|e| format!("cannot read {file}: {e}"))
}

fn metrics(root: &Path, page: &mut String) -> Result<(), String> {
    let file = "controller/src/metrics.rs";
    let source = read(root, file)?;
    let mut helps = metric_helps(&source)?;
    // Families registered by the module's submodules too.
    let dir = root.join("controller/src/metrics");
    let mut subs: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .filter(|p| !p.ends_with("tests.rs"))
        .collect();
    subs.sort();
    for sub in subs {
        let text = std::fs::read_to_string(&sub)
            .map_err(|e| format!("cannot read {}: {e}", sub.display()))?;
        helps.extend(metric_helps(&text)?);
    }
    let rows = family_rows(&source);
    if rows.is_empty() {
        return Err(format!("{file} has no family table"));
    }
    page.push_str("## Metrics\n\nServed by the controller on `/metrics` (OpenMetrics text).\n\n");
    page.push_str("| metric | type | labels | meaning |\n|---|---|---|---|\n");
    for (name, kind, labels) in rows {
        let help = helps
            .iter()
            .find(|(registered, _)| {
                let rest = name.strip_prefix(registered.as_str());
                matches!(rest, Some("" | "_total" | "_seconds"))
            })
            .map(|(_, help)| help.clone())
            .ok_or_else(|| format!("{file}: `{name}` is in the family table but not registered"))?;
        let _ = writeln!(page, "| `{name}` | {kind} | {labels} | {help} |");
    }
    page.push('\n');
    Ok(())
}

fn table(page: &mut String, heading: &str, consts: &[StrConst]) {
    let _ = writeln!(page, "{heading}\n\n| value | meaning |\n|---|---|");
    for c in consts {
        let _ = writeln!(page, "| `{}` | {} |", c.value, c.doc);
    }
    page.push('\n');
}

fn conditions(root: &Path, page: &mut String) -> Result<(), String> {
    let file = "crds/src/conditions.rs";
    let modules = str_consts(&read(root, file)?)?;
    page.push_str("## Conditions\n\n");
    let types = modules.get("").map(|m| m.1.clone()).unwrap_or_default();
    table(page, "### Condition types", &types);
    for (module, (doc, consts)) in &modules {
        if module.is_empty() || consts.is_empty() {
            continue;
        }
        let title = if doc.is_empty() {
            module.clone()
        } else {
            doc.clone()
        };
        table(page, &format!("### {title}"), consts);
    }
    Ok(())
}

/// Constants that name a label, an annotation or a finalizer: by what their name ends
/// with.
fn metadata_keys(root: &Path, files: &[&str]) -> Result<Vec<(String, StrConst)>, String> {
    let mut keys = Vec::new();
    for file in files {
        for (_, (_, consts)) in str_consts(&read(root, file)?)? {
            for c in consts {
                let kind = if c.name.ends_with("_LABEL") {
                    "label"
                } else if c.name.ends_with("_ANNOTATION") {
                    "annotation"
                } else if c.name.ends_with("FINALIZER") {
                    "finalizer"
                } else {
                    continue;
                };
                keys.push((kind.to_owned(), c));
            }
        }
    }
    keys.sort_by(|a, b| (&a.0, &a.1.value).cmp(&(&b.0, &b.1.value)));
    Ok(keys)
}

/// The page, from the sources under `root`.
pub fn render(root: &Path) -> Result<String, String> {
    let mut page = String::from(
        "<!-- Generated by `cargo xtask gen` from the code; do not edit. -->\n\n\
         # Reference\n\n\
         Every metric, condition, Event reason, label, annotation and finalizer of\n\
         bootc-pool, as the code defines them.\n\n",
    );
    metrics(root, &mut page)?;
    conditions(root, &mut page)?;
    let events = str_consts(&read(root, "controller/src/plan/actions.rs")?)?;
    let events = events
        .get("events")
        .map(|m| m.1.clone())
        .unwrap_or_default();
    if events.is_empty() {
        return Err("controller/src/plan/actions.rs has no `events` module".to_owned());
    }
    page.push_str("## Event reasons\n\nRecorded by the controller (events.k8s.io/v1) on the pool, and those about one node also on its Node.\n\n");
    table(&mut page, "### Reasons", &events);
    let files = [
        "crds/src/lib.rs",
        "controller/src/plan/mod.rs",
        "controller/src/plan/slots.rs",
        "controller/src/secrets.rs",
        "controller/src/drain/pods.rs",
        "controller/src/resolve.rs",
    ];
    page.push_str(
        "## Labels, annotations and finalizers\n\n| kind | key | meaning |\n|---|---|---|\n",
    );
    for (kind, c) in metadata_keys(root, &files)? {
        let _ = writeln!(page, "| {kind} | `{}` | {} |", c.value, c.doc);
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_and_their_docs_are_read_by_module() {
        let source = r#"
            /// Top.
            pub const A: &str = "a";
            const PRIVATE: &str = "p";
            /// The b module.
            pub mod b {
                /// First line
                /// second line.
                pub const B_LABEL: &str = "x/b";
                pub const LIST: [&str; 1] = ["no"];
            }
        "#;
        let modules = str_consts(source).unwrap();
        assert_eq!(
            modules[""].1,
            [StrConst {
                name: "A".into(),
                value: "a".into(),
                doc: "Top.".into()
            }]
        );
        assert_eq!(modules["b"].0, "The b module.");
        assert_eq!(modules["b"].1.len(), 1);
        assert_eq!(modules["b"].1[0].doc, "First line second line.");
    }

    #[test]
    fn helps_come_from_register_calls() {
        let source = r#"
            fn f(r: &mut Registry) {
                r.register("m_total_less", "Help one", x);
                r.register_with_unit("m_duration", "Help two", Unit::Seconds, y);
                r.other("no", "no");
            }
        "#;
        let helps = metric_helps(source).unwrap();
        assert_eq!(helps.len(), 2);
        assert_eq!(helps["m_duration"], "Help two");
    }
}
