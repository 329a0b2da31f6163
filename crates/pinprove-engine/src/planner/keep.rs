//! The one rule of whether a kind's idle parameters (no partition uses
//! them) are kept from less urgent work: the planner decides by it, and so
//! does the engine's SRS registry when it runs under a planner policy
//! ([`EngineConfig::planner`](crate::EngineConfig::planner)).

use std::time::Duration;

use super::{Policy, WaitReason};
use crate::Priority;

/// What the rule reads of a kind whose parameters are resident and idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleParams {
    /// The priority of its work (its latest job's).
    pub priority: Priority,
    /// When it was last used, and when its latest job arrived.
    pub last_used: Duration,
    /// When its latest job arrived.
    pub last_arrival: Option<Duration>,
    /// How long loading them took (or would take).
    pub load_time: Duration,
}

/// Why `kind`'s idle parameters are kept now from work of `priority`, or
/// `None` when they may go: Critical kinds' always (with
/// [`Policy::keep_critical_resident`]), an urgent kind's for its burst
/// window after its latest job arrived, and, under the engine's rule
/// ([`Policy::keep_idle_parameters`]), anyone's from work below High
/// until idle as long as the load took (at most the idle timeout) unless
/// nothing else is in flight (`giving_way`).
pub fn kept(
    policy: &Policy,
    kind: &str,
    p: IdleParams,
    priority: Priority,
    now: Duration,
    giving_way: bool,
) -> Option<WaitReason> {
    if policy.keep_critical_resident && p.priority == Priority::Critical && priority < Priority::Critical {
        return Some(WaitReason::Critical { kind: kind.into() });
    }
    if !policy.burst_window.is_zero() && p.priority.is_urgent() && priority < p.priority {
        let until = p.last_arrival.map(|a| a + policy.burst_window);
        if let Some(until) = until.filter(|u| *u > now) {
            return Some(WaitReason::Burst {
                kind: kind.into(),
                until,
            });
        }
    }
    if policy.keep_idle_parameters && !priority.is_urgent() && !giving_way {
        let until = p.last_used + policy.idle_timeout.min(p.load_time);
        if until > now {
            return Some(WaitReason::IdleParameters {
                kind: kind.into(),
                until,
            });
        }
    }
    None
}
