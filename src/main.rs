fn main() -> std::process::ExitCode {
    jitterwatch::main()
}
