//! The one exit convention of the one-shot commands: what a command prints ([`Printed`]), why it
//! could not ([`CommandError`]), and how main.rs exits with either ([`exit`]). Below every
//! command's handler (crate::commands, external::commands), so they share it without importing
//! each other.

use std::process::ExitCode;

/// What a command prints on stdout, and whether it succeeded.
#[derive(Debug)]
pub struct Printed {
    pub text: String,
    pub ok: bool,
}

impl Printed {
    pub fn ok(text: impl Into<String>) -> Self {
        Printed {
            text: text.into(),
            ok: true,
        }
    }

    /// A report that says a failure (`sweeper check` with a failed line, a teardown not done).
    pub fn failed(text: impl Into<String>) -> Self {
        Printed {
            text: text.into(),
            ok: false,
        }
    }
}

/// Why a command could not do its job, printed on stderr.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("cannot connect: {0}")]
    Connect(#[source] kube::Error),
    /// It could not start at all: exit 2, so that a check that ran and failed (exit 1) is told
    /// apart from one that never ran.
    #[error("{0}")]
    CannotStart(String),
    /// What a lower layer said went wrong, in its words.
    #[error("{0}")]
    Failed(String),
    /// A lower layer's typed error (it names the object).
    #[error(transparent)]
    Of(Box<dyn std::error::Error + Send + Sync>),
}

impl CommandError {
    /// A lower layer's typed error, kept as its own type (its source chain) to the final print.
    pub fn of(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        CommandError::Of(Box::new(e))
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            CommandError::CannotStart(_) => 2,
            _ => 1,
        }
    }
}

/// A client as the caller's kubeconfig (or the pod's service account) says.
pub async fn client() -> Result<kube::Client, CommandError> {
    kube::Client::try_default()
        .await
        .map_err(CommandError::Connect)
}

/// The one exit convention.
pub fn exit(result: Result<Printed, CommandError>) -> ExitCode {
    match result {
        Ok(printed) => {
            // A text that ends its own line is printed as it is, any other gets one (as each
            // command printed before they shared this exit).
            if printed.text.ends_with('\n') {
                print!("{}", printed.text);
            } else {
                println!("{}", printed.text);
            }
            if printed.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
