//! "Archive, then act": the one sequence every collector follows before it deletes an object (or
//! releases the finalizer whose release deletes it): ask the archive to record it, decide from
//! the answer whether to act now ([`admit`]), act, and settle the record by whether the act took
//! effect ([`Archiver::guarded`]). The cascade worker archives one object at a time through
//! [`archive_then_act`]; a tenant teardown records a whole stage in one batch, then admits and
//! acts per object with the same two steps.

use super::batch::Batcher;
use super::store::{ArchiveFailure, Archiver, Item, Prepared, Ticket};

/// What to do with an object the archive found changed since the decision was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IfChanged {
    /// The decision was taken on the version to archive (a delete): not now, look again.
    Wait,
    /// The act does not depend on the version (a finalizer release; a custom resource gone
    /// meanwhile): act anyway, with nothing recorded.
    Act,
}

/// Why an object is not acted on now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotNow {
    /// Not as the decision saw it (changed since, or gone): look again.
    Changed,
    /// The archive could not record it (or a pause refused the write): retry.
    Failed(ArchiveFailure),
}

/// The archive's answer turned into the next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AfterArchive {
    /// Act now, then settle the ticket (none: nothing was recorded) with what the act did.
    Act(Option<Ticket>),
    NotNow(NotNow),
}

/// Whether an object the archive answered `prepared` for may be acted on now. Pure: what is
/// unrecorded by choice (not selected, over the size cap) goes without a record; what could not
/// be recorded never goes.
pub fn admit(prepared: Prepared, if_changed: IfChanged) -> AfterArchive {
    match prepared {
        Prepared::Recorded(t) => AfterArchive::Act(Some(t)),
        Prepared::Unrecorded => AfterArchive::Act(None),
        Prepared::Changed => match if_changed {
            IfChanged::Wait => AfterArchive::NotNow(NotNow::Changed),
            IfChanged::Act => AfterArchive::Act(None),
        },
        Prepared::Failed(e) => AfterArchive::NotNow(NotNow::Failed(e)),
    }
}

/// Archives `archive`'s item (None: no archive, or nothing to archive), then runs `act` with the
/// ticket of its record and settles the record by `took_effect` (see [`Archiver::guarded`]). What
/// may not be acted on now is `not_now`'s error, and `act` does not run.
pub async fn archive_then_act<T, E, W: From<E>>(
    archive: Option<(&Batcher, Item)>,
    if_changed: IfChanged,
    not_now: impl FnOnce(NotNow) -> W,
    act: impl AsyncFnOnce(Option<&Ticket>) -> Result<T, E>,
    took_effect: impl AsyncFnOnce(&Result<T, E>) -> bool,
) -> Result<T, W> {
    let (archiver, ticket) = match archive {
        Some((batcher, item)) => match admit(batcher.prepare(item).await, if_changed) {
            AfterArchive::Act(ticket) => (Some(&*batcher.archiver), ticket),
            AfterArchive::NotNow(why) => return Err(not_now(why)),
        },
        None => (None, None),
    };
    Archiver::guarded(
        archiver,
        ticket.as_slice(),
        act(ticket.as_ref()),
        took_effect,
    )
    .await
    .map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record_kind::RecordKind;
    use crate::archive::store::{ArchiveError, RecordRef};

    fn ticket() -> Ticket {
        Ticket {
            record: RecordRef {
                namespace: "ns".into(),
                name: "r".into(),
                kind: RecordKind::ConfigMap,
            },
            uid: "u".into(),
            resource_version: "7".into(),
        }
    }

    #[test]
    fn what_the_archive_answered_decides_whether_to_act_now() {
        let failed: ArchiveFailure = ArchiveError::ShuttingDown.into();
        let cases = [
            (
                Prepared::Recorded(ticket()),
                IfChanged::Wait,
                AfterArchive::Act(Some(ticket())),
            ),
            (
                Prepared::Recorded(ticket()),
                IfChanged::Act,
                AfterArchive::Act(Some(ticket())),
            ),
            (
                Prepared::Unrecorded,
                IfChanged::Wait,
                AfterArchive::Act(None),
            ),
            (
                Prepared::Unrecorded,
                IfChanged::Act,
                AfterArchive::Act(None),
            ),
            (
                Prepared::Changed,
                IfChanged::Wait,
                AfterArchive::NotNow(NotNow::Changed),
            ),
            (Prepared::Changed, IfChanged::Act, AfterArchive::Act(None)),
            (
                Prepared::Failed(failed.clone()),
                IfChanged::Wait,
                AfterArchive::NotNow(NotNow::Failed(failed.clone())),
            ),
            (
                Prepared::Failed(failed.clone()),
                IfChanged::Act,
                AfterArchive::NotNow(NotNow::Failed(failed.clone())),
            ),
        ];
        for (prepared, if_changed, want) in cases {
            let what = format!("{prepared:?} / {if_changed:?}");
            assert_eq!(admit(prepared, if_changed), want, "{what}");
        }
    }

    #[tokio::test]
    async fn without_an_archive_the_act_runs_with_no_ticket() {
        let r: Result<u8, String> = archive_then_act(
            None,
            IfChanged::Wait,
            |_| "not now".to_string(),
            async |t: Option<&Ticket>| if t.is_none() { Ok(1) } else { Ok(2) },
            async |_: &Result<u8, String>| true,
        )
        .await;
        assert_eq!(r, Ok(1));
    }
}
