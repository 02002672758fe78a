//! The `msgstorm` binary: builds the runtime, runs the command, maps errors to exit codes.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
