"""Fitting a video: preprocessing (priors), initialisation, staged optimisation, checkpoints."""
