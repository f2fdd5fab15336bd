"""``recon4d ablate``: the feature-field VQA ablation in one resumable command.

run.py: questions -> scenes -> fit (``recon4d batch``) -> global-view render -> VLM4D
evaluation (``vqa_bridge``); chart.py: the accuracy table with the reference result and
the bar chart. Every step skips what its outputs already hold.
"""
