//! The `fsync` command: parse, dispatch, turn the result into an exit status (all in `cli`).

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
