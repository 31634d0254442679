//! Slot holders found unhealthy, and why: what the gates count and the pool's status
//! lists, and what a settled holder keeps of it.

use std::borrow::Cow;

/// A slot holder found unhealthy, and why: written out only when it is listed (a wave
/// of unhealthy holders costs no text per plan beyond the few a message shows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in super::super) struct Unhealthy<'a> {
    pub(super) node: &'a str,
    pub(super) why: Why<'a>,
}

impl<'a> Unhealthy<'a> {
    /// A settled holder `node`, unhealthy for the reason kept with its outcome.
    pub(in super::super) fn kept(node: &'a str, why: &Why<'static>) -> Self {
        Unhealthy {
            node,
            why: why.clone(),
        }
    }

    /// Why, to be kept with a settled holder's outcome.
    pub(in super::super) fn why(&self) -> Why<'static> {
        match &self.why {
            Why::NotReady => Why::NotReady,
            Why::Degraded(reason, message) => Why::Degraded(
                Cow::Owned(String::from(&**reason)),
                Cow::Owned(String::from(&**message)),
            ),
            Why::Found(reason, found) => Why::Found(reason, found.clone()),
        }
    }
}

/// Why a slot holder is unhealthy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in super::super) enum Why<'a> {
    /// NotReady outside its own reboot.
    NotReady,
    /// Its agent reports `Degraded=True` for the current spec: reason and message.
    Degraded(Cow<'a, str>, Cow<'a, str>),
    /// A reason of the plan's own, and what it found.
    Found(&'static str, String),
}

impl Why<'_> {
    /// The reason and message it is degraded for in the pool's status (every reason
    /// but NotReady, which the pool's status does not list).
    pub(in super::super) fn degraded(&self) -> Option<(String, String)> {
        match self {
            Why::NotReady => None,
            Why::Degraded(reason, message) => {
                Some((String::from(&**reason), String::from(&**message)))
            }
            Why::Found(reason, found) => Some(((*reason).to_owned(), found.clone())),
        }
    }
}

impl std::fmt::Display for Unhealthy<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let node = self.node;
        match &self.why {
            Why::NotReady => write!(f, "node {node}: NotReady"),
            Why::Degraded(reason, message) => write!(f, "node {node}: {reason}: {message}"),
            Why::Found(reason, message) => write!(f, "node {node}: {reason}: {message}"),
        }
    }
}
