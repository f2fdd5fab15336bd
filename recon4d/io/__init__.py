"""Reading and writing the project's files: atomic writes, videos, scene folders.

Every stage's output is cached on disk and must survive a killed run, so all
writers go through :mod:`recon4d.io.atomic` (temp name, then ``os.replace``).
"""
