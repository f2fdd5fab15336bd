"""One module per ``recon4d`` subcommand; each exposes ``main(argv) -> int``."""
