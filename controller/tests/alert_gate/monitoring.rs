//! A real Prometheus and Alertmanager on loopback, scraping a gauge the test sets: the
//! alert `NodeTrouble{severity="critical"}` fires while the gauge is above 0.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde_json::Value;
use tokio::time::Instant;

/// How long Prometheus or Alertmanager may take to start, or an alert to change.
const START: Duration = Duration::from_secs(60);

/// A process this test started, killed (by its PID) and waited for on drop.
pub struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(name: &'static str, program: &str, args: &[String], dir: &Path) -> Proc {
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let err = out.try_clone().unwrap();
        let child = Command::new(program)
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {program} ({e}); scripts/install-packages installs it")
            });
        Proc { name, child, log }
    }

    /// Panics, with the log, when the process has exited.
    fn check_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            panic!("{} exited ({status}); its log:\n{log}", self.name);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free port on loopback (bound, read, released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The gauge server, Prometheus and Alertmanager, and their files.
pub struct Monitoring {
    gauge: Arc<AtomicU64>,
    server: tokio::task::JoinHandle<()>,
    prometheus: Proc,
    alertmanager: Proc,
    /// Prometheus's base URL.
    pub prometheus_url: String,
    /// Alertmanager's base URL.
    pub alertmanager_url: String,
    http: reqwest::Client,
    // Last: removed once the processes are gone.
    _dir: tempfile::TempDir,
}

impl Drop for Monitoring {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn metrics(State(gauge): State<Arc<AtomicU64>>) -> String {
    format!(
        "# TYPE node_trouble gauge\nnode_trouble {}\n",
        gauge.load(Ordering::SeqCst)
    )
}

const RULES: &str = "groups:
  - name: test
    interval: 1s
    rules:
      - alert: NodeTrouble
        expr: node_trouble > 0
        for: 0s
        labels:
          severity: critical
";

const ALERTMANAGER_CONFIG: &str = "route:
  receiver: nowhere
  group_wait: 1s
receivers:
  - name: nowhere
";

impl Monitoring {
    /// Starts all three and waits until Prometheus scrapes the gauge (at 0).
    pub async fn start() -> Monitoring {
        let dir = tempfile::Builder::new()
            .prefix("alert-gate-")
            .tempdir()
            .unwrap();
        let gauge = Arc::new(AtomicU64::new(0));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = listener.local_addr().unwrap();
        let app = Router::new()
            .route("/metrics", get(metrics))
            .with_state(Arc::clone(&gauge));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let (am_port, prom_port) = (free_port(), free_port());
        let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
        std::fs::write(dir.path().join("alertmanager.yml"), ALERTMANAGER_CONFIG).unwrap();
        std::fs::write(dir.path().join("rules.yml"), RULES).unwrap();
        let prometheus_config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files: [{rules}]\n\
             alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:{am_port}']\n\
             scrape_configs:\n  - job_name: trouble\n    static_configs:\n      - targets: ['{target}']\n",
            rules = path("rules.yml"),
        );
        std::fs::write(dir.path().join("prometheus.yml"), prometheus_config).unwrap();
        let alertmanager = Proc::spawn(
            "alertmanager",
            "prometheus-alertmanager",
            &[
                format!("--config.file={}", path("alertmanager.yml")),
                format!("--storage.path={}", path("alertmanager-data")),
                format!("--web.listen-address=127.0.0.1:{am_port}"),
                "--cluster.listen-address=".to_owned(),
            ],
            dir.path(),
        );
        let prometheus = Proc::spawn(
            "prometheus",
            "prometheus",
            &[
                format!("--config.file={}", path("prometheus.yml")),
                format!("--storage.tsdb.path={}", path("prometheus-data")),
                format!("--web.listen-address=127.0.0.1:{prom_port}"),
                "--rules.alert.resend-delay=1s".to_owned(),
            ],
            dir.path(),
        );
        let mut m = Monitoring {
            gauge,
            server,
            prometheus,
            alertmanager,
            prometheus_url: format!("http://127.0.0.1:{prom_port}"),
            alertmanager_url: format!("http://127.0.0.1:{am_port}"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
            _dir: dir,
        };
        m.wait("the gauge scraped", async |m| {
            let query = format!("{}/api/v1/query?query=node_trouble", m.prometheus_url);
            let answer = m.get_json(&query).await?;
            let result = answer.pointer("/data/result")?.as_array()?;
            (!result.is_empty()).then_some(())
        })
        .await;
        m.wait("Alertmanager ready", async |m| {
            let url = format!("{}/-/ready", m.alertmanager_url);
            let status = m.http.get(url).send().await.ok()?.status();
            status.is_success().then_some(())
        })
        .await;
        m
    }

    async fn get_json(&self, url: &str) -> Option<Value> {
        let response = self.http.get(url).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        response.json().await.ok()
    }

    /// Polls `check` until it gives a value, failing with the logs if a process exits or
    /// the deadline passes.
    async fn wait<T>(
        &mut self,
        what: &str,
        mut check: impl AsyncFnMut(&Monitoring) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + START;
        loop {
            self.prometheus.check_running();
            self.alertmanager.check_running();
            if let Some(t) = check(self).await {
                return t;
            }
            if Instant::now() >= deadline {
                let prometheus = std::fs::read_to_string(&self.prometheus.log).unwrap_or_default();
                let alertmanager =
                    std::fs::read_to_string(&self.alertmanager.log).unwrap_or_default();
                panic!(
                    "timed out waiting for {what}\nprometheus log:\n{prometheus}\nalertmanager log:\n{alertmanager}"
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Sets the gauge, and waits until both Prometheus and Alertmanager say NodeTrouble
    /// fires (`value > 0`) or not.
    pub async fn set_trouble(&mut self, value: u64) {
        self.gauge.store(value, Ordering::SeqCst);
        let firing = value > 0;
        let what = format!("NodeTrouble firing: {firing}");
        self.wait(&what, async |m| {
            let (prom, am) = m.node_trouble().await?;
            (prom == firing && am == firing).then_some(())
        })
        .await;
    }

    /// Whether NodeTrouble fires at Prometheus and is active at Alertmanager.
    async fn node_trouble(&self) -> Option<(bool, bool)> {
        let prom = self
            .get_json(&format!("{}/api/v1/alerts", self.prometheus_url))
            .await?;
        let prom = prom.pointer("/data/alerts")?.as_array()?.iter().any(|a| {
            a.pointer("/labels/alertname") == Some(&Value::from("NodeTrouble"))
                && a.get("state") == Some(&Value::from("firing"))
        });
        let am = self
            .get_json(&format!(
                "{}/api/v2/alerts?active=true&silenced=false&inhibited=false",
                self.alertmanager_url
            ))
            .await?;
        let am = am.as_array()?.iter().any(|a| {
            a.pointer("/labels/alertname") == Some(&Value::from("NodeTrouble"))
                && a.pointer("/status/state") == Some(&Value::from("active"))
        });
        Some((prom, am))
    }
}
