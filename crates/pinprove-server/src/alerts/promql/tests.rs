use super::*;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// One series: its name, labels and value.
type Series<'a> = (&'a str, &'a [(&'a str, &'a str)], f64);

/// A scrape of series.
fn scrape(series: &[Series]) -> Scrape {
    let mut s = Scrape::new();
    for (name, l, v) in series {
        s.entry(name.to_string()).or_default().push((labels(l), *v));
    }
    s
}

fn at(secs: u64, s: Scrape) -> (Duration, Scrape) {
    (Duration::from_secs(secs), s)
}

fn eval(expr: &str, history: &[(Duration, Scrape)]) -> Vec<(Labels, f64)> {
    Expr::parse(expr).unwrap().eval(history)
}

#[test]
fn instant_selectors_read_the_latest_scrape_with_their_matchers() {
    let history = [
        at(0, scrape(&[("m", &[("kind", "a")], 1.0)])),
        at(
            15,
            scrape(&[("m", &[("kind", "a")], 2.0), ("m", &[("kind", "b")], 3.0)]),
        ),
    ];
    assert_eq!(eval("m", &history).len(), 2);
    assert_eq!(eval("m{kind=\"b\"}", &history), vec![(labels(&[("kind", "b")]), 3.0)]);
    assert!(eval("m{kind=\"c\"}", &history).is_empty());
    assert!(eval("other", &history).is_empty());
    assert!(eval("m", &[]).is_empty());
}

#[test]
fn range_functions_read_the_window_and_count_resets_as_restarts() {
    let c = |v: f64| scrape(&[("c", &[], v)]);
    // 0 → 4 → 1 (a restart) → 3 over 45 s: increase 4 + 1 + 2.
    let history = [at(0, c(0.0)), at(15, c(4.0)), at(30, c(1.0)), at(45, c(3.0))];
    assert_eq!(eval("increase(c[1m])", &history)[0].1, 7.0);
    assert_eq!(eval("rate(c[1m])", &history)[0].1, 7.0 / 45.0);
    // Only the samples of the last 30 s: 4 → 1 → 3.
    assert_eq!(eval("increase(c[30s])", &history)[0].1, 3.0);
    assert_eq!(eval("min_over_time(c[20s])", &history)[0].1, 1.0);
    // One point is no increase; a minimum needs one.
    assert!(eval("increase(c[10s])", &history).is_empty());
    assert_eq!(eval("min_over_time(c[10s])", &history)[0].1, 3.0);
}

#[test]
fn aggregations_and_comparisons_filter_as_prometheus_does() {
    let history = [at(
        0,
        scrape(&[
            ("age", &[("kind", "wpost")], 400.0),
            ("age", &[("kind", "winning")], 3.0),
            ("age", &[("kind", "porep")], 900.0),
            ("bound", &[("kind", "wpost")], 300.0),
            ("bound", &[("kind", "winning")], 10.0),
            ("busy", &[("device", "gpu0")], 0.2),
            ("busy", &[("device", "gpu1")], 0.6),
        ]),
    )];
    // Matched on kind: PoRep has no bound, WinningPoSt is inside its own.
    assert_eq!(
        eval("age > on(kind) bound", &history),
        vec![(labels(&[("kind", "wpost")]), 400.0)]
    );
    // Without on(...), every label must match (here they do).
    assert_eq!(eval("age > bound", &history).len(), 1);
    assert_eq!(eval("avg(busy)", &history)[0].1, 0.4);
    assert_eq!(eval("sum(busy)", &history)[0].1, 0.8);
    assert_eq!(eval("max(busy)", &history)[0].1, 0.6);
    assert_eq!(eval("min(busy)", &history)[0].1, 0.2);
    assert_eq!(eval("avg(busy) < 0.5", &history).len(), 1);
    assert!(eval("avg(busy) >= 0.5", &history).is_empty());
    assert!(eval("sum(nothing)", &history).is_empty());
    // `and on()`: the left side where the right side has any series.
    assert_eq!(eval("avg(busy) < 0.5 and on() age > 800", &history).len(), 1);
    assert!(eval("avg(busy) < 0.5 and on() age > 1000", &history).is_empty());
    assert_eq!(eval("(avg(busy) < 0.5) and on() (max(age) > 800)", &history).len(), 1);
}

#[test]
fn what_it_does_not_read_is_an_error_that_says_where() {
    for (bad, says) in [
        ("rate(c[5q])", "unit"),
        ("rate(c)", "`[`"),
        ("m{kind=~\"a\"}", "only `=`"),
        ("m{kind=\"a}", "unclosed"),
        ("m > ", "expected a name"),
        ("m > on(kind", "expected `,`"),
        ("m m", "after the expression"),
        ("sum(m", "`)`"),
        ("", "expected a name"),
    ] {
        let err = Expr::parse(bad).unwrap_err().to_string();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn an_expression_names_its_metrics_and_its_longest_range() {
    let e = Expr::parse("avg(rate(a[5m])) < 0.5 and on() min_over_time(b[1h]) > 0").unwrap();
    assert_eq!(e.metrics(), vec!["a", "b"]);
    assert_eq!(e.longest_range(), Duration::from_secs(3600));
}
