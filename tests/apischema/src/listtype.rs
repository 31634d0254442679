//! `x-kubernetes-list-type` `set` and `map`: duplicate detection and old-item correlation.

use serde_json::{Map, Value};

/// Indices of the second occurrence of every value that appears more than
/// once, like the apiserver's `validateListSet` (each repeated value is
/// reported once).
pub(crate) fn set_duplicates(list: &[Value]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, x) in list.iter().enumerate() {
        let earlier = list[..i].iter().filter(|y| *y == x).count();
        if earlier == 1 {
            out.push(i);
        }
    }
    out
}

/// The key of a `map` list item: an object of the key fields it has (`null`
/// items and missing keys contribute nothing, as in the apiserver).
pub(crate) fn map_key(item: &Value, keys: &[&str]) -> Value {
    let mut key = Map::new();
    if let Value::Object(obj) = item {
        for k in keys {
            if let Some(v) = obj.get(*k) {
                key.insert((*k).to_owned(), v.clone());
            }
        }
    }
    Value::Object(key)
}

/// For a `map` list: `Err(i)` when item `i` is neither an object nor `null`
/// (only the first such item is reported), otherwise the index and key of
/// every repeated key (the second occurrence of each).
pub(crate) fn map_duplicates(list: &[Value], keys: &[&str]) -> Result<Vec<(usize, Value)>, usize> {
    if let Some(i) = list.iter().position(|x| !x.is_object() && !x.is_null()) {
        return Err(i);
    }
    let item_keys: Vec<Value> = list.iter().map(|x| map_key(x, keys)).collect();
    Ok(set_duplicates(&item_keys)
        .into_iter()
        .filter_map(|i| item_keys.get(i).map(|k| (i, k.clone())))
        .collect())
}

/// The item of the old `map` list with the same key as `item`, if any: CEL
/// transition rules see it as `oldSelf`.
pub(crate) fn correlate<'a>(item: &Value, old: &'a [Value], keys: &[&str]) -> Option<&'a Value> {
    if !item.is_object() || keys.is_empty() {
        return None;
    }
    let key = map_key(item, keys);
    old.iter()
        .find(|o| o.is_object() && map_key(o, keys) == key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_reports_second_occurrence_once() {
        let list = [
            json!("a"),
            json!("b"),
            json!("a"),
            json!("a"),
            json!(1),
            json!(1.0),
        ];
        assert_eq!(set_duplicates(&list), vec![2]);
        assert_eq!(
            set_duplicates(&[json!({"x": [1]}), json!({"x": [1]})]),
            vec![1]
        );
        assert!(set_duplicates(&[]).is_empty());
    }

    #[test]
    fn map_duplicates_by_key_fields() {
        let list = [
            json!({"name": "a", "v": 1}),
            json!({"name": "b"}),
            json!({"name": "a", "v": 2}),
        ];
        assert_eq!(
            map_duplicates(&list, &["name"]),
            Ok(vec![(2, json!({"name": "a"}))])
        );
        let multi = [
            json!({"a": 1, "b": 1}),
            json!({"a": 1, "b": 2}),
            json!({"b": 1, "a": 1}),
        ];
        assert_eq!(
            map_duplicates(&multi, &["a", "b"]),
            Ok(vec![(2, json!({"a": 1, "b": 1}))])
        );
        // Items without the key share the empty key.
        assert_eq!(
            map_duplicates(&[json!({}), json!(null)], &["name"]),
            Ok(vec![(1, json!({}))])
        );
        assert_eq!(
            map_duplicates(&[json!({}), json!("x"), json!(3)], &["name"]),
            Err(1)
        );
    }

    #[test]
    fn correlates_by_key() {
        let old = [json!({"name": "a", "v": 1}), json!({"name": "b", "v": 2})];
        assert_eq!(
            correlate(&json!({"name": "b", "v": 9}), &old, &["name"]),
            Some(&old[1])
        );
        assert_eq!(correlate(&json!({"name": "c"}), &old, &["name"]), None);
        assert_eq!(correlate(&json!("b"), &old, &["name"]), None);
    }
}
