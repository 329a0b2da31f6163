use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::Priority;
use crate::planner::KindCosts;

const G: u64 = 1 << 30;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// A stream kind and an urgent kind whose parameters do not fit together
/// (45 and 56 GiB in 90), and a Critical kind that holds no host memory.
fn setup(policy: Policy) -> Setup {
    let kind = |priority, sections: &[u64], recording: u64, synthesis: f64, device: f64| KindCosts {
        priority,
        sections: sections.iter().map(|g| g * G).collect(),
        section_load: sections.iter().map(|g| secs(*g as f64 / 1.4)).collect(),
        recording_bytes: recording * G,
        recording_load: secs(recording as f64 * 1.8),
        partition_bytes: 4 * G,
        synthesis: secs(synthesis),
        classic_synthesis: secs(synthesis * 12.0),
        device: secs(device),
        section_release: Vec::new(),
    };
    let costs = BTreeMap::from([
        (
            "porep".to_string(),
            kind(Priority::Normal, &[12, 12, 12, 3, 6], 7, 2.1, 2.6),
        ),
        (
            "wpost".to_string(),
            kind(Priority::High, &[12, 11, 9, 8, 16], 9, 4.0, 7.0),
        ),
        ("winning".to_string(), kind(Priority::Critical, &[], 0, 0.02, 0.1)),
    ]);
    let at = |s: f64, kind: &str, partitions| Arrival {
        at: secs(s),
        kind: kind.into(),
        partitions,
    };
    Setup {
        costs,
        policy,
        budget: 98 * G,
        reserve: 2 * G,
        synthesis_slots: 4,
        urgent_synthesis_slots: 2,
        device_piece: secs(1.25),
        pieces_up_to: Priority::Normal,
        preloaded: vec!["porep".into(), "winning".into()],
        recorded: vec!["porep".into(), "wpost".into()],
        day: secs(360.0),
        grace: secs(180.0),
        arrivals: vec![
            at(60.0, "wpost", 1),
            at(60.0, "wpost", 1),
            at(60.0, "wpost", 1),
            at(100.0, "winning", 1),
            at(240.0, "wpost", 1),
            at(240.0, "wpost", 1),
            at(240.0, "wpost", 1),
            at(300.0, "winning", 1),
        ],
        streams: vec![Stream {
            kind: "porep".into(),
            in_flight: 2,
            partitions: 10,
        }],
    }
}

#[test]
fn a_day_proves_every_post_and_the_stream_between_them_the_same_way_every_time() {
    for policy in [Policy::default(), Policy::planned()] {
        let s = setup(policy);
        let out = run(&s, None);
        assert_eq!(out, run(&s, None), "the same day, the same outcome");
        assert_eq!(out.refused(), 0, "{policy:?}");
        assert_eq!(out.proved("wpost"), 6, "{policy:?}: {:?}", out.jobs);
        assert_eq!(out.proved("winning"), 2, "{policy:?}");
        assert!(out.proved("porep") >= 3, "{policy:?}: {}", out.proved("porep"));
        assert!(out.fullest.used <= s.budget);
        assert!(out.device_busy <= s.day);
    }
}

#[test]
fn the_planned_policy_keeps_the_device_busier_and_the_posts_quicker_than_the_engines_rules() {
    let before = run(&setup(Policy::default()), None);
    let after = run(&setup(Policy::planned()), None);
    let worst = |o: &Outcome| o.latencies("wpost").iter().map(|l| l.1).max().unwrap();
    assert!(
        after.device_busy > before.device_busy,
        "{:?} {:?}",
        after.device_busy,
        before.device_busy
    );
    assert!(
        worst(&after) < worst(&before),
        "{:?} {:?}",
        worst(&after),
        worst(&before)
    );
    assert!(after.proved("porep") >= before.proved("porep"));
}

#[test]
fn the_timeline_has_the_days_loads_syntheses_and_device_work() {
    let tl = crate::timeline::Timeline::new(100_000);
    let out = run(&setup(Policy::planned()), Some(&tl));
    let spans = tl.spans();
    for phase in [
        crate::Phase::SrsLoad,
        crate::Phase::Synthesis,
        crate::Phase::Start,
        crate::Phase::Admission,
    ] {
        assert!(spans.iter().any(|s| s.name == phase), "no {phase} span");
    }
    let device: Duration = spans.iter().filter(|s| s.lane == "gpu0").map(|s| s.duration).sum();
    assert!(device >= out.device_busy);
    assert!(tl.svg().contains("<svg"));
}
