//! Test-only fault injection at named points, set with `SWEEPER_FAILPOINT=<name>[:<action>]`:
//! `<name>` alone hangs forever at the point (so a test can `kill -9` the process exactly there);
//! `<name>:sleep=<duration>` pauses there and goes on. Unset (always, in production) every point
//! is a no-op costing one comparison.
//!
//! The variable is read once, by `sweeper run` at start-up ([`Failpoints::from_env`]), and the
//! value is handed down to the code that has points (a field of its context), so a test sets
//! failpoints as a value and no code reads the environment behind its caller's back.
//!
//! Points: `after-archive-record` (cascade: the record is written, the DELETE not sent yet).

use std::time::Duration;

/// The environment variable `sweeper run` reads the failpoint from.
pub const ENV: &str = "SWEEPER_FAILPOINT";

#[derive(Debug, Clone, PartialEq)]
enum Action {
    Hang,
    Sleep(Duration),
}

/// The configured failpoint, if any: at most one point acts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Failpoints(Option<(String, Action)>);

impl Failpoints {
    /// No point acts (production).
    pub fn none() -> Self {
        Failpoints(None)
    }

    /// From [`ENV`]; unset, empty or malformed means none.
    pub fn from_env() -> Self {
        std::env::var(ENV)
            .map(|s| Self::parse(&s))
            .unwrap_or_default()
    }

    /// `<name>` or `<name>:sleep=<duration>`; anything else means none.
    pub fn parse(s: &str) -> Self {
        Failpoints(parse(s))
    }

    /// Acts at the point `name` if the failpoint names it.
    pub async fn hit(&self, name: &str) {
        let Some((n, action)) = &self.0 else {
            return;
        };
        if n != name {
            return;
        }
        match action {
            Action::Hang => {
                tracing::warn!(failpoint = name, "failpoint: hanging here");
                std::future::pending::<()>().await
            }
            Action::Sleep(d) => {
                tracing::warn!(
                    failpoint = name,
                    seconds = d.as_secs_f64(),
                    "failpoint: pausing here"
                );
                tokio::time::sleep(*d).await
            }
        }
    }
}

fn parse(s: &str) -> Option<(String, Action)> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    match s.split_once(':') {
        None => Some((s.to_string(), Action::Hang)),
        Some((name, action)) => {
            let d = action.strip_prefix("sleep=")?;
            Some((
                name.to_string(),
                Action::Sleep(super::duration::parse(d).ok()?),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_parse() {
        assert_eq!(parse("x"), Some(("x".into(), Action::Hang)));
        assert_eq!(
            parse("x:sleep=2s"),
            Some(("x".into(), Action::Sleep(Duration::from_secs(2))))
        );
        assert_eq!(parse(""), None);
        assert_eq!(parse("x:boom"), None);
    }

    #[tokio::test]
    async fn only_the_named_point_acts() {
        let fp = Failpoints::parse("here:sleep=50ms");
        let t = std::time::Instant::now();
        fp.hit("elsewhere").await;
        Failpoints::none().hit("here").await;
        assert!(t.elapsed() < Duration::from_millis(50));
        fp.hit("here").await;
        assert!(t.elapsed() >= Duration::from_millis(50));
    }
}
