//! The alerts and the dashboard: the rules file passes `promtool check rules` and its unit
//! tests (`promtool test rules`), every alert is tested firing and not firing and has its
//! section in docs/monitoring.md, and every metric the alerts and the dashboard query is
//! one the controller exports.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use bootc_pool_controller::metrics::Metrics;
use deploy_check::{documents, repo_root};
use serde_json::Value;
use xtask::kustomize::{RULES, rule_groups};

const RULE_TESTS: &str = "deploy/monitoring/alerts_test.yaml";
const DASHBOARD: &str = "deploy/monitoring/dashboard.json";
const GUIDE: &str = "docs/monitoring.md";

fn read(file: &str) -> String {
    std::fs::read_to_string(repo_root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Runs promtool (Debian's `prometheus` package; scripts/install-packages installs it).
/// Missing, it fails the test: CI has it, so a skip would hide broken alerts.
async fn promtool(args: &[&str]) -> String {
    let out = tokio::process::Command::new("promtool")
        .args(args)
        .current_dir(repo_root())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("promtool finishes within two minutes")
        .unwrap_or_else(|e| {
            panic!(
                "cannot run promtool ({e}): install Debian's prometheus package \
                 (bash scripts/install-packages does)"
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// Every rule of the rules file.
fn rules() -> Vec<Value> {
    let groups = rule_groups(&read(RULES)).unwrap();
    groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .collect()
}

#[tokio::test]
async fn the_rules_pass_promtool_and_their_unit_tests() {
    let checked = promtool(&["check", "rules", RULES]).await;
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", rules().len())),
        "{checked}"
    );
    let tested = promtool(&["test", "rules", RULE_TESTS]).await;
    assert!(tested.contains("SUCCESS"), "{tested}");
}

#[test]
fn every_alert_is_tested_firing_and_not_firing_and_documented() {
    let tests = documents(&read(RULE_TESTS)).unwrap();
    assert_eq!(tests[0]["rule_files"], serde_json::json!(["alerts.yaml"]));
    let mut firing = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for case in tests[0]["tests"].as_array().unwrap() {
        for t in case["alert_rule_test"].as_array().into_iter().flatten() {
            let name = t["alertname"].as_str().unwrap().to_string();
            match t["exp_alerts"].as_array() {
                Some(a) if !a.is_empty() => firing.insert(name),
                _ => quiet.insert(name),
            };
        }
    }
    let guide = read(GUIDE);
    let rules = rules();
    assert!(rules.len() >= 8, "{rules:?}");
    for rule in &rules {
        let alert = rule["alert"].as_str().expect("only alerting rules");
        assert!(
            firing.contains(alert),
            "{RULE_TESTS} never shows {alert} firing"
        );
        assert!(
            quiet.contains(alert),
            "{RULE_TESTS} never shows {alert} quiet"
        );
        assert!(
            rule["labels"]["severity"].is_string(),
            "{alert} has no severity"
        );
        for annotation in ["summary", "description", "runbook_url"] {
            assert!(
                rule["annotations"][annotation].is_string(),
                "{alert} has no {annotation}"
            );
        }
        // The runbook link is the alert's section of the guide.
        let url = rule["annotations"]["runbook_url"].as_str().unwrap();
        let anchor = url.rsplit_once("#").map(|(_, a)| a).unwrap_or_default();
        assert_eq!(anchor, alert.to_lowercase(), "{alert}: {url}");
        assert!(url.contains(GUIDE), "{alert}: {url}");
        assert!(
            guide.lines().any(|l| l == format!("### {alert}")),
            "{GUIDE} has no section `### {alert}`"
        );
    }
}

/// The metric names a PromQL expression selects: identifiers that are neither
/// functions, keywords, label names (in `{…}` or in `by (…)`-style lists), numbers,
/// durations nor Grafana variables.
fn metric_names(expr: &str) -> BTreeSet<String> {
    const KEYWORDS: [&str; 22] = [
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "inf",
        "nan",
        "atan2",
        // Aggregation operators, which may be followed by `by (…)` before their `(`.
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    ];
    const LABEL_LISTS: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    // Skips from an opening bracket to its closing one, strings included.
    let skip = |i: &mut usize, open: char, close: char| {
        let mut depth = 0;
        while *i < chars.len() {
            match chars[*i] {
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        *i += 1;
                        return;
                    }
                }
                q @ ('"' | '\'' | '`') => {
                    *i += 1;
                    while *i < chars.len() && chars[*i] != q {
                        *i += if chars[*i] == '\\' { 2 } else { 1 };
                    }
                }
                _ => {}
            }
            *i += 1;
        }
    };
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    while i < chars.len() {
        let c = chars[i];
        if c == '{' {
            skip(&mut i, '{', '}');
        } else if c == '[' {
            skip(&mut i, '[', ']');
        } else if c == '"' || c == '\'' || c == '`' {
            skip(&mut i, c, c);
        } else if c == '$' || c.is_ascii_digit() || c == '.' {
            // A Grafana variable, a number or a duration.
            i += 1;
            while i < chars.len() && ident(chars[i]) {
                i += 1;
            }
        } else if ident(c) {
            let start = i;
            while i < chars.len() && ident(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut next = i;
            while next < chars.len() && chars[next].is_whitespace() {
                next += 1;
            }
            let call = chars.get(next) == Some(&'(');
            if LABEL_LISTS.contains(&word.as_str()) {
                if call {
                    i = next;
                    skip(&mut i, '(', ')');
                }
            } else if !call && !KEYWORDS.contains(&word.to_lowercase().as_str()) {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn metric_names_are_found_in_promql() {
    let expr = r#"max by (pool) ((bootc_pool_condition{type="Progressing",reason=~"St.*"} == 0)
        and on (instance) (bootc_pool_leader == 1)) > 3600
        or histogram_quantile(0.99, sum by (le) (rate(x_bucket{pool=~"$pool"}[$__rate_interval])))
        unless absent(up{job="a{b}"} offset 5m) * on (pool) group_left (image) info_metric"#;
    let want: BTreeSet<String> = [
        "bootc_pool_condition",
        "bootc_pool_leader",
        "x_bucket",
        "up",
        "info_metric",
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    assert_eq!(metric_names(expr), want);
}

/// The metric families the controller documents at the top of `controller/src/metrics.rs`
/// (its family list), as `(name, type)`; counters are listed with their `_total`.
fn family_list() -> Vec<(String, String)> {
    let source = read("controller/src/metrics.rs");
    let families: Vec<(String, String)> = source
        .lines()
        .filter_map(|l| l.strip_prefix("//! | `"))
        .filter_map(|l| {
            let (name, rest) = l.split_once('`')?;
            let kind = rest
                .trim_start_matches([' ', '|'])
                .split_whitespace()
                .next()?;
            Some((name.to_string(), kind.to_string()))
        })
        .collect();
    assert!(
        families.len() >= 10,
        "no family list in metrics.rs: {families:?}"
    );
    families
}

/// The registry's text with a series in every family: empty families are not encoded.
fn encoded_with_every_family() -> String {
    use bootc_pool_controller::metrics::{DrainResult, PoolHealth, TagResult};
    let m = Metrics::new();
    m.observe_reconcile("p", Duration::from_millis(3));
    m.record_reconcile("p", "ok");
    m.record_reconcile_error("p", "api");
    m.observe_action("p", "cordon", "ok", Duration::from_millis(1));
    m.set_nodes("p", &std::collections::BTreeMap::from([("Staged", 1)]));
    m.set_target("p", "quay.io/os@sha256:aa", "sha256:aa", None);
    m.record_tag_resolution(TagResult::Success);
    m.observe_drain("p", DrainResult::Drained, Duration::from_secs(1));
    m.record_reboot_approved("p");
    m.set_leader(true);
    m.set_pool_health(
        "p",
        &PoolHealth {
            conditions: vec![("Progressing".into(), "Advancing".into(), true)],
            ..PoolHealth::default()
        },
    );
    m.encode()
}

/// The sample names a query may use: a gauge's or a counter's listed name, a histogram's
/// `_bucket`, `_sum` and `_count`. The list is held to the registry: every family the
/// registry encodes is listed, with its type.
fn exported() -> BTreeSet<String> {
    let list = family_list();
    let text = encoded_with_every_family();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (family, kind) = rest.split_once(' ').unwrap();
        let listed = if kind == "counter" {
            format!("{family}_total")
        } else {
            family.to_string()
        };
        assert!(
            list.contains(&(listed.clone(), kind.to_string())),
            "{listed} ({kind}) is not in the family list of controller/src/metrics.rs: {list:?}"
        );
    }
    let mut names = BTreeSet::new();
    for (name, kind) in list {
        match kind.as_str() {
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            "counter" | "gauge" => {
                names.insert(name);
            }
            other => panic!("{name}: a {other} family"),
        }
    }
    names
}

/// Every query of the dashboard (panel targets and the templating's `label_values`).
fn dashboard_queries(dashboard: &Value) -> Vec<String> {
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            queries.push(target["expr"].as_str().unwrap().to_string());
        }
    }
    for var in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(q) = var["query"]["query"].as_str() {
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|q| q.split_once(','))
                .map(|(metric, _)| metric.trim().to_string())
                .unwrap_or_else(|| panic!("unexpected variable query {q}"));
            queries.push(inner);
        }
    }
    queries
}

#[test]
fn the_alerts_and_the_dashboard_query_only_exported_metrics() {
    let exported = exported();
    let dashboard: Value = serde_json::from_str(&read(DASHBOARD)).unwrap();
    let mut queries: Vec<(String, String)> = rules()
        .iter()
        .map(|r| (RULES.to_string(), r["expr"].as_str().unwrap().to_string()))
        .collect();
    queries.extend(
        dashboard_queries(&dashboard)
            .into_iter()
            .map(|q| (DASHBOARD.to_string(), q)),
    );
    let mut used = BTreeSet::new();
    for (file, query) in &queries {
        let names = metric_names(query);
        assert!(!names.is_empty(), "{file}: no metric in {query}");
        for name in names {
            assert!(
                name == "up" || exported.contains(&name),
                "{file}: {name} is not a metric the controller exports ({query}); it has {exported:?}"
            );
            used.insert(name);
        }
    }
    // The signals the alerts are built on are among them.
    for name in [
        "bootc_pool_condition",
        "bootc_pool_nodes_unreported",
        "bootc_pool_oldest_in_state_seconds",
        "bootc_pool_leader",
        "up",
    ] {
        assert!(used.contains(name), "nothing queries {name}");
    }
}

#[test]
fn the_dashboard_shows_progress_slots_latency_and_resolution_errors() {
    let dashboard: Value = serde_json::from_str(&read(DASHBOARD)).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    let expr_of = |title: &str| -> String {
        let panel = panels
            .iter()
            .find(|p| p["title"] == title)
            .unwrap_or_else(|| panic!("no panel {title:?}"));
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        panel["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["expr"].as_str().unwrap())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(expr_of("Pool progress").contains("state=\"UpToDate\""));
    assert!(expr_of("Reboot slots in use").contains("state=\"Rebooting\""));
    let latency = expr_of("Reconcile latency p50 / p99");
    assert!(latency.contains("histogram_quantile(0.5,"), "{latency}");
    assert!(latency.contains("histogram_quantile(0.99,"), "{latency}");
    assert!(latency.contains("bootc_pool_reconcile_duration_seconds_bucket"));
    assert!(expr_of("Tag resolution errors").contains("result!=\"success\""));
    // Every panel but the rows has a query, and the ids are distinct.
    let mut ids = BTreeSet::new();
    for p in panels {
        assert!(
            ids.insert(p["id"].as_u64().unwrap()),
            "id {} twice",
            p["id"]
        );
        if p["type"] != "row" {
            assert!(
                !p["targets"].as_array().unwrap().is_empty(),
                "{}",
                p["title"]
            );
        }
    }
}

#[tokio::test]
async fn the_dashboards_queries_parse_as_promql() {
    let dashboard: Value = serde_json::from_str(&read(DASHBOARD)).unwrap();
    // Each panel query as a recording rule, Grafana's variables given values, so that
    // `promtool check rules` parses them.
    let rules: Vec<Value> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .enumerate()
        .map(|(i, t)| {
            let expr = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "5m")
                .replace("$pool", ".*");
            assert!(!expr.contains('$'), "an unknown variable in {expr}");
            serde_json::json!({"record": format!("dashboard:query_{i}"), "expr": expr})
        })
        .collect();
    assert!(rules.len() >= 10, "{rules:?}");
    let file = serde_json::json!({"groups": [{"name": "dashboard", "rules": rules}]});
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dashboard-queries.yaml");
    // JSON is YAML.
    std::fs::write(&path, file.to_string()).unwrap();
    let checked = promtool(&["check", "rules", path.to_str().unwrap()]).await;
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", rules.len())),
        "{checked}"
    );
}
