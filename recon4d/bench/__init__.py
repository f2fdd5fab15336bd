"""Benchmarks behind `recon4d bench`; each module has main(argv) and ends with key=value lines."""
