//! The `hk-console` binary: error reporting, logging, then the command.
fn main() -> std::process::ExitCode {
    hk_console::cli::main()
}
