fn main() {
    // Die quietly on a closed pipe (`remat solve ... | head`) as command-line tools do,
    // instead of panicking in println!.
    // SAFETY: setting a signal disposition to its default before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Standard output that cannot be written (a full disk, `> /dev/full`) makes println!
    // panic: answer as every other output error does, exit 2 with the reason.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = (payload.downcast_ref::<String>().map(String::as_str))
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if let Some(why) = message.strip_prefix("failed printing to stdout: ") {
            remat::shell::to_stderr(format_args!("error: cannot write standard output: {why}"));
            std::process::exit(2);
        }
        default_hook(info);
    }));
    std::process::exit(remat::cli::run());
}
