fn main() {
    std::process::exit(remat::cli::run());
}
