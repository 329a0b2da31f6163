use super::*;

fn fires(alerts: &Alerts, now: u64, text: &str) -> Vec<String> {
    alerts
        .firing_at(Duration::from_secs(now), text)
        .into_iter()
        .map(|f| f.alert)
        .collect()
}

#[test]
fn the_shipped_rules_read_each_with_a_severity_and_a_summary() {
    let rules = read_rules(RULES).unwrap();
    let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "PinprovePoStLate",
            "PinproveProofFailed",
            "PinproveRequestRefused",
            "PinproveRequestRefusedFull",
            "PinproveDeviceIdleWhileWorkWaits",
            "PinproveParametersReloaded"
        ]
    );
    for r in &rules {
        assert!(["critical", "warning"].contains(&r.severity.as_str()), "{r:?}");
        assert!(r.summary.len() > 20, "{r:?}");
    }
    // A rule without its expression, or one that does not read, is said.
    let missing = read_rules("- alert: X\n  summary: s\n  severity: warning\n").unwrap_err();
    assert!(missing.to_string().contains("X has no expr"), "{missing}");
    let bad = read_rules("- alert: Y\n  expr: rate(x)\n  severity: w\n  summary: s\n").unwrap_err();
    assert!(bad.to_string().starts_with("rule Y:"), "{bad}");
}

#[test]
fn exposition_text_reads_with_labels_escapes_and_only_the_wanted_metrics() {
    let text =
        "# HELP a x\n# TYPE a counter\na 3\nb{circuit=\"p\\\"q\\\\r\",device=\"gpu0\"} 2.5\nc 1\nbad{x=\"1\" 7\n";
    let wanted: BTreeSet<String> = ["a", "b", "bad"].iter().map(|s| s.to_string()).collect();
    let s = read_exposition(text, &wanted);
    assert_eq!(s["a"], vec![(Labels::new(), 3.0)]);
    let (l, v) = &s["b"][0];
    assert_eq!(
        (l["circuit"].as_str(), l["device"].as_str(), *v),
        ("p\"q\\r", "gpu0", 2.5)
    );
    assert!(!s.contains_key("c") && !s.contains_key("bad"), "{s:?}");
}

/// The daemon's metrics text as far as the rules read it.
fn text(failed: u64, refused: u64, busy: f64, waiting: u64, loads: u64, wpost_age: f64) -> String {
    format!(
        "pinprove_jobs_failed_total {failed}\n\
         pinprove_requests_refused_total {refused}\n\
         pinprove_requests_refused_full_total 0\n\
         pinprove_device_busy_seconds_total{{device=\"gpu0\"}} {busy}\n\
         pinprove_partitions_waiting {waiting}\n\
         pinprove_srs_loads_total{{circuit=\"wpost-32g\"}} {loads}\n\
         pinprove_jobs_oldest_seconds{{kind=\"wpost\"}} {wpost_age}\n\
         pinprove_jobs_oldest_seconds{{kind=\"porep\"}} 4000\n\
         pinprove_job_latency_bound_seconds{{kind=\"wpost\"}} 300\n\
         pinprove_job_latency_bound_seconds{{kind=\"winning\"}} 10\n"
    )
}

#[test]
fn each_rule_fires_when_its_condition_holds_and_only_then() {
    let alerts = Alerts::new(read_rules(RULES).unwrap());
    // A quiet start: a PoRep an hour old has no bound.
    alerts.record_at(Duration::ZERO, &text(0, 0, 0.0, 0, 1, 0.0));
    assert!(fires(&alerts, 15, &text(0, 0, 10.0, 0, 1, 20.0)).is_empty());
    // A failure, a refusal: each fires.
    assert_eq!(
        fires(&alerts, 15, &text(1, 0, 10.0, 0, 1, 0.0)),
        ["PinproveProofFailed"]
    );
    assert_eq!(
        fires(&alerts, 15, &text(0, 2, 10.0, 0, 1, 0.0)),
        ["PinproveRequestRefused"]
    );
    // A WindowPoSt past its 5 minutes.
    assert_eq!(fires(&alerts, 15, &text(0, 0, 10.0, 0, 1, 301.0)), ["PinprovePoStLate"]);
    // Parameters loaded a third and fourth time within the hour.
    assert_eq!(
        fires(&alerts, 15, &text(0, 0, 10.0, 0, 4, 0.0)),
        ["PinproveParametersReloaded"]
    );
    assert!(fires(&alerts, 15, &text(0, 0, 10.0, 0, 3, 0.0)).is_empty());
}

#[test]
fn the_idle_device_rule_needs_work_waiting_all_along_and_forgets_old_events() {
    let alerts = Alerts::new(read_rules(RULES).unwrap());
    let idle_waiting = |t: u64, busy: f64, waiting: u64| (t, text(0, 0, busy, waiting, 1, 0.0));
    // Five minutes with a partition waiting and the device busy 20%.
    for (t, s) in (0..=20).map(|i| idle_waiting(i * 15, i as f64 * 3.0, 1)) {
        alerts.record_at(Duration::from_secs(t), &s);
    }
    let (t, now) = idle_waiting(315, 63.0, 1);
    assert_eq!(fires(&alerts, t, &now), ["PinproveDeviceIdleWhileWorkWaits"]);
    // Busy 80% instead: no alert.
    let alerts = Alerts::new(read_rules(RULES).unwrap());
    for (t, s) in (0..=20).map(|i| idle_waiting(i * 15, i as f64 * 12.0, 1)) {
        alerts.record_at(Duration::from_secs(t), &s);
    }
    assert!(fires(&alerts, 315, &idle_waiting(315, 252.0, 1).1).is_empty());
    // Idle, but nothing waited at one point of the window: no alert.
    let alerts = Alerts::new(read_rules(RULES).unwrap());
    for (t, s) in (0..=20).map(|i| idle_waiting(i * 15, 0.0, u64::from(i != 7))) {
        alerts.record_at(Duration::from_secs(t), &s);
    }
    assert!(fires(&alerts, 315, &idle_waiting(315, 0.0, 1).1).is_empty());
    // A failure two hours ago is forgotten, and the samples with it.
    let alerts = Alerts::new(read_rules(RULES).unwrap());
    alerts.record_at(Duration::ZERO, &text(0, 0, 0.0, 0, 1, 0.0));
    alerts.record_at(Duration::from_secs(15), &text(1, 0, 0.0, 0, 1, 0.0));
    for i in 2..=480 {
        alerts.record_at(Duration::from_secs(i * 15), &text(1, 0, 0.0, 0, 1, 0.0));
    }
    assert!(fires(&alerts, 7215, &text(1, 0, 0.0, 0, 1, 0.0)).is_empty());
    assert!(alerts.samples.lock().recover().len() <= 3600 / 15 + 2);
}
