//! What the unit tests share: objects as the controller, the agents and the kubelet
//! write them, built from JSON.

pub mod fixtures;
