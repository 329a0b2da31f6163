//! The part of PromQL the shipped alert rules use, so that the daemon
//! evaluates the very rules an operator loads into Prometheus: selectors
//! with `=` matchers, `rate`, `increase` and `min_over_time` over a range,
//! `sum`/`avg`/`max`/`min` without grouping, comparisons (filtering) with a
//! number or with another vector matched `on(...)` labels, and `and on(...)`.
//!
//! Ranges are read from the daemon's own samples and are not extrapolated
//! to the window's edges as Prometheus does: an increase is what the
//! samples inside the window saw (counter resets counted as restarts).

use std::collections::BTreeMap;
use std::time::Duration;

/// A series' labels, without its name.
pub(crate) type Labels = BTreeMap<String, String>;

/// The samples of one scrape: each metric name's series.
pub(crate) type Scrape = BTreeMap<String, Vec<(Labels, f64)>>;

/// Why a rule's expression could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("at byte {at} of `{expr}`: {what}")]
pub(crate) struct ParseError {
    expr: String,
    at: usize,
    what: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RangeFn {
    Rate,
    Increase,
    MinOverTime,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Aggregation {
    Sum,
    Avg,
    Max,
    Min,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Comparison {
    Greater,
    Less,
    GreaterOrEqual,
    LessOrEqual,
}

impl Comparison {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Comparison::Greater => a > b,
            Comparison::Less => a < b,
            Comparison::GreaterOrEqual => a >= b,
            Comparison::LessOrEqual => a <= b,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Selector {
    name: String,
    matchers: Vec<(String, String)>,
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Expr {
    Instant(Selector),
    Range(RangeFn, Selector, Duration),
    Aggregate(Aggregation, Box<Expr>),
    CompareNumber(Box<Expr>, Comparison, f64),
    CompareVector(Box<Expr>, Comparison, Option<Vec<String>>, Box<Expr>),
    And(Box<Expr>, Vec<String>, Box<Expr>),
}

impl Expr {
    /// Reads `text`.
    pub(crate) fn parse(text: &str) -> Result<Expr, ParseError> {
        let mut p = Parser { text, at: 0 };
        let e = p.and()?;
        p.skip_space();
        if p.at < text.len() {
            return Err(p.error("unexpected text after the expression"));
        }
        Ok(e)
    }

    /// The metric names it reads.
    pub(crate) fn metrics(&self) -> Vec<&str> {
        match self {
            Expr::Instant(s) | Expr::Range(_, s, _) => vec![s.name.as_str()],
            Expr::Aggregate(_, e) | Expr::CompareNumber(e, _, _) => e.metrics(),
            Expr::CompareVector(a, _, _, b) | Expr::And(a, _, b) => {
                let mut m = a.metrics();
                m.extend(b.metrics());
                m
            }
        }
    }

    /// The longest range it reads.
    pub(crate) fn longest_range(&self) -> Duration {
        match self {
            Expr::Instant(_) => Duration::ZERO,
            Expr::Range(_, _, w) => *w,
            Expr::Aggregate(_, e) | Expr::CompareNumber(e, _, _) => e.longest_range(),
            Expr::CompareVector(a, _, _, b) | Expr::And(a, _, b) => a.longest_range().max(b.longest_range()),
        }
    }

    /// Its value over `history` (scrapes at their times, oldest first; the
    /// last is now): the series for which it holds, as Prometheus would
    /// return them.
    pub(crate) fn eval(&self, history: &[(Duration, Scrape)]) -> Vec<(Labels, f64)> {
        let Some((now, latest)) = history.last() else {
            return Vec::new();
        };
        match self {
            Expr::Instant(s) => latest
                .get(&s.name)
                .into_iter()
                .flatten()
                .filter(|(l, _)| s.matches(l))
                .cloned()
                .collect(),
            Expr::Range(f, s, window) => {
                let from = now.saturating_sub(*window);
                let mut points: BTreeMap<Labels, Vec<(Duration, f64)>> = BTreeMap::new();
                for (t, scrape) in history.iter().filter(|(t, _)| *t >= from) {
                    for (l, v) in scrape.get(&s.name).into_iter().flatten() {
                        if s.matches(l) {
                            points.entry(l.clone()).or_default().push((*t, *v));
                        }
                    }
                }
                points
                    .into_iter()
                    .filter_map(|(l, p)| range_value(*f, &p).map(|v| (l, v)))
                    .collect()
            }
            Expr::Aggregate(a, e) => {
                let values: Vec<f64> = e.eval(history).into_iter().map(|(_, v)| v).collect();
                if values.is_empty() {
                    return Vec::new();
                }
                let v = match a {
                    Aggregation::Sum => values.iter().sum(),
                    Aggregation::Avg => values.iter().sum::<f64>() / values.len() as f64,
                    Aggregation::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    Aggregation::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
                };
                vec![(Labels::new(), v)]
            }
            Expr::CompareNumber(e, c, n) => e.eval(history).into_iter().filter(|(_, v)| c.holds(*v, *n)).collect(),
            Expr::CompareVector(a, c, on, b) => {
                let right = b.eval(history);
                a.eval(history)
                    .into_iter()
                    .filter(|(l, v)| {
                        right
                            .iter()
                            .find(|(r, _)| same_on(l, r, on.as_deref()))
                            .is_some_and(|(_, w)| c.holds(*v, *w))
                    })
                    .collect()
            }
            Expr::And(a, on, b) => {
                let right = b.eval(history);
                a.eval(history)
                    .into_iter()
                    .filter(|(l, _)| right.iter().any(|(r, _)| same_on(l, r, Some(on))))
                    .collect()
            }
        }
    }
}

impl Selector {
    fn matches(&self, labels: &Labels) -> bool {
        self.matchers
            .iter()
            .all(|(k, v)| labels.get(k).map_or(v.is_empty(), |x| x == v))
    }
}

/// Whether two series match on `on` (all labels when `None`).
fn same_on(a: &Labels, b: &Labels, on: Option<&[String]>) -> bool {
    match on {
        None => a == b,
        Some(on) => on.iter().all(|k| a.get(k) == b.get(k)),
    }
}

/// A range function over one series' points, oldest first.
fn range_value(f: RangeFn, points: &[(Duration, f64)]) -> Option<f64> {
    let increase = || {
        points
            .windows(2)
            .map(|w| if w[1].1 >= w[0].1 { w[1].1 - w[0].1 } else { w[1].1 })
            .sum::<f64>()
    };
    match f {
        RangeFn::MinOverTime => points.iter().map(|p| p.1).reduce(f64::min),
        _ if points.len() < 2 => None,
        RangeFn::Increase => Some(increase()),
        RangeFn::Rate => {
            let span = (points[points.len() - 1].0 - points[0].0).as_secs_f64();
            (span > 0.0).then(|| increase() / span)
        }
    }
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> ParseError {
        ParseError {
            expr: self.text.to_string(),
            at: self.at,
            what: what.to_string(),
        }
    }

    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn skip_space(&mut self) {
        let trimmed = self.rest().trim_start();
        self.at = self.text.len() - trimmed.len();
    }

    /// Takes `token` (after spaces) if it comes next.
    fn eat(&mut self, token: &str) -> bool {
        self.skip_space();
        if self.rest().starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    /// Takes `on` when an `on(...)` list comes next.
    fn eat_on(&mut self) -> bool {
        self.skip_space();
        let list = self
            .rest()
            .strip_prefix("on")
            .is_some_and(|r| r.trim_start().starts_with('('));
        if list {
            self.at += 2;
        }
        list
    }

    fn expect(&mut self, token: &str) -> Result<(), ParseError> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.error(&format!("expected `{token}`")))
        }
    }

    fn word(&mut self) -> Result<String, ParseError> {
        self.skip_space();
        let len = self
            .rest()
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(self.rest().len());
        if len == 0 || self.rest().starts_with(|c: char| c.is_ascii_digit()) {
            return Err(self.error("expected a name"));
        }
        let w = self.rest()[..len].to_string();
        self.at += len;
        Ok(w)
    }

    /// `on(a, b)`'s label list, after `on`.
    fn labels(&mut self) -> Result<Vec<String>, ParseError> {
        self.expect("(")?;
        let mut out = Vec::new();
        while !self.eat(")") {
            if !out.is_empty() {
                self.expect(",")?;
            }
            out.push(self.word()?);
        }
        Ok(out)
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.comparison()?;
        loop {
            let save = self.at;
            if self.word().ok().as_deref() != Some("and") {
                self.at = save;
                return Ok(left);
            }
            let on = if self.eat_on() { self.labels()? } else { Vec::new() };
            let right = self.comparison()?;
            left = Expr::And(Box::new(left), on, Box::new(right));
        }
    }

    fn comparison(&mut self) -> Result<Expr, ParseError> {
        let left = self.value()?;
        let op = [
            (">=", Comparison::GreaterOrEqual),
            ("<=", Comparison::LessOrEqual),
            (">", Comparison::Greater),
            ("<", Comparison::Less),
        ]
        .into_iter()
        .find(|(t, _)| self.eat(t));
        let Some((_, op)) = op else { return Ok(left) };
        self.skip_space();
        if self
            .rest()
            .starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
        {
            let len = self
                .rest()
                .find(|c: char| c.is_whitespace() || c == ')')
                .unwrap_or(self.rest().len());
            let n = self.rest()[..len]
                .parse()
                .map_err(|_| self.error("expected a number"))?;
            self.at += len;
            return Ok(Expr::CompareNumber(Box::new(left), op, n));
        }
        let on = if self.eat_on() { Some(self.labels()?) } else { None };
        let right = self.value()?;
        Ok(Expr::CompareVector(Box::new(left), op, on, Box::new(right)))
    }

    fn value(&mut self) -> Result<Expr, ParseError> {
        if self.eat("(") {
            let e = self.and()?;
            self.expect(")")?;
            return Ok(e);
        }
        let name = self.word()?;
        let range_fn = match name.as_str() {
            "rate" => Some(RangeFn::Rate),
            "increase" => Some(RangeFn::Increase),
            "min_over_time" => Some(RangeFn::MinOverTime),
            _ => None,
        };
        let aggregation = match name.as_str() {
            "sum" => Some(Aggregation::Sum),
            "avg" => Some(Aggregation::Avg),
            "max" => Some(Aggregation::Max),
            "min" => Some(Aggregation::Min),
            _ => None,
        };
        if let Some(f) = range_fn {
            self.expect("(")?;
            let s = self.selector()?;
            self.expect("[")?;
            let w = self.duration()?;
            self.expect("]")?;
            self.expect(")")?;
            return Ok(Expr::Range(f, s, w));
        }
        if let Some(a) = aggregation {
            self.expect("(")?;
            let e = self.and()?;
            self.expect(")")?;
            return Ok(Expr::Aggregate(a, Box::new(e)));
        }
        self.at -= name.len();
        Ok(Expr::Instant(self.selector()?))
    }

    fn selector(&mut self) -> Result<Selector, ParseError> {
        let name = self.word()?;
        let mut matchers = Vec::new();
        if self.eat("{") {
            while !self.eat("}") {
                if !matchers.is_empty() {
                    self.expect(",")?;
                }
                let label = self.word()?;
                self.expect("=")?;
                if self.rest().starts_with('~') {
                    return Err(self.error("only `=` matchers are read"));
                }
                self.expect("\"")?;
                let len = self.rest().find('"').ok_or_else(|| self.error("an unclosed string"))?;
                let value = self.rest()[..len].to_string();
                if value.contains('\\') {
                    return Err(self.error("escapes in matchers are not read"));
                }
                self.at += len + 1;
                matchers.push((label, value));
            }
        }
        Ok(Selector { name, matchers })
    }

    fn duration(&mut self) -> Result<Duration, ParseError> {
        self.skip_space();
        let digits = self.rest().find(|c: char| !c.is_ascii_digit()).unwrap_or(0);
        let n: u64 = self.rest()[..digits]
            .parse()
            .map_err(|_| self.error("expected a duration"))?;
        self.at += digits;
        let unit = [("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
            .into_iter()
            .find(|(u, _)| self.rest().starts_with(u))
            .ok_or_else(|| self.error("a duration's unit is s, m, h or d"))?;
        self.at += 1;
        Ok(Duration::from_secs(n * unit.1))
    }
}

#[cfg(test)]
mod tests;
