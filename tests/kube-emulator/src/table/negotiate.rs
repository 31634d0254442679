//! Content negotiation: whether an `Accept` header asks for a `Table`, and whether it can be served at all.

use super::TableVersion;

/// Whether an `Accept` header asks for a `Table`, negotiated as kube-apiserver does for a resource endpoint: media
/// ranges by descending `q` (ties keep their order, wildcards after concrete types), and the first one the server can
/// serve (JSON or YAML, optionally as a meta.k8s.io v1/v1beta1 `Table` or `PartialObjectMetadata`) wins.
///
/// `None` means plain objects: a plain media type won, or nothing acceptable was offered (kube-apiserver would answer
/// 406 Not Acceptable then; see [`accept_is_satisfiable`]).
pub fn wants_table(accept: Option<&str>) -> Option<TableVersion> {
    match negotiate(accept) {
        Some(Negotiated::Table(version)) => Some(version),
        _ => None,
    }
}

/// Whether kube-apiserver could answer a resource request with this `Accept` header in JSON or YAML (a missing or
/// empty header accepts anything).
pub fn accept_is_satisfiable(accept: Option<&str>) -> bool {
    negotiate(accept).is_some()
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Negotiated {
    Plain,
    Table(TableVersion),
}

/// One media range of an `Accept` header.
#[derive(Debug)]
struct Clause {
    q: f64,
    kind: String,
    subtype: String,
    params: Vec<(String, String)>,
}

fn negotiate(accept: Option<&str>) -> Option<Negotiated> {
    let header = accept.map(str::trim).unwrap_or("");
    if header.is_empty() {
        return Some(Negotiated::Plain);
    }
    clauses(header).iter().find_map(outcome)
}

/// The media ranges of a non-empty `Accept` header, in the order they are tried.
fn clauses(header: &str) -> Vec<Clause> {
    let mut clauses: Vec<Clause> = Vec::new();
    for part in header.split(',') {
        let mut pieces = part.split(';');
        let media = pieces.next().unwrap_or("").trim().to_ascii_lowercase();
        let (kind, subtype) = match media.split_once('/') {
            Some((k, s)) => (k.trim().to_string(), s.trim().to_string()),
            None if media == "*" => ("*".to_string(), "*".to_string()),
            None => continue,
        };
        let mut q = 1.0;
        let mut params = Vec::new();
        for param in pieces {
            let Some((k, v)) = param.split_once('=') else {
                continue;
            };
            let k = k.trim().to_string();
            let v = v.trim().trim_matches('"').to_string();
            if k == "q" {
                q = v.parse().unwrap_or(0.0);
            } else {
                params.push((k, v));
            }
        }
        clauses.push(Clause {
            q,
            kind,
            subtype,
            params,
        });
    }
    // goautoneg: higher q first; at equal q, concrete types before wildcards.
    clauses.sort_by(|a, b| {
        b.q.partial_cmp(&a.q)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then((a.kind == "*").cmp(&(b.kind == "*")))
            .then((a.subtype == "*").cmp(&(b.subtype == "*")))
    });
    clauses
}

/// What the server answers a media range with, or `None` when it cannot serve it (the next one is tried).
fn outcome(clause: &Clause) -> Option<Negotiated> {
    if clause.q <= 0.0 {
        return None;
    }
    let servable = match (clause.kind.as_str(), clause.subtype.as_str()) {
        ("*", "*") | ("application", "*") => true,
        ("application", sub) => sub == "json" || sub == "yaml",
        _ => false,
    };
    if !servable {
        return None;
    }
    let (mut as_kind, mut group, mut version) = (None, None, None);
    let mut converts = false;
    for (k, v) in &clause.params {
        match k.as_str() {
            "as" => (as_kind, converts) = (Some(v.as_str()), true),
            "g" => (group, converts) = (Some(v.as_str()), true),
            "v" => (version, converts) = (Some(v.as_str()), true),
            _ => {}
        }
    }
    if !converts {
        return Some(Negotiated::Plain);
    }
    let table_version = match (group, version) {
        (Some("meta.k8s.io"), Some("v1")) => TableVersion::V1,
        (Some("meta.k8s.io"), Some("v1beta1")) => TableVersion::V1Beta1,
        _ => return None,
    };
    match as_kind {
        Some("Table") => Some(Negotiated::Table(table_version)),
        Some("PartialObjectMetadata" | "PartialObjectMetadataList") => Some(Negotiated::Plain),
        _ => None,
    }
}
