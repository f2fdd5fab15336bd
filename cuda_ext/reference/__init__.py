"""Pure-PyTorch twins of every custom kernel, one module per kernel family.

Each twin has the same signature as its kernel; tests compare the two, and the
twin is what runs where the kernel cannot be built.
"""
