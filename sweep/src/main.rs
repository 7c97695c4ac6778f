//! `ratelimit-sweep --ttl DURATION [--url redis://...] [--user U] [--password-file P]
//! [--db N] [--match P] [--type T] [--count N] [--max-rate N] [--dry-run] [--quiet]`;
//! see `--help`.

use ratelimit_sweep::cli::{self, Command, PASSWORD_ENV, USAGE};
use ratelimit_sweep::run::{self, Display, Ending};
use ratelimit_sweep::signal;
use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut options = match cli::parse(&args) {
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
    let env_password = std::env::var(PASSWORD_ENV).ok();
    let notes = match cli::resolve_password(&mut options, env_password, cli::read_password_file) {
        Ok(notes) => notes,
        Err(e) => {
            eprintln!("ratelimit-sweep: {e}");
            return ExitCode::from(2);
        }
    };
    // The warnings about the password come after the run, unless it failed (an
    // error is one line), and even with --quiet: they are not progress.
    let print_notes = || {
        for n in &notes {
            eprintln!("ratelimit-sweep: {n}");
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
            match summary.ending {
                Ending::Done => {
                    print_notes();
                    ExitCode::SUCCESS
                }
                Ending::Interrupted(sig) => {
                    print_notes();
                    ExitCode::from(signal::exit_status(sig))
                }
                Ending::Failed(e) => {
                    eprintln!("ratelimit-sweep: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("ratelimit-sweep: {e}");
            ExitCode::FAILURE
        }
    }
}
