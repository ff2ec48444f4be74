//! `heaplens`: the command line. Thin glue over the monitor (`run`) and the analysis crate
//! (`report`); each subcommand lives in its own module.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod report;
mod run;

/// Heap allocation profiler for native programs on Linux.
///
/// Record every allocation and deallocation of a program with its call stack, then see who
/// allocates, how much, of what size, for how long, and what leaks.
#[derive(Parser, Debug)]
#[command(name = "heaplens", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a program under the monitor and record its allocations to a trace.
    Run(RunArgs),
    /// Print the summary and mprof's tables (leaks, size bins, direct allocators, call graph).
    Report(ReportArgs),
}

/// Arguments of `heaplens run`.
#[derive(Args, Debug)]
#[command(trailing_var_arg = true)]
pub struct RunArgs {
    /// Trace file to write [default: heaplens.PROGRAM.PID.hltrace in the current directory].
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also profile programs that the target execs or spawns; each writes FILE.PID.
    #[arg(long)]
    pub follow_children: bool,
    /// Deepest call stack recorded, in frames.
    #[arg(long, default_value_t = 1024, value_name = "FRAMES")]
    pub max_frames: u32,
    /// Print nothing but the program's own output.
    #[arg(short, long)]
    pub quiet: bool,
    /// The program to profile and its arguments.
    #[arg(required = true, value_name = "PROGRAM [ARGS]...")]
    pub command: Vec<String>,
}

/// Which tables `heaplens report` prints.
#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// The trace written by `heaplens run`.
    pub trace: PathBuf,
    /// Only the memory leak table.
    #[arg(long)]
    pub leaks: bool,
    /// Only the allocation bin table.
    #[arg(long)]
    pub bins: bool,
    /// Only the direct allocation table.
    #[arg(long)]
    pub direct: bool,
    /// Only the allocation call graph.
    #[arg(long)]
    pub call_graph: bool,
    /// Callers shown in each leak path (mprof shows the last 5).
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub leak_depth: usize,
    /// Tell call sites within one function apart (function+offset, file:line) in the leak table.
    #[arg(long)]
    pub call_sites: bool,
    /// Rows shown per table (0 = all).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Report output formats.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned tables for people.
    Text,
    /// One JSON document for scripts and tests.
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => run::execute(&a),
        Command::Report(a) => report::execute(&a).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("heaplens: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
