//! How a cascade attempt fails: the error of one attempt ([`WorkError`]) and the failure the
//! queue driver counts ([`WorkFailure`]). Below the driver and both queues' attempts, so that the
//! driver calls the attempts and the attempts name their failures without importing each other.

use super::actions::ActionError;
use super::snapshot::Snapshot;
use crate::archive::store::ArchiveFailure;

#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    #[error("{object}: owner kind {kind} is not served by the API server (retrying)")]
    UnknownOwnerKind { object: String, kind: String },
    #[error("{object}: kind {kind} is not served by the API server (retrying)")]
    UnknownKind { object: String, kind: String },
    #[error(transparent)]
    Action(#[from] ActionError),
    /// The archive could not record the object, so it is not deleted now.
    #[error("{object}: not deleted, the archive could not record it: {source}")]
    Archive {
        object: String,
        #[source]
        source: ArchiveFailure,
    },
    /// Read to be archived, the object was not the version the decision saw: look again.
    #[error("{object}: changed since it was observed; re-classifying")]
    Changed { object: String },
}

impl WorkError {
    pub(super) fn archive(snap: &Snapshot, source: ArchiveFailure) -> Self {
        WorkError::Archive {
            object: snap.label(),
            source,
        }
    }

    /// The failure's `reason` label in `sweeper_cascade_errors_total`: a short, bounded name.
    pub fn reason(&self) -> &'static str {
        match self {
            WorkError::UnknownOwnerKind { .. } => "unknown_owner_kind",
            WorkError::UnknownKind { .. } => "unknown_kind",
            WorkError::Action(a) => a.reason(),
            WorkError::Archive { .. } => "archive",
            WorkError::Changed { .. } => "changed",
        }
    }

    /// Whether the collector's pause refused this work's write (see engine::pause).
    pub fn paused(&self) -> bool {
        match self {
            WorkError::Action(a) => a.paused(),
            WorkError::Archive { source, .. } => source.paused(),
            _ => false,
        }
    }
}

/// A failed attempt: what failed, and the resource (`group/version/kind`) of the object whose
/// call or check failed, for the failure count.
#[derive(Debug)]
pub struct WorkFailure {
    pub resource: String,
    pub error: WorkError,
}
