fn main() {
    // Die quietly on a closed pipe (`remat solve ... | head`) as command-line tools do,
    // instead of panicking in println!.
    // SAFETY: setting a signal disposition to its default before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(remat::cli::run());
}
