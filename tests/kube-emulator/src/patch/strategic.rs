//! Strategic merge patch, as kube-apiserver applies it to built-in kinds: directives
//! (`$patch`, `$retainKeys`, `$setElementOrder/…`, `$deleteFromPrimitiveList/…`) and lists
//! merged by their [`ListKind`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{Map, Value};

use super::lists::{ListKind, ListSemantics};
use super::{
    DELETE_PRIMITIVE_PREFIX, DIRECTIVE, PatchError, RETAIN_KEYS, SET_ORDER_PREFIX, go_json_type,
    is_directive_key, remove_key,
};

pub(super) fn strategic_merge_patch(
    live: &Value,
    body: &[u8],
    lists: &dyn ListSemantics,
) -> Result<Value, PatchError> {
    let patch: Value =
        serde_json::from_slice(body).map_err(|e| PatchError::InvalidBody(e.to_string()))?;
    let Value::Object(patch) = patch else {
        return Err(PatchError::InvalidBody(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            go_json_type(&patch)
        )));
    };
    let original = match live {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let mut smp = Merger {
        lists,
        path: Vec::new(),
    };
    Ok(Value::Object(smp.smp_map(original, &patch)?))
}

fn bad_retain_keys() -> PatchError {
    PatchError::InvalidDirective("invalid patch format of retainKeys".to_string())
}

fn bad_set_order() -> PatchError {
    PatchError::InvalidDirective("invalid patch format of setElementOrder list".to_string())
}

fn bad_primitive_list() -> PatchError {
    PatchError::InvalidDirective("invalid patch format of primitive list".to_string())
}

fn bad_patch_type(directive: &Value, container: &Map<String, Value>) -> PatchError {
    let shown = match directive {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    PatchError::InvalidDirective(format!(
        "unknown patch type: {shown} in map: {}",
        Value::Object(container.clone())
    ))
}

/// `$setElementOrder/field` -> `field` (the prefix must be followed by exactly a `/`).
fn directive_field<'k>(key: &'k str, prefix: &str) -> Option<&'k str> {
    key.strip_prefix(prefix)?.strip_prefix('/')
}

/// `$retainKeys`: drops the live keys it does not list (every non-null patch key must be listed).
fn retain_keys(
    orig: &mut Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<(), PatchError> {
    let Some(rk) = patch.get(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(list) = rk else {
        return Err(bad_retain_keys());
    };
    let keep: BTreeSet<&str> = list.iter().filter_map(Value::as_str).collect();
    for (k, v) in patch {
        if v.is_null() || is_directive_key(k) {
            continue;
        }
        if !keep.contains(k.as_str()) {
            return Err(bad_retain_keys());
        }
    }
    orig.retain(|k, _| keep.contains(k.as_str()));
    Ok(())
}

/// The `$setElementOrder/field` lists of a patch map, by field; also checks that every
/// `$deleteFromPrimitiveList/field` is well-formed.
fn element_orders(patch: &Map<String, Value>) -> Result<BTreeMap<&str, &[Value]>, PatchError> {
    let mut orders: BTreeMap<&str, &[Value]> = BTreeMap::new();
    for (k, v) in patch {
        if k.starts_with(SET_ORDER_PREFIX) {
            let field = directive_field(k, SET_ORDER_PREFIX).ok_or_else(bad_set_order)?;
            let Value::Array(list) = v else {
                return Err(bad_set_order());
            };
            orders.insert(field, list.as_slice());
        }
    }
    for (k, v) in patch {
        if k.starts_with(DELETE_PRIMITIVE_PREFIX) {
            directive_field(k, DELETE_PRIMITIVE_PREFIX).ok_or_else(bad_primitive_list)?;
            if !v.is_array() {
                return Err(bad_primitive_list());
            }
        }
    }
    Ok(orders)
}

/// `$deleteFromPrimitiveList/field`: removes the listed values from the live list.
fn delete_from_primitive_lists(orig: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (k, v) in patch {
        let (Some(field), Value::Array(delete)) = (directive_field(k, DELETE_PRIMITIVE_PREFIX), v)
        else {
            continue;
        };
        if let Some(Value::Array(list)) = orig.get_mut(field) {
            list.retain(|e| !delete.contains(e));
        }
    }
}

/// Identity of list elements when ordering or merging.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ident<'k> {
    /// Scalars (and set elements): JSON equality.
    Equal,
    /// Associative lists: equal values of all the keys.
    Keys(&'k [String]),
}

impl Ident<'_> {
    fn same(&self, a: &Value, b: &Value) -> bool {
        match self {
            Ident::Equal => a == b,
            Ident::Keys(keys) => keys_match(a, b, keys),
        }
    }
}

pub(super) fn keys_match(a: &Value, b: &Value, keys: &[String]) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            keys.iter().all(|k| a.get(k.as_str()) == b.get(k.as_str()))
        }
        _ => false,
    }
}

fn require_keys(m: &Map<String, Value>, keys: &[String]) -> Result<(), PatchError> {
    match keys.iter().find(|k| !m.contains_key(k.as_str())) {
        None => Ok(()),
        Some(missing) => Err(PatchError::CannotApply(format!(
            "map: {} does not contain declared merge key: {missing}",
            Value::Object(m.clone())
        ))),
    }
}

/// kube-apiserver's `normalizeElementOrder`: the elements named by `patch_order` come in that
/// order, the others keep the order they had in `server_order`, and the two sequences are
/// interleaved by their positions in `server_order` (elements new to the server come first).
pub(super) fn normalize_order(
    merged: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    ident: Ident<'_>,
) -> Vec<Value> {
    let pos = |list: &[Value], item: &Value| list.iter().position(|x| ident.same(x, item));
    // (value, position in server_order)
    let mut patch_items: Vec<(usize, Option<usize>, Value)> = Vec::new();
    let mut server_only: Vec<(usize, Option<usize>, Value)> = Vec::new();
    for item in merged {
        let s = pos(server_order, &item);
        match pos(patch_order, &item) {
            Some(p) => patch_items.push((p, s, item)),
            None => server_only.push((s.unwrap_or(usize::MAX), s, item)),
        }
    }
    patch_items.sort_by_key(|(p, _, _)| *p);
    server_only.sort_by_key(|(p, _, _)| *p);
    let mut left: VecDeque<_> = server_only.into();
    let mut right: VecDeque<_> = patch_items.into();
    let mut out = Vec::with_capacity(left.len() + right.len());
    loop {
        let take_left = match (left.front(), right.front()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((_, l, _)), Some((_, r, _))) => matches!((l, r), (Some(l), Some(r)) if l < r),
        };
        let next = if take_left {
            left.pop_front()
        } else {
            right.pop_front()
        };
        if let Some((_, _, v)) = next {
            out.push(v);
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elements {
    None,
    Scalars,
    Maps,
}

/// The common element type of the lists being merged (kube-apiserver's `sliceElementType`).
fn element_type(path: &[String], lists: &[&[Value]]) -> Result<Elements, PatchError> {
    let mut seen: Option<&'static str> = None;
    for v in lists.iter().flat_map(|l| l.iter()) {
        if v.is_array() {
            return Err(PatchError::CannotApply(
                "lists of lists are not supported".to_string(),
            ));
        }
        let t = go_json_type(v);
        match seen {
            None => seen = Some(t),
            Some(s) if s == t => {}
            Some(_) => {
                return Err(PatchError::CannotApply(format!(
                    "list element types are not identical in {}",
                    path.join(".")
                )));
            }
        }
    }
    Ok(match seen {
        None => Elements::None,
        Some("object") => Elements::Maps,
        Some(_) => Elements::Scalars,
    })
}

/// Shared state of the recursive strategic merge patch and apply walks: the list semantics
/// and the current field path.
pub(super) struct Merger<'a> {
    pub(super) lists: &'a dyn ListSemantics,
    pub(super) path: Vec<String>,
}

impl Merger<'_> {
    pub(super) fn list_kind(&self) -> ListKind {
        let path: Vec<&str> = self.path.iter().map(String::as_str).collect();
        match self.lists.list_kind(&path) {
            ListKind::Map(keys) if keys.is_empty() => ListKind::Atomic,
            other => other,
        }
    }

    pub(super) fn with_field<T>(&mut self, field: &str, f: impl FnOnce(&mut Self) -> T) -> T {
        self.path.push(field.to_string());
        let out = f(self);
        self.path.pop();
        out
    }

    fn smp_map(
        &mut self,
        mut orig: Map<String, Value>,
        patch: &Map<String, Value>,
    ) -> Result<Map<String, Value>, PatchError> {
        if let Some(d) = patch.get(DIRECTIVE) {
            match d.as_str() {
                Some("replace") => {
                    let mut content = patch.clone();
                    remove_key(&mut content, DIRECTIVE);
                    return self.smp_map(Map::new(), &content);
                }
                Some("delete") => return Ok(Map::new()),
                Some("merge") => {}
                _ => return Err(bad_patch_type(d, patch)),
            }
        }
        retain_keys(&mut orig, patch)?;
        let orders = element_orders(patch)?;

        for (k, pv) in patch {
            if is_directive_key(k) {
                continue;
            }
            if pv.is_null() {
                remove_key(&mut orig, k);
                continue;
            }
            let order = orders.get(k.as_str()).copied();
            let current = orig.get_mut(k.as_str()).map(Value::take);
            let merged = self.with_field(k, |m| m.smp_value(current, pv, order))?;
            orig.insert(k.clone(), merged);
        }
        self.reorder_unpatched(&mut orig, patch, &orders);
        delete_from_primitive_lists(&mut orig, patch);
        Ok(orig)
    }

    /// `$setElementOrder` alone (no patch of the list itself) reorders the live list.
    fn reorder_unpatched(
        &mut self,
        orig: &mut Map<String, Value>,
        patch: &Map<String, Value>,
        orders: &BTreeMap<&str, &[Value]>,
    ) {
        for (field, order) in orders {
            if patch.contains_key(*field) {
                continue;
            }
            let kind = self.with_field(field, |m| m.list_kind());
            if let Some(Value::Array(list)) = orig.get_mut(*field) {
                let ident = match &kind {
                    ListKind::Atomic => continue,
                    ListKind::Set => Ident::Equal,
                    ListKind::Map(keys) => Ident::Keys(keys),
                };
                let server = list.clone();
                let merged = std::mem::take(list);
                *list = normalize_order(merged, order, &server, ident);
            }
        }
    }

    fn smp_value(
        &mut self,
        orig: Option<Value>,
        patch: &Value,
        order: Option<&[Value]>,
    ) -> Result<Value, PatchError> {
        match (orig, patch) {
            (Some(Value::Object(om)), Value::Object(pm)) => {
                Ok(Value::Object(self.smp_map(om, pm)?))
            }
            (_, Value::Object(pm)) => Ok(Value::Object(self.smp_map(Map::new(), pm)?)),
            (Some(Value::Array(oa)), Value::Array(pa)) => {
                Ok(Value::Array(self.smp_list(Some(oa), pa, order)?))
            }
            (_, Value::Array(pa)) => Ok(Value::Array(self.smp_list(None, pa, order)?)),
            (_, other) => Ok(other.clone()),
        }
    }

    /// A list the live object does not have (or whose strategy is to replace): the patch
    /// elements, with delete/replace markers dropped and directives inside elements processed.
    fn smp_new_list(
        &mut self,
        patch: &[Value],
        order: Option<&[Value]>,
        kind: &ListKind,
    ) -> Result<Vec<Value>, PatchError> {
        let mut out = Vec::with_capacity(patch.len());
        for e in patch {
            match e {
                Value::Object(em) => {
                    if let ListKind::Map(_) = kind {
                        match em.get(DIRECTIVE).and_then(Value::as_str) {
                            Some("delete") => continue,
                            Some("replace") | Some("merge") if em.len() == 1 => continue,
                            _ => {}
                        }
                    }
                    out.push(Value::Object(self.smp_map(Map::new(), em)?));
                }
                other => out.push(other.clone()),
            }
        }
        let ident = match kind {
            ListKind::Atomic => return Ok(out),
            ListKind::Set => Ident::Equal,
            ListKind::Map(keys) => Ident::Keys(keys),
        };
        Ok(match order {
            Some(order) => normalize_order(out, order, &[], ident),
            None => out,
        })
    }

    fn smp_list(
        &mut self,
        orig: Option<Vec<Value>>,
        patch: &[Value],
        order: Option<&[Value]>,
    ) -> Result<Vec<Value>, PatchError> {
        let kind = self.list_kind();
        let Some(orig) = orig else {
            return self.smp_new_list(patch, order, &kind);
        };
        let keys = match &kind {
            ListKind::Atomic => return self.smp_new_list(patch, None, &kind),
            ListKind::Set => None,
            ListKind::Map(keys) => Some(keys.as_slice()),
        };
        let elements = element_type(&self.path, &[&orig, patch])?;
        match (elements, keys) {
            (Elements::None, _) => Ok(orig),
            (Elements::Scalars, _) | (Elements::Maps, None) => {
                let mut merged: Vec<Value> = Vec::with_capacity(orig.len() + patch.len());
                for v in orig.iter().chain(patch.iter()) {
                    if !merged.contains(v) {
                        merged.push(v.clone());
                    }
                }
                Ok(normalize_order(
                    merged,
                    order.unwrap_or(patch),
                    &orig,
                    Ident::Equal,
                ))
            }
            (Elements::Maps, Some(keys)) => self.smp_merge_map_list(orig, patch, order, keys),
        }
    }

    fn smp_merge_map_list(
        &mut self,
        orig: Vec<Value>,
        patch: &[Value],
        order: Option<&[Value]>,
        keys: &[String],
    ) -> Result<Vec<Value>, PatchError> {
        let ident = Ident::Keys(keys);
        let mut working = orig;
        let mut normal: Vec<&Map<String, Value>> = Vec::new();
        let mut replace = false;
        for e in patch {
            let Value::Object(em) = e else {
                continue; // element_type guarantees objects
            };
            match em.get(DIRECTIVE) {
                None => normal.push(em),
                Some(d) => match d.as_str() {
                    Some("delete") => {
                        require_keys(em, keys)?;
                        working.retain(|o| !keys_match(o, e, keys));
                    }
                    Some("replace") => replace = true,
                    Some("merge") => {
                        if em.len() > 1 {
                            normal.push(em);
                        }
                    }
                    _ => return Err(bad_patch_type(d, em)),
                },
            }
        }
        if replace {
            let mut out = Vec::with_capacity(normal.len());
            for em in normal {
                out.push(Value::Object(self.smp_map(Map::new(), em)?));
            }
            return Ok(match order {
                Some(order) => {
                    let server = out.clone();
                    normalize_order(out, order, &server, ident)
                }
                None => out,
            });
        }
        let server = working.clone();
        for em in &normal {
            require_keys(em, keys)?;
            let wanted = Value::Object((*em).clone());
            match working.iter().position(|o| keys_match(o, &wanted, keys)) {
                Some(i) => {
                    let current = match working[i].take() {
                        Value::Object(m) => m,
                        _ => Map::new(),
                    };
                    working[i] = Value::Object(self.smp_map(current, em)?);
                }
                None => working.push(Value::Object(self.smp_map(Map::new(), em)?)),
            }
        }
        let patch_order: Vec<Value> = match order {
            Some(order) => order.to_vec(),
            None => normal.iter().map(|m| Value::Object((*m).clone())).collect(),
        };
        Ok(normalize_order(working, &patch_order, &server, ident))
    }
}
