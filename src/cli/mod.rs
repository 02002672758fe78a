//! Command-line interface: subcommands, live progress and all terminal output.

use clap::{Parser, Subcommand};

use crate::error::Result;

/// msgstorm: load, capacity and delivery-reliability tester for IM servers.
#[derive(Debug, Parser)]
#[command(name = "msgstorm", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the reference IM server.
    #[cfg(feature = "serve")]
    Serve(crate::serve::ServeArgs),
    /// Print a login token for a user of the reference server.
    #[cfg(feature = "serve")]
    Token {
        /// The user id.
        user: String,
        /// The server secret (`--secret` of `msgstorm serve`).
        #[arg(long)]
        secret: String,
    },
}

/// Parses the command line, runs the command and returns the process exit code.
pub async fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        #[cfg(feature = "serve")]
        Command::Serve(args) => crate::serve::serve_command(args).await.map(|()| 0),
        #[cfg(feature = "serve")]
        Command::Token { user, secret } => {
            #[allow(clippy::print_stdout)]
            {
                println!("{}", crate::serve::token(&user, &secret));
            }
            Ok(0)
        }
    }
}
