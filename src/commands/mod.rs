//! The one-shot commands' handlers (the external collector's own are in external::commands): each
//! command's arguments are defined beside its handler, and the handler returns what to print.
//! main.rs parses, dispatches and exits through crate::exit, the one exit convention: the text
//! on stdout, an error on stderr as `error: ...`, exit 0, 1 (failed) or 2 (could not start).

pub mod archive;
pub mod check;
pub mod graph;
pub mod pause;
pub mod status;
pub mod uninstall;
