//! The commands and flags (in progress).
use std::process::ExitCode;

pub fn main() -> ExitCode {
    ExitCode::SUCCESS
}
