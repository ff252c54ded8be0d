//! Test-only fault injection at named points, set with `SWEEPER_FAILPOINT=<name>[:<action>]`:
//! `<name>` alone hangs forever at the point (so a test can `kill -9` the process exactly there);
//! `<name>:sleep=<duration>` pauses there and goes on. Unset (always, in production) every point
//! is a no-op costing one comparison.
//!
//! Points: `after-archive-record` (cascade: the record is written, the DELETE not sent yet).

use std::sync::OnceLock;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
enum Action {
    Hang,
    Sleep(Duration),
}

fn configured() -> &'static Option<(String, Action)> {
    static FP: OnceLock<Option<(String, Action)>> = OnceLock::new();
    FP.get_or_init(|| parse(&std::env::var("SWEEPER_FAILPOINT").ok()?))
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

/// Acts at the point `name` if the failpoint names it.
pub async fn hit(name: &str) {
    let Some((n, action)) = configured() else {
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
}
