//! The `msgstorm` binary: builds the runtime, runs the command, maps errors to exit codes.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = msgstorm::cli::Cli::parse();
    let runtime = match msgstorm::runtime::build() {
        Ok(rt) => rt,
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("error: cannot start the async runtime: {e}");
            }
            return ExitCode::from(msgstorm::error::EXIT_TOOL_FAILED);
        }
    };
    match runtime.block_on(msgstorm::cli::run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // An error may quote a server, an adapter or a shard's log: one line, its
            // control characters shown as escapes (`msgstorm::untrusted`).
            #[allow(clippy::print_stderr)]
            {
                eprintln!("error: {}", msgstorm::untrusted::line(&e.to_string()));
            }
            ExitCode::from(e.exit_code())
        }
    }
}
