//! The alert rules shipped in `deploy/pinprove-alerts.yml`, evaluated by
//! the daemon itself over its own metrics, so that the status page says
//! what Prometheus would: a PoSt late for its bound, a proof failed or
//! refused, the devices idle while work waits, parameters loaded again and
//! again. A sampler records the metrics the rules read every
//! [`SAMPLE_EVERY`] for as long as their longest range.

mod promql;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use pinprove_mem::sync::Recover;
use serde::Serialize;
use std::sync::Mutex;

use promql::{Expr, Labels, Scrape};

/// The rules file, as shipped.
const RULES: &str = include_str!("../../../../deploy/pinprove-alerts.yml");

/// How often the sampler records the metrics.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(15);

/// One alert rule.
#[derive(Debug)]
pub(crate) struct Rule {
    pub name: String,
    pub severity: String,
    pub summary: String,
    pub expr: Expr,
}

/// Why the rules file could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RulesError {
    #[error("rule {rule}: {source}")]
    Expr { rule: String, source: promql::ParseError },
    #[error("rule {rule} has no {field}")]
    Missing { rule: String, field: &'static str },
}

/// Reads the rules of `text`, a rules file in the shipped file's layout
/// (`- alert:`, then one-line `expr:`, `severity:` and `summary:` fields).
pub(crate) fn read_rules(text: &str) -> Result<Vec<Rule>, RulesError> {
    let mut fields: Vec<BTreeMap<&str, String>> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_prefix("- ").unwrap_or(line);
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        match key {
            "alert" => fields.push(BTreeMap::from([("alert", value.to_string())])),
            "expr" | "severity" | "summary" => {
                if let Some(rule) = fields.last_mut() {
                    rule.insert(key, value.to_string());
                }
            }
            _ => {}
        }
    }
    fields
        .into_iter()
        .map(|mut f| {
            let name = f.remove("alert").unwrap_or_default();
            let mut take = |field: &'static str| {
                f.remove(field).ok_or(RulesError::Missing {
                    rule: name.clone(),
                    field,
                })
            };
            let (expr, severity, summary) = (take("expr")?, take("severity")?, take("summary")?);
            let expr = Expr::parse(&expr).map_err(|source| RulesError::Expr {
                rule: name.clone(),
                source,
            })?;
            Ok(Rule {
                name,
                severity,
                summary,
                expr,
            })
        })
        .collect()
}

/// A rule that holds now, and the series it holds for.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Firing {
    pub alert: String,
    pub severity: String,
    pub summary: String,
    pub series: Vec<Labels>,
}

/// The shipped rules and the samples they are evaluated over.
pub(crate) struct Alerts {
    rules: Vec<Rule>,
    /// The metric names the rules read: all a sample keeps.
    metrics: BTreeSet<String>,
    /// How long samples are kept: the longest range, and one sample more.
    keep: Duration,
    started: Instant,
    samples: Mutex<VecDeque<(Duration, Scrape)>>,
}

impl Alerts {
    /// The shipped rules (a test checks that each of them reads).
    pub(crate) fn shipped() -> Alerts {
        let rules = read_rules(RULES).unwrap_or_else(|e| {
            tracing::error!(error = %e, "the shipped alert rules do not read; the status page shows none");
            Vec::new()
        });
        Alerts::new(rules)
    }

    pub(crate) fn new(rules: Vec<Rule>) -> Alerts {
        let metrics = rules
            .iter()
            .flat_map(|r| r.expr.metrics())
            .map(str::to_string)
            .collect();
        let keep = rules.iter().map(|r| r.expr.longest_range()).max().unwrap_or_default() + SAMPLE_EVERY;
        Alerts {
            rules,
            metrics,
            keep,
            started: Instant::now(),
            samples: Mutex::new(VecDeque::new()),
        }
    }

    /// Records a sample of `metrics_text` (Prometheus text) taken now.
    pub(crate) fn record(&self, metrics_text: &str) {
        let now = self.started.elapsed();
        self.record_at(now, metrics_text);
    }

    fn record_at(&self, at: Duration, metrics_text: &str) {
        let scrape = read_exposition(metrics_text, &self.metrics);
        let mut samples = self.samples.lock().recover();
        samples.push_back((at, scrape));
        while samples.front().is_some_and(|(t, _)| at.saturating_sub(*t) > self.keep) {
            samples.pop_front();
        }
    }

    /// The rules that hold over the samples and `metrics_text`, taken now
    /// (not recorded).
    pub(crate) fn firing(&self, metrics_text: &str) -> Vec<Firing> {
        self.firing_at(self.started.elapsed(), metrics_text)
    }

    fn firing_at(&self, now: Duration, metrics_text: &str) -> Vec<Firing> {
        let mut history: Vec<(Duration, Scrape)> = self.samples.lock().recover().iter().cloned().collect();
        history.push((now, read_exposition(metrics_text, &self.metrics)));
        self.rules
            .iter()
            .filter_map(|r| {
                let series: Vec<Labels> = r.expr.eval(&history).into_iter().map(|(l, _)| l).collect();
                (!series.is_empty()).then(|| Firing {
                    alert: r.name.clone(),
                    severity: r.severity.clone(),
                    summary: r.summary.clone(),
                    series,
                })
            })
            .collect()
    }
}

/// The series of `metrics` in Prometheus text `text`; lines that do not
/// read are skipped (the text is the daemon's own).
pub(crate) fn read_exposition(text: &str, metrics: &BTreeSet<String>) -> Scrape {
    let mut out = Scrape::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let name = &line[..name_end];
        if !metrics.contains(name) {
            continue;
        }
        let mut rest = &line[name_end..];
        let mut labels = Labels::new();
        if let Some(r) = rest.strip_prefix('{') {
            let Some((l, after)) = read_labels(r) else { continue };
            labels = l;
            rest = after;
        }
        let Some(Ok(v)) = rest.split_whitespace().next().map(str::parse::<f64>) else {
            continue;
        };
        out.entry(name.to_string()).or_default().push((labels, v));
    }
    out
}

/// `a="x",b="y"}` (after the `{`): the labels and what follows the `}`.
fn read_labels(mut s: &str) -> Option<(Labels, &str)> {
    let mut labels = Labels::new();
    loop {
        s = s.trim_start_matches([',', ' ']);
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let (key, r) = s.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = r.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        labels.insert(key.trim().to_string(), value);
        s = &r[end + 1..];
    }
}

#[cfg(test)]
mod tests;
