use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::Priority;

const G: u64 = 1 << 30;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A background kind of 45 GiB of parameters and an urgent one of 56 GiB
/// (PoRep's and WindowPoSt's shapes, loaded at 1 GiB/s), and a Critical
/// one that holds no host memory.
fn costs() -> BTreeMap<String, KindCosts> {
    let kind = |priority, sections: &[u64], recording: u64, device: u64| KindCosts {
        priority,
        sections: sections.iter().map(|g| g * G).collect(),
        section_load: sections.iter().map(|g| secs(*g)).collect(),
        recording_bytes: recording * G,
        recording_load: secs(recording * 2),
        partition_bytes: 4 * G,
        synthesis: secs(2),
        classic_synthesis: secs(100),
        device: secs(device),
        section_release: Vec::new(),
    };
    BTreeMap::from([
        ("bg".to_string(), kind(Priority::Normal, &[12, 12, 12, 3, 6], 7, 3)),
        ("urgent".to_string(), kind(Priority::High, &[12, 11, 9, 8, 16], 9, 7)),
        ("critical".to_string(), kind(Priority::Critical, &[], 0, 1)),
    ])
}

fn resident(sections: usize, recording: bool) -> KindState {
    KindState {
        sections: vec![Residency::Resident; sections],
        recording: if recording {
            Residency::Resident
        } else {
            Residency::Absent
        },
        ..KindState::default()
    }
}

fn partition(id: u64, kind: &str, priority: Priority, at: Where) -> PartitionState {
    PartitionState {
        id,
        kind: kind.into(),
        priority,
        arrived: secs(1000),
        at,
    }
}

/// At 1000 s: the background kind resident with its recording, last used
/// long ago; the urgent kind's recording resident, its parameters not;
/// three urgent partitions queued.
fn burst(budget: u64) -> State {
    State {
        now: secs(1000),
        budget,
        reserve: 2 * G,
        kinds: BTreeMap::from([
            ("bg".into(), resident(5, true)),
            (
                "urgent".into(),
                KindState {
                    recording: Residency::Resident,
                    ..KindState::absent(5)
                },
            ),
        ]),
        partitions: (0..3)
            .map(|i| partition(i, "urgent", Priority::High, Where::Queued))
            .collect(),
        loads_running: 0,
    }
}

fn evicted(p: &Plan) -> Vec<(String, usize)> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Evict { kind, section } => Some((kind.clone(), *section)),
            _ => None,
        })
        .collect()
}

#[test]
fn an_urgent_kind_takes_an_idle_background_kinds_whole_parameters_or_only_the_sections_it_needs() {
    let costs = costs();
    let state = burst(98 * G);
    // The engine's rules: the recording first, then the whole set.
    let p = plan(&costs, &Policy::default(), &state);
    assert!(
        p.actions.contains(&Action::EvictRecording { kind: "bg".into() }),
        "{p:?}"
    );
    assert_eq!(evicted(&p).len(), 5, "{p:?}");
    // The first partition carries the load; the rest wait for it.
    assert!(p.actions.contains(&Action::Admit { partition: 0 }));
    assert_eq!(p.waits, vec![(1, WaitReason::Parameters), (2, WaitReason::Parameters)]);
    // Sections, recordings kept: 61 GiB held, 37 free, 56 + 12 needed:
    // 31 short; two 12 GiB sections, the 6 and the 3 go (33 GiB), the
    // recording and a 12 GiB section stay.
    let policy = Policy {
        evict_sections: true,
        recordings_first: true,
        load_ahead: true,
        synthesize_while_loading: true,
        ..Policy::default()
    };
    let p = plan(&costs, &policy, &state);
    let gone: u64 = evicted(&p).iter().map(|(k, i)| costs[k].sections[*i]).sum();
    assert_eq!(gone, 33 * G, "{p:?}");
    assert!(!p.actions.iter().any(|a| matches!(a, Action::EvictRecording { .. })));
    for i in 0..3 {
        assert!(p.actions.contains(&Action::Admit { partition: i }), "{p:?}");
    }
}

#[test]
fn background_work_waits_for_fresh_parameters_while_work_is_in_flight_and_they_give_way_when_nothing_is() {
    let costs = costs();
    let mut state = State {
        now: secs(1000),
        budget: 80 * G,
        reserve: 2 * G,
        kinds: BTreeMap::from([(
            "urgent".into(),
            KindState {
                last_used: secs(990),
                ..resident(5, true)
            },
        )]),
        partitions: vec![
            partition(0, "bg", Priority::Normal, Where::Queued),
            partition(1, "critical", Priority::Critical, Where::Device),
        ],
        loads_running: 0,
    };
    // Loaded in 56 s, used 10 s ago: kept until 1046 s.
    let p = plan(&costs, &Policy::default(), &state);
    let until = secs(990 + 56);
    assert_eq!(
        p.waits,
        vec![(
            0,
            WaitReason::IdleParameters {
                kind: "urgent".into(),
                until
            }
        )]
    );
    assert_eq!(p.wake_at, Some(until));
    // Nothing in flight: they give way.
    state.partitions.truncate(1);
    let p = plan(&costs, &Policy::default(), &state);
    assert!(p.actions.contains(&Action::Admit { partition: 0 }), "{p:?}");
    assert_eq!(evicted(&p).len(), 5);
    // Unless the burst is not over: kept for its window, even then.
    state.kinds.get_mut("urgent").unwrap().last_arrival = Some(secs(980));
    let policy = Policy {
        burst_window: secs(60),
        ..Policy::default()
    };
    let p = plan(&costs, &policy, &state);
    assert_eq!(
        p.waits,
        vec![(
            0,
            WaitReason::Burst {
                kind: "urgent".into(),
                until: secs(1040)
            }
        )]
    );
    assert_eq!(p.wake_at, Some(secs(1040)));
}

#[test]
fn work_that_can_never_fit_is_refused_with_the_numbers_and_other_work_waits_in_order() {
    let costs = costs();
    // 45 GiB of parameters and a partition, in a 40 GiB budget.
    let state = State {
        now: secs(1000),
        budget: 40 * G,
        reserve: 2 * G,
        kinds: BTreeMap::new(),
        partitions: vec![partition(0, "bg", Priority::Normal, Where::Queued)],
        loads_running: 0,
    };
    let p = plan(&costs, &Policy::default(), &state);
    assert_eq!(
        p.actions,
        vec![Action::Refuse {
            partition: 0,
            needed: 49 * G,
            limit: 38 * G
        }]
    );
    // An urgent partition waiting for memory that background partitions
    // in flight hold: it waits for them, and the queued background ones
    // wait behind it.
    let mut state = burst(98 * G);
    state.partitions = vec![
        partition(10, "bg", Priority::Normal, Where::Device),
        partition(11, "bg", Priority::Normal, Where::Synthesized),
        partition(0, "urgent", Priority::High, Where::Queued),
        partition(12, "bg", Priority::Normal, Where::Queued),
    ];
    let p = plan(&costs, &Policy::default(), &state);
    assert!(matches!(p.waits[0], (0, WaitReason::Memory { .. })), "{:?}", p.waits);
    assert!(
        p.waits.contains(&(12, WaitReason::Behind { partition: 0 })),
        "{:?}",
        p.waits
    );
    assert!(p.actions.is_empty(), "{:?}", p.actions);
}

#[test]
fn spare_memory_holds_what_the_next_burst_loads_and_gives_it_back_at_once() {
    let costs = costs();
    let policy = Policy::planned();
    // The background kind resident with its recording, nothing waiting;
    // the urgent kind had a burst an hour ago.
    let mut state = burst(98 * G);
    state.partitions.clear();
    state.kinds.get_mut("urgent").unwrap().recording = Residency::Absent;
    state.kinds.get_mut("urgent").unwrap().last_arrival = Some(secs(0));
    // Its recording first (its partitions synthesize from it as they
    // arrive), one load at a time.
    let p = plan(&costs, &policy, &state);
    assert_eq!(p.actions, vec![Action::LoadRecording { kind: "urgent".into() }]);
    // Then the sections that fill the room best: 98 - 2 - 52 - 9 = 35 GiB:
    // 16 + 11 + 8 (35), the largest first.
    state.kinds.get_mut("urgent").unwrap().recording = Residency::Resident;
    let p = plan(&costs, &policy, &state);
    assert_eq!(
        p.actions,
        vec![Action::Load {
            kind: "urgent".into(),
            section: 4
        }]
    );
    // Nothing is prefetched while another load runs.
    state.loads_running = 1;
    assert!(plan(&costs, &policy, &state).actions.is_empty());
    // Background work takes prefetched sections back at once, however
    // fresh: only the bytes it needs.
    state.loads_running = 0;
    let urgent = state.kinds.get_mut("urgent").unwrap();
    urgent.sections = vec![
        Residency::Absent,
        Residency::Resident,
        Residency::Absent,
        Residency::Resident,
        Residency::Resident,
    ];
    urgent.last_used = secs(1000);
    let bg = state.kinds.get_mut("bg").unwrap();
    bg.sections[0] = Residency::Absent;
    state.partitions = vec![partition(7, "bg", Priority::Normal, Where::Queued)];
    // 52 + 9 + 35 held - 12: 84; 12 + 4 needed of 96: 4 short.
    let p = plan(&costs, &policy, &state);
    assert!(p.actions.contains(&Action::Admit { partition: 7 }), "{p:?}");
    let gone: u64 = evicted(&p).iter().map(|(k, i)| costs[k].sections[*i]).sum();
    assert_eq!(gone, 8 * G, "{p:?}");
}

#[test]
fn sections_the_last_partition_is_past_may_go_while_it_proves() {
    let costs = costs();
    // The urgent kind's last partition on the device, past its first two
    // sections (23 GiB); a background partition wants its parameters back.
    let state = State {
        now: secs(1000),
        budget: 98 * G,
        reserve: 2 * G,
        kinds: BTreeMap::from([
            (
                "bg".into(),
                KindState {
                    recording: Residency::Resident,
                    ..KindState::absent(5)
                },
            ),
            (
                "urgent".into(),
                KindState {
                    released: 2,
                    ..resident(5, true)
                },
            ),
        ]),
        partitions: vec![
            partition(0, "urgent", Priority::High, Where::Device),
            partition(1, "bg", Priority::Normal, Where::Queued),
        ],
        loads_running: 0,
    };
    let policy = Policy::planned();
    let p = plan(&costs, &policy, &state);
    assert!(p.actions.contains(&Action::Evict {
        kind: "urgent".into(),
        section: 0
    }));
    assert!(!evicted(&p).iter().any(|(k, i)| k == "urgent" && *i >= 2), "{p:?}");
    assert!(
        p.actions
            .iter()
            .any(|a| matches!(a, Action::Load { kind, .. } if kind == "bg"))
    );
    // Without: all of it waits for the partition's end.
    let policy = Policy {
        release_sections_early: false,
        ..policy
    };
    let p = plan(&costs, &policy, &state);
    assert!(evicted(&p).iter().all(|(k, _)| k != "urgent"), "{p:?}");
}
