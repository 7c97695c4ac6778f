//! `ratelimit-sweep --ttl DURATION [--url redis://...] [--match P] [--type T]
//! [--count N] [--max-rate N] [--dry-run] [--quiet]`; see `--help`.

use ratelimit_sweep::cli::{self, Command, USAGE};
use ratelimit_sweep::run::{self, Display};
use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match cli::parse(&args) {
        Ok(Command::Sweep(o)) => o,
        Ok(Command::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version) => {
            println!("ratelimit-sweep {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("ratelimit-sweep: {e}");
            return ExitCode::from(2);
        }
    };
    let display = if options.quiet {
        Display::None
    } else if std::io::stderr().is_terminal() {
        Display::Bar
    } else {
        Display::Lines
    };
    let quiet = options.quiet;
    let mut log = |line: &str| {
        if !quiet {
            eprintln!("{line}");
        }
    };
    match run::run(&options, display, &mut log) {
        Ok(summary) => {
            for line in run::summary_lines(&options, &summary) {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ratelimit-sweep: {e}");
            ExitCode::FAILURE
        }
    }
}
