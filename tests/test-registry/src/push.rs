//! Building tiny images without a container engine (`umoci`) and pushing them with
//! `skopeo`; manifest lists put together by hand.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::http_client::{Response, http, http_with_body};
use crate::{Error, Registry, host_architecture, io_err, run};

/// What [`Registry::push_index`] pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushedIndex {
    /// The manifest list's digest.
    pub index: String,
    /// The linux/amd64 manifest's digest.
    pub amd64: String,
    /// The linux/arm64 manifest's digest.
    pub arm64: String,
}

impl Registry {
    fn creds_arg(&self) -> Option<String> {
        self.credentials().map(|(u, p)| format!("{u}:{p}"))
    }

    /// Builds a one-layer image in a new OCI layout under `work` (architecture `arch`,
    /// the given labels, a file with unique content) and returns the layout path.
    fn build(
        &self,
        work: &Path,
        tag: &str,
        arch: &str,
        labels: &[(&str, &str)],
    ) -> Result<String, Error> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let layout = work.join("layout");
        let layout_s = layout.to_string_lossy().into_owned();
        if !layout.exists() {
            run("umoci", &["init", "--layout", &layout_s])?;
        }
        let image = format!("{layout_s}:{tag}");
        run("umoci", &["new", "--image", &image])?;
        let mut args: Vec<String> = vec![
            "config".into(),
            "--image".into(),
            image.clone(),
            "--architecture".into(),
            arch.into(),
            "--os".into(),
            "linux".into(),
        ];
        for (k, v) in labels {
            args.push("--config.label".into());
            args.push(format!("{k}={v}"));
        }
        let args_ref: Vec<&str> = args.iter().map(String::as_str).collect();
        run("umoci", &args_ref)?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let unique = format!(
            "{} {} {} {nanos}\n",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            self.port
        );
        let src = work.join(format!("unique-{tag}"));
        std::fs::write(&src, unique).map_err(io_err("writing the unique file"))?;
        run(
            "umoci",
            &[
                "insert",
                "--rootless",
                "--image",
                &image,
                &src.to_string_lossy(),
                "/etc/test-registry-unique",
            ],
        )?;
        Ok(image)
    }

    fn copy(&self, oci_image: &str, dest: &str, work: &Path) -> Result<String, Error> {
        let digestfile = work.join("digest");
        let digestfile_s = digestfile.to_string_lossy().into_owned();
        let oci = format!("oci:{oci_image}");
        let docker = format!("docker://{dest}");
        let mut args = vec![
            "--insecure-policy",
            "copy",
            "--quiet",
            "--dest-tls-verify=false",
            "--digestfile",
            &digestfile_s,
        ];
        let creds = self.creds_arg();
        if let Some(c) = &creds {
            args.push("--dest-creds");
            args.push(c);
        }
        args.push(&oci);
        args.push(&docker);
        run("skopeo", &args)?;
        let digest =
            std::fs::read_to_string(&digestfile).map_err(io_err("reading the digest file"))?;
        Ok(digest.trim().to_owned())
    }

    /// Builds an image for this machine's architecture with `labels` and unique content,
    /// pushes it as `REPO:TAG`, and returns its manifest digest (`sha256:<hex>`).
    pub fn push(&self, repo: &str, tag: &str, labels: &[(&str, &str)]) -> Result<String, Error> {
        let work = tempfile::tempdir().map_err(io_err("creating a build directory"))?;
        let image = self.build(work.path(), tag, host_architecture(), labels)?;
        self.copy(
            &image,
            &format!("{}/{repo}:{tag}", self.host()),
            work.path(),
        )
    }

    /// Points `REPO:TO` at the manifest `REPO:FROM` points at, byte for byte (so the
    /// digest is the same); returns that digest.
    pub fn retag(&self, repo: &str, from: &str, to: &str) -> Result<String, Error> {
        const OCI: &str = "application/vnd.oci.image.manifest.v1+json";
        let accept = format!("{OCI}, application/vnd.docker.distribution.manifest.v2+json");
        let got = http(
            &self.host(),
            "GET",
            &format!("/v2/{repo}/manifests/{from}"),
            &[("Accept", accept.as_str())],
            self.credentials(),
        );
        let got = answered(got, 200, &format!("reading {repo}:{from}"))?;
        let media = got.header("content-type").unwrap_or(OCI).to_owned();
        let put = http_with_body(
            &self.host(),
            "PUT",
            &format!("/v2/{repo}/manifests/{to}"),
            &[("Content-Type", media.as_str())],
            self.credentials(),
            &got.body,
        );
        let put = answered(put, 201, &format!("tagging {repo}:{to}"))?;
        put.header("docker-content-digest")
            .map(str::to_owned)
            .ok_or_else(|| Error::Http(format!("tagging {repo}:{to}: no digest in the answer")))
    }

    /// Pushes a linux/amd64 and a linux/arm64 image (both with `labels`) and an OCI image
    /// index over them as `REPO:TAG`; returns the three digests.
    pub fn push_index(
        &self,
        repo: &str,
        tag: &str,
        labels: &[(&str, &str)],
    ) -> Result<PushedIndex, Error> {
        let work = tempfile::tempdir().map_err(io_err("creating a build directory"))?;
        let mut pushed = Vec::new();
        for arch in ["amd64", "arm64"] {
            let t = format!("{tag}-{arch}");
            let image = self.build(work.path(), &t, arch, labels)?;
            let digest = self.copy(&image, &format!("{}/{repo}:{t}", self.host()), work.path())?;
            // The size of the manifest, as the registry serves it.
            let resp = http(
                &self.host(),
                "GET",
                &format!("/v2/{repo}/manifests/{digest}"),
                &[("Accept", "application/vnd.oci.image.manifest.v1+json")],
                self.credentials(),
            );
            let resp = answered(resp, 200, &format!("reading manifest {digest}"))?;
            pushed.push((arch, digest, resp.body.len()));
        }
        let entries: Vec<String> = pushed
            .iter()
            .map(|(arch, digest, size)| {
                format!(
                    "{{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"{digest}\",\"size\":{size},\"platform\":{{\"architecture\":\"{arch}\",\"os\":\"linux\"}}}}"
                )
            })
            .collect();
        let index = format!(
            "{{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[{}]}}",
            entries.join(",")
        );
        let resp = http_with_body(
            &self.host(),
            "PUT",
            &format!("/v2/{repo}/manifests/{tag}"),
            &[("Content-Type", "application/vnd.oci.image.index.v1+json")],
            self.credentials(),
            index.as_bytes(),
        )
        .map_err(|e| Error::Http(format!("putting the index: {e}")))?;
        if resp.status != 201 {
            return Err(Error::Http(format!(
                "putting the index: HTTP {}: {}",
                resp.status,
                String::from_utf8_lossy(&resp.body)
            )));
        }
        let index = resp
            .header("docker-content-digest")
            .ok_or_else(|| Error::Http("no Docker-Content-Digest for the index".into()))?
            .to_owned();
        let digest_of = |a: &str| {
            pushed
                .iter()
                .find(|(arch, _, _)| *arch == a)
                .map(|(_, d, _)| d.clone())
                .unwrap_or_default()
        };
        Ok(PushedIndex {
            index,
            amd64: digest_of("amd64"),
            arm64: digest_of("arm64"),
        })
    }
}

/// The registry's answer when it has status `want`; otherwise an error saying what was
/// being done (`what`) and what went wrong.
fn answered(resp: std::io::Result<Response>, want: u16, what: &str) -> Result<Response, Error> {
    let resp = resp.map_err(|e| Error::Http(format!("{what}: {e}")))?;
    if resp.status != want {
        return Err(Error::Http(format!("{what}: HTTP {}", resp.status)));
    }
    Ok(resp)
}
