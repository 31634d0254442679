//! The project's own tools, run as `cargo xtask …`:
//!
//! - [`install`]: renders `deploy/install.yaml` from `deploy/manifests/` and the CRDs;
//! - [`kustomize`]: the kustomize base in `deploy/manifests/` (its kustomization and
//!   copies of the CRDs) and the monitoring overlay's PrometheusRule, from the alerts;
//! - [`limits`]: the size limits of non-test source files and functions;
//! - [`msrv`]: the workspace's `rust-version` is the newest its dependencies need;
//! - [`reference`]: `docs/reference.md`, every metric, condition, Event reason, label,
//!   annotation and finalizer, read from the code that defines them;
//! - [`test_guard`]: a net for tests that prove nothing (hollow assertions, early
//!   returns, negative checks held for a stretch of time);
//! - the CRDs themselves are rendered by `bootc_crds::crdgen` from the API types.
//!
//! `cargo xtask gen` writes the generated files; `cargo xtask check` fails when one of
//! them differs from what would be generated, when a source breaks a size limit, or
//! when the test guard finds something.

pub mod install;
pub mod kustomize;
pub mod limits;
pub mod msrv;
pub mod reference;
pub mod test_guard;
