//! Routing: what a kube-apiserver path addresses, and the verb of a request.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::Method;

use crate::ops::Inner;
use crate::registry::ResourceType;

/// What a path addresses.
#[derive(Debug)]
pub(super) enum Route {
    Version,
    Health,
    CoreVersions,
    Groups,
    Group(String),
    Resources(String, String),
    OpenApiV3Root,
    OpenApiV3(String, String),
    OpenApiV2,
    Resource(ResourcePath),
    NotFound,
}

/// A path addressing a resource: its type, and the namespace, name and subresource in the path.
#[derive(Debug)]
pub(super) struct ResourcePath {
    pub(super) resource: Arc<ResourceType>,
    pub(super) namespace: Option<String>,
    pub(super) name: Option<String>,
    pub(super) subresource: Option<String>,
}

/// What `path` addresses, given the served kinds.
pub(super) fn parse_route(inner: &Inner, path: &str) -> Route {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segments.as_slice() {
        ["version"] => return Route::Version,
        ["healthz" | "readyz" | "livez", ..] => return Route::Health,
        ["api"] => return Route::CoreVersions,
        ["apis"] => return Route::Groups,
        ["apis", g] => return Route::Group((*g).to_string()),
        ["api", v] => return Route::Resources(String::new(), (*v).to_string()),
        ["apis", g, v] => return Route::Resources((*g).to_string(), (*v).to_string()),
        ["openapi", "v2"] => return Route::OpenApiV2,
        ["openapi", "v3"] => return Route::OpenApiV3Root,
        ["openapi", "v3", "api", v] => return Route::OpenApiV3(String::new(), (*v).to_string()),
        ["openapi", "v3", "apis", g, v] => {
            return Route::OpenApiV3((*g).to_string(), (*v).to_string());
        }
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Route::NotFound,
    };
    let find = |plural: &str| inner.registry.find(group, version, plural);
    let (resource, namespace, name, subresource) = match rest {
        ["namespaces", ns, sub @ ("status" | "finalize")] if group.is_empty() => {
            (find("namespaces"), None, Some(*ns), Some(*sub))
        }
        ["namespaces", ns, plural, tail @ ..] => match tail {
            [] => (find(plural), Some(*ns), None, None),
            [name] => (find(plural), Some(*ns), Some(*name), None),
            [name, sub] => (find(plural), Some(*ns), Some(*name), Some(*sub)),
            _ => return Route::NotFound,
        },
        [plural] => (find(plural), None, None, None),
        [plural, name] => (find(plural), None, Some(*name), None),
        [plural, name, sub] => (find(plural), None, Some(*name), Some(*sub)),
        _ => return Route::NotFound,
    };
    let Some(resource) = resource else {
        return Route::NotFound;
    };
    // A namespaced object needs its namespace in the path; a cluster-scoped one must not have one.
    let bad_scope = (resource.namespaced && name.is_some() && namespace.is_none())
        || (!resource.namespaced && namespace.is_some());
    let known_sub = match subresource {
        None => true,
        Some("status") => resource.status_subresource,
        Some("eviction") => resource.group.is_empty() && resource.plural == "pods",
        Some(_) => false,
    };
    if bad_scope || !known_sub {
        return Route::NotFound;
    }
    Route::Resource(ResourcePath {
        resource,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        subresource: subresource.map(str::to_string),
    })
}

/// The audit verb of a request (`discovery` for anything but a resource).
pub(super) fn verb(
    method: &Method,
    route: &Route,
    query: &HashMap<String, String>,
) -> &'static str {
    let Route::Resource(p) = route else {
        return "discovery";
    };
    let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    match (method.as_str(), p.name.is_some()) {
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}
