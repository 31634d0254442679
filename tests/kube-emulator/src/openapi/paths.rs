//! The REST paths of a kind in an OpenAPI v3 document: the collection, the object and, for namespaced kinds, the
//! collection across namespaces, each operation with its parameters, body and responses.

use serde_json::{Map, Value, json};

use super::{DELETE_OPTIONS, KindDoc, PATCH, SCHEMA_REF, STATUS};

/// What the paths of one kind are built from.
#[derive(Debug)]
pub(super) struct KindPaths<'a> {
    kind: &'a KindDoc,
    /// The kind's schema name, and its list's.
    name: &'a str,
    list_name: &'a str,
    /// The kind's `x-kubernetes-group-version-kind`.
    gvk: &'a Value,
    /// `/api/v1` or `/apis/G/V`.
    root: String,
    /// The group version in operation ids: `CoreV1`, `NodeBootcDevV1alpha1`.
    infix: String,
    /// The operations' tag: `core_v1`, `nodeBootcDev_v1alpha1`.
    tag: String,
}

impl<'a> KindPaths<'a> {
    /// The paths of `kind` in `(group, version)`, whose schemas are `name` and `list_name`.
    pub(super) fn new(
        (group, version): (&str, &str),
        kind: &'a KindDoc,
        name: &'a str,
        list_name: &'a str,
        gvk: &'a Value,
    ) -> Self {
        let root = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let infix = operation_infix(group, version);
        let tag = {
            let mut t = infix.clone();
            if let Some(first) = t.get(..1).map(str::to_lowercase) {
                t.replace_range(..1, &first);
            }
            let split = t.len() - version.len();
            format!("{}_{}", &t[..split], version)
        };
        KindPaths {
            kind,
            name,
            list_name,
            gvk,
            root,
            infix,
            tag,
        }
    }

    /// Adds the kind's paths.
    pub(super) fn add_to(&self, paths: &mut Map<String, Value>) {
        let root = &self.root;
        let kind = self.kind;
        let (collection, scope, mut scope_params) = if kind.namespaced {
            (
                format!("{root}/namespaces/{{namespace}}/{}", kind.plural),
                "Namespaced",
                vec![path_param(
                    "namespace",
                    "object name and auth scope, such as for teams and projects",
                )],
            )
        } else {
            (format!("{root}/{}", kind.plural), "", Vec::new())
        };
        scope_params.push(pretty());
        paths.insert(
            collection.clone(),
            self.collection_ops(scope, scope_params.clone()),
        );

        let k = &kind.kind;
        let mut item_params = vec![path_param("name", &format!("name of the {k}"))];
        item_params.extend(scope_params);
        paths.insert(
            format!("{collection}/{{name}}"),
            self.item_ops(scope, item_params),
        );

        if kind.namespaced {
            let infix = &self.infix;
            let all = json!({
                "get": self.operation("list", format!("list{infix}{k}ForAllNamespaces"), format!("list or watch objects of kind {k}"),
                    list_params(), None, responses(&["200"], self.list_name)),
                "parameters": [pretty()],
            });
            paths.insert(format!("{root}/{}", kind.plural), all);
        }
    }

    /// List, create and delete the collection.
    fn collection_ops(&self, scope: &str, parameters: Vec<Value>) -> Value {
        let (infix, k, name) = (&self.infix, &self.kind.kind, self.name);
        let mut delete_collection_params = delete_params();
        delete_collection_params.extend(list_params());
        json!({
            "get": self.operation("list", format!("list{infix}{scope}{k}"), format!("list or watch objects of kind {k}"),
                list_params(), None, responses(&["200"], self.list_name)),
            "post": self.operation("post", format!("create{infix}{scope}{k}"), format!("create a {k}"),
                write_params(false), Some(body(name)), responses(&["200", "201", "202"], name)),
            "delete": self.operation("deletecollection", format!("deletecollection{infix}{scope}{k}"), format!("delete collection of {k}"),
                delete_collection_params, Some(json!({"content": content(DELETE_OPTIONS)})), responses(&["200"], STATUS)),
            "parameters": parameters,
        })
    }

    /// Read, replace, patch and delete one object.
    fn item_ops(&self, scope: &str, parameters: Vec<Value>) -> Value {
        let (infix, k, name) = (&self.infix, &self.kind.kind, self.name);
        let patch_body = json!({
            "content": {
                "application/apply-patch+yaml": {"schema": {"$ref": format!("{SCHEMA_REF}{PATCH}")}},
                "application/json-patch+json": {"schema": {"$ref": format!("{SCHEMA_REF}{PATCH}")}},
                "application/merge-patch+json": {"schema": {"$ref": format!("{SCHEMA_REF}{PATCH}")}},
            },
            "required": true,
        });
        json!({
            "get": self.operation("get", format!("read{infix}{scope}{k}"), format!("read the specified {k}"),
                Vec::new(), None, responses(&["200"], name)),
            "put": self.operation("put", format!("replace{infix}{scope}{k}"), format!("replace the specified {k}"),
                write_params(false), Some(body(name)), responses(&["200", "201"], name)),
            "patch": self.operation("patch", format!("patch{infix}{scope}{k}"), format!("partially update the specified {k}"),
                write_params(true), Some(patch_body), responses(&["200", "201"], name)),
            "delete": self.operation("delete", format!("delete{infix}{scope}{k}"), format!("delete a {k}"),
                delete_params(), Some(json!({"content": content(DELETE_OPTIONS)})), responses(&["200", "202"], STATUS)),
            "parameters": parameters,
        })
    }

    /// One operation, tagged with the kind's tag and group-version-kind.
    fn operation(
        &self,
        action: &str,
        operation_id: String,
        description: String,
        parameters: Vec<Value>,
        request_body: Option<Value>,
        responses: Value,
    ) -> Value {
        let mut op = json!({
            "tags": [self.tag],
            "description": description,
            "operationId": operation_id,
            "responses": responses,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": self.gvk,
        });
        if !parameters.is_empty() {
            op["parameters"] = Value::Array(parameters);
        }
        if let Some(body) = request_body {
            op["requestBody"] = body;
        }
        op
    }
}

/// The request body of a create or replace: the kind's schema.
fn body(schema: &str) -> Value {
    json!({"content": content(schema), "required": true})
}

/// `NodeBootcDevV1alpha1` for node.bootc.dev/v1alpha1, `CoreV1` for v1, `AppsV1`, `CoordinationV1` (k8s.io groups
/// lose their suffix), as in kube-apiserver's operation ids.
pub(super) fn operation_infix(group: &str, version: &str) -> String {
    let group = match group {
        "" => "core",
        g => g.strip_suffix(".k8s.io").unwrap_or(g),
    };
    let mut out = String::new();
    for part in group.split(['.', '-']).chain(std::iter::once(version)) {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    out
}

fn query_param(name: &str, type_: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": type_, "uniqueItems": true},
    })
}

fn path_param(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "path",
        "description": description,
        "required": true,
        "schema": {"type": "string", "uniqueItems": true},
    })
}

fn pretty() -> Value {
    query_param(
        "pretty",
        "string",
        "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).",
    )
}

fn write_params(patch: bool) -> Vec<Value> {
    let mut params = vec![
        query_param(
            "dryRun",
            "string",
            "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed",
        ),
        query_param(
            "fieldManager",
            "string",
            "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.",
        ),
        query_param(
            "fieldValidation",
            "string",
            "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.",
        ),
    ];
    if patch {
        params.push(query_param(
            "force",
            "boolean",
            "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
        ));
    }
    params
}

fn list_params() -> Vec<Value> {
    vec![
        query_param(
            "allowWatchBookmarks",
            "boolean",
            "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
        ),
        query_param(
            "continue",
            "string",
            "The continue option should be set when retrieving more results from the server.",
        ),
        query_param(
            "fieldSelector",
            "string",
            "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
        ),
        query_param(
            "labelSelector",
            "string",
            "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
        ),
        query_param(
            "limit",
            "integer",
            "limit is a maximum number of responses to return for a list call.",
        ),
        query_param(
            "resourceVersion",
            "string",
            "resourceVersion sets a constraint on what resource versions a request may be served from.",
        ),
        query_param(
            "resourceVersionMatch",
            "string",
            "resourceVersionMatch determines how resourceVersion is applied to list calls.",
        ),
        query_param(
            "sendInitialEvents",
            "boolean",
            "`sendInitialEvents=true` may be set together with `watch=true`: the watch stream begins with synthetic events for the current state of the collection.",
        ),
        query_param(
            "timeoutSeconds",
            "integer",
            "Timeout for the list/watch call.",
        ),
        query_param(
            "watch",
            "boolean",
            "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
        ),
    ]
}

fn delete_params() -> Vec<Value> {
    vec![
        query_param(
            "dryRun",
            "string",
            "When present, indicates that modifications should not be persisted.",
        ),
        query_param(
            "gracePeriodSeconds",
            "integer",
            "The duration in seconds before the object should be deleted.",
        ),
        query_param(
            "ignoreStoreReadErrorWithClusterBreakingPotential",
            "boolean",
            "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error.",
        ),
        query_param(
            "orphanDependents",
            "boolean",
            "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7.",
        ),
        query_param(
            "propagationPolicy",
            "string",
            "Whether and how garbage collection will be performed: 'Orphan', 'Background' or 'Foreground'.",
        ),
    ]
}

pub(super) fn content(schema: &str) -> Value {
    let reference = json!({"schema": {"$ref": format!("{SCHEMA_REF}{schema}")}});
    json!({"application/json": reference, "application/yaml": reference})
}

fn responses(codes: &[&str], schema: &str) -> Value {
    let mut out = Map::new();
    for code in codes {
        let description = match *code {
            "201" => "Created",
            "202" => "Accepted",
            _ => "OK",
        };
        out.insert(
            code.to_string(),
            json!({"description": description, "content": content(schema)}),
        );
    }
    out.insert("401".to_string(), json!({"description": "Unauthorized"}));
    Value::Object(out)
}
