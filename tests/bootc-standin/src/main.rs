//! `bootc`: the bootc stand-in's command line (see the `bootc_standin` library).

fn main() {
    std::process::exit(bootc_standin::cli::main_from_process());
}
