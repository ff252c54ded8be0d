//! Label selectors as `kubectl -l` writes them (`env=prod,tier in (a,b),!legacy`), parsed once at
//! start-up and matched against an object's labels. kube-core matches selectors but does not parse
//! the string form, so this does, and hands the matching to it.

use kube::core::{Expression, Selector, SelectorExt};
use std::collections::BTreeMap;

/// A parsed label selector; the empty one selects everything.
#[derive(Clone, Debug, Default)]
pub struct LabelFilter {
    text: String,
    selector: Selector,
}

/// Two filters are the same when they were written the same (the parse is deterministic).
impl PartialEq for LabelFilter {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl LabelFilter {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.matches(labels)
    }

    pub fn selects_all(&self) -> bool {
        self.selector.selects_all()
    }
}

impl std::fmt::Display for LabelFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// A label selector that does not parse: what is wrong, and where in the selector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("unbalanced ')' in selector {selector:?}")]
    UnbalancedClose { selector: String },
    #[error("unbalanced '(' in selector {selector:?}")]
    UnbalancedOpen { selector: String },
    #[error("empty term in selector {selector:?}")]
    EmptyTerm { selector: String },
    #[error("bad label key {key:?} in {term:?}")]
    BadKey { key: String, term: String },
    #[error("expected (v1,v2) in {term:?}")]
    NotAList { term: String },
}

/// Parses `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`, comma-separated.
pub fn parse(s: &str) -> Result<LabelFilter, SelectorError> {
    let mut exprs = Vec::new();
    for term in split_terms(s)? {
        exprs.push(expression(&term)?);
    }
    Ok(LabelFilter {
        text: s.trim().to_string(),
        selector: Selector::from_iter(exprs),
    })
}

/// Splits on the commas outside parentheses.
fn split_terms(s: &str) -> Result<Vec<String>, SelectorError> {
    let mut out = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(SelectorError::UnbalancedClose { selector: s.into() });
        }
        cur.push(c);
    }
    if depth != 0 {
        return Err(SelectorError::UnbalancedOpen { selector: s.into() });
    }
    out.push(cur);
    let terms: Vec<String> = out.into_iter().map(|t| t.trim().to_string()).collect();
    if terms.len() == 1 && terms[0].is_empty() {
        return Ok(Vec::new());
    }
    if terms.iter().any(String::is_empty) {
        return Err(SelectorError::EmptyTerm { selector: s.into() });
    }
    Ok(terms)
}

fn key(k: &str, term: &str) -> Result<String, SelectorError> {
    let k = k.trim();
    let ok = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    ok.then(|| k.to_string())
        .ok_or_else(|| SelectorError::BadKey {
            key: k.into(),
            term: term.into(),
        })
}

fn values(list: &str, term: &str) -> Result<Vec<String>, SelectorError> {
    let inner = list
        .trim()
        .strip_prefix('(')
        .and_then(|l| l.strip_suffix(')'))
        .ok_or_else(|| SelectorError::NotAList { term: term.into() })?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
}

fn expression(term: &str) -> Result<Expression, SelectorError> {
    if let Some(k) = term.strip_prefix('!') {
        return Ok(Expression::DoesNotExist(key(k, term)?));
    }
    if let Some((k, v)) = term.split_once("!=") {
        return Ok(Expression::NotEqual(key(k, term)?, v.trim().into()));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(Expression::Equal(key(k, term)?, v.trim().into()));
    }
    if let Some((k, list)) = term.split_once(" notin ") {
        return Ok(Expression::NotIn(
            key(k, term)?,
            values(list, term)?.into_iter().collect(),
        ));
    }
    if let Some((k, list)) = term.split_once(" in ") {
        return Ok(Expression::In(
            key(k, term)?,
            values(list, term)?.into_iter().collect(),
        ));
    }
    Ok(Expression::Exists(key(term, term)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kubectl_forms_select_as_kubectl_does() {
        let f = parse("env=prod, tier in (web, api),!legacy,team").unwrap();
        assert!(f.matches(&labels(&[("env", "prod"), ("tier", "api"), ("team", "a")])));
        assert!(!f.matches(&labels(&[("env", "prod"), ("tier", "db"), ("team", "a")])));
        assert!(!f.matches(&labels(&[
            ("env", "prod"),
            ("tier", "web"),
            ("team", "a"),
            ("legacy", "")
        ])));
        assert!(
            !f.matches(&labels(&[("env", "prod"), ("tier", "web")])),
            "team must exist"
        );
        let g = parse("sweeper.dev/gc!=off,zone notin (a)").unwrap();
        assert!(g.matches(&labels(&[])));
        assert!(!g.matches(&labels(&[("sweeper.dev/gc", "off")])));
        assert!(parse("a==b").unwrap().matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn the_empty_selector_selects_everything() {
        let f = parse("  ").unwrap();
        assert!(f.selects_all() && f.matches(&labels(&[])));
    }

    #[test]
    fn malformed_selectors_are_refused_with_the_term() {
        for bad in ["a=b,", "tier in (a", "tier in a)", "bad key=1", "x in a"] {
            let e = parse(bad).unwrap_err();
            assert!(!e.to_string().is_empty(), "{bad}");
        }
    }
}
