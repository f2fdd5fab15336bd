"""The stages of ``recon4d fit``: preprocessing (``preprocess``) and, later, the optimisation stages."""
