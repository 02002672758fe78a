//! The `msgstorm` binary: builds the runtime, runs the command, maps errors to exit codes.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = msgstorm::cli::Cli::parse();
    // On one worker the multi-thread scheduler only adds cost (a clock read and an average
    // per batch of tasks, the main future on a thread of its own, wake-ups across the two):
    // confined to one core, everything runs on this thread.
    let mut builder = if msgstorm::sys::runtime_workers() == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
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
