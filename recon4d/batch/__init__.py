"""``recon4d batch``: many scene fits as independent Ray tasks, recorded in ``batch.json``.

inputs.py (what to fit) -> runner.py (Ray driver) -> worker.py (one scene, in a task);
manifest.py (the record and what a restart may skip); progress.py (live lines, final table).
"""
