//! The Kubernetes launcher, offline: manifests, `kubectl`, and the Job's pods run locally.

mod apply;
mod clock;
mod job;
pub(crate) mod kubelet;
