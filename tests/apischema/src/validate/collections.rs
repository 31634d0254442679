//! The keywords of arrays (`minItems`/`maxItems`, `uniqueItems`, `items`) and
//! objects (`minProperties`/`maxProperties`, `required`, `properties`,
//! `additionalProperties`), and the Kubernetes extensions on them:
//! `x-kubernetes-list-type` and `x-kubernetes-embedded-resource`.

use serde_json::{Map, Value};

use super::{WalkMode, Walker};
use crate::error::{ErrorKind, SchemaError};
use crate::{gofmt, listtype, path};

impl Walker {
    pub(super) fn check_array(
        &mut self,
        s: &Map<String, Value>,
        list: &[Value],
        path: &str,
        depth: usize,
        mode: WalkMode,
    ) {
        let len = list.len() as u64;
        if let Some(min) = self.kw_uint(s, "minItems", path).filter(|min| len < *min) {
            self.openapi.push(SchemaError::invalid(
                path,
                Value::from(len),
                format!("{} should have at least {min} items", path::in_body(path)),
            ));
        }
        if let Some(max) = self.kw_uint(s, "maxItems", path).filter(|max| len > *max) {
            self.openapi.push(SchemaError::new(
                path,
                ErrorKind::TooMany,
                Some(Value::from(len)),
                format!("must have at most {max} items"),
            ));
        }
        if self.kw_bool(s, "uniqueItems", path) && !listtype::set_duplicates(list).is_empty() {
            self.openapi.push(SchemaError::invalid(
                path,
                Value::String(String::new()),
                format!("{} shouldn't contain duplicates", path::in_body(path)),
            ));
        }
        // The list's own set/map check comes before its items', as in the apiserver.
        if mode != WalkMode::Junctor {
            self.check_list_type(s, list, path);
        }
        match s.get("items") {
            None => {}
            Some(items @ (Value::Object(_) | Value::Bool(_))) => {
                for (i, item) in list.iter().enumerate() {
                    self.node(items, item, &path::index(path, i), depth + 1, mode.below());
                }
            }
            Some(_) => self.bad_schema(path, "items must be a single schema object".to_owned()),
        }
    }

    pub(super) fn check_object(
        &mut self,
        s: &Map<String, Value>,
        map: &Map<String, Value>,
        path: &str,
        depth: usize,
        mode: WalkMode,
    ) {
        self.check_property_counts(s, map, path);
        self.check_required(s, map, path);
        self.check_members(s, map, path, depth, mode);
        if mode == WalkMode::Structural && self.kw_bool(s, "x-kubernetes-embedded-resource", path) {
            self.check_embedded(map, path);
        }
    }

    /// `maxProperties` and `minProperties`.
    fn check_property_counts(
        &mut self,
        s: &Map<String, Value>,
        map: &Map<String, Value>,
        path: &str,
    ) {
        let count = map.len() as u64;
        if let Some(max) = self
            .kw_uint(s, "maxProperties", path)
            .filter(|max| count > *max)
        {
            self.openapi.push(SchemaError::new(
                path,
                ErrorKind::TooMany,
                Some(Value::from(count)),
                format!("must have at most {max} items"),
            ));
        }
        if let Some(min) = self
            .kw_uint(s, "minProperties", path)
            .filter(|min| count < *min)
        {
            self.openapi.push(SchemaError::invalid(
                path,
                Value::from(count),
                format!(
                    "{} should have at least {min} properties",
                    path::in_body(path)
                ),
            ));
        }
    }

    /// `required`: each named property must be present.
    fn check_required(&mut self, s: &Map<String, Value>, map: &Map<String, Value>, path: &str) {
        match s.get("required") {
            None => {}
            Some(Value::Array(required)) => {
                for r in required {
                    match r {
                        Value::String(k) if !map.contains_key(k) => {
                            self.openapi
                                .push(SchemaError::required(&path::child(path, k), ""));
                        }
                        Value::String(_) => {}
                        other => self.bad_schema(
                            path,
                            format!("required entries must be strings, got {other}"),
                        ),
                    }
                }
            }
            Some(other) => self.bad_schema(path, format!("required must be an array, got {other}")),
        }
    }

    /// Walks each member against its `properties` schema, else the
    /// `additionalProperties` schema; `additionalProperties: false` forbids
    /// the others (but for the root's `apiVersion` and `kind`).
    fn check_members(
        &mut self,
        s: &Map<String, Value>,
        map: &Map<String, Value>,
        path: &str,
        depth: usize,
        mode: WalkMode,
    ) {
        let props = match s.get("properties") {
            None => None,
            Some(Value::Object(p)) => Some(p),
            Some(other) => {
                self.bad_schema(path, format!("properties must be an object, got {other}"));
                None
            }
        };
        let additional = s.get("additionalProperties");
        if additional.is_some_and(|a| !a.is_object() && !a.is_boolean()) {
            self.bad_schema(
                path,
                "additionalProperties must be a schema or a boolean".to_owned(),
            );
        }
        for (k, v) in map {
            if mode == WalkMode::Root && k == "metadata" {
                continue;
            }
            if let Some(p) = props.and_then(|p| p.get(k)) {
                self.node(p, v, &path::child(path, k), depth + 1, mode.below());
            } else {
                match additional {
                    Some(a @ Value::Object(_)) => {
                        self.node(a, v, &path::key(path, k), depth + 1, mode.below());
                    }
                    Some(Value::Bool(false))
                        if !(mode == WalkMode::Root && (k == "apiVersion" || k == "kind")) =>
                    {
                        self.openapi.push(SchemaError::invalid(
                            path,
                            Value::String(k.clone()),
                            format!(
                                "{} is a forbidden property",
                                path::in_body(&path::child(path, k))
                            ),
                        ));
                    }
                    _ => {}
                }
            }
        }
    }

    pub(super) fn check_list_type(&mut self, s: &Map<String, Value>, list: &[Value], path: &str) {
        match self.kw_str(s, "x-kubernetes-list-type", path) {
            None | Some("atomic") => {}
            Some("set") => {
                for i in listtype::set_duplicates(list) {
                    let item = list.get(i).cloned().unwrap_or(Value::Null);
                    self.lists.push(SchemaError::new(
                        &path::index(path, i),
                        ErrorKind::Duplicate,
                        Some(item),
                        "",
                    ));
                }
            }
            Some("map") => {
                let keys: Vec<&str> = match s.get("x-kubernetes-list-map-keys") {
                    Some(Value::Array(keys))
                        if !keys.is_empty() && keys.iter().all(Value::is_string) =>
                    {
                        keys.iter().filter_map(Value::as_str).collect()
                    }
                    _ => {
                        self.bad_schema(
                            path,
                            "x-kubernetes-list-map-keys must be a non-empty list of strings for x-kubernetes-list-type map"
                                .to_owned(),
                        );
                        return;
                    }
                };
                match listtype::map_duplicates(list, &keys) {
                    Err(i) => {
                        let item = list.get(i).cloned().unwrap_or(Value::Null);
                        self.lists.push(SchemaError::invalid(
                            &path::index(path, i),
                            item,
                            "must be an object for an array of list-type map",
                        ));
                    }
                    Ok(dups) => {
                        for (i, key) in dups {
                            self.lists.push(SchemaError::new(
                                &path::index(path, i),
                                ErrorKind::Duplicate,
                                Some(key),
                                "",
                            ));
                        }
                    }
                }
            }
            Some(other) => self.bad_schema(
                path,
                format!(
                    "x-kubernetes-list-type must be atomic, set or map, got {}",
                    gofmt::quote(other)
                ),
            ),
        }
    }

    /// `validateEmbeddedResource`: `apiVersion` and `kind` must be non-empty
    /// strings (`metadata` itself is not checked here).
    pub(super) fn check_embedded(&mut self, map: &Map<String, Value>, path: &str) {
        for field in ["apiVersion", "kind"] {
            let p = path::child(path, field);
            match map.get(field) {
                None => self
                    .embedded
                    .push(SchemaError::required(&p, "must not be empty")),
                Some(Value::String(s)) if s.is_empty() => {
                    self.embedded.push(SchemaError::invalid(
                        &p,
                        Value::String(String::new()),
                        "must not be empty",
                    ));
                }
                Some(Value::String(s))
                    if field == "apiVersion" && s != "/" && s.matches('/').count() > 1 =>
                {
                    self.embedded.push(SchemaError::invalid(
                        &p,
                        Value::String(s.clone()),
                        format!("unexpected GroupVersion string: {s}"),
                    ));
                }
                Some(Value::String(_)) => {}
                Some(other) => {
                    self.embedded
                        .push(SchemaError::invalid(&p, other.clone(), "must be a string"));
                }
            }
        }
    }
}
