"""VLM bridge: feed raw video, global-view video or the feature field to a video VLM and score it on VLM4D.

``adapters`` puts each VLM behind one interface split at the vision encoder;
``teacher`` writes a VLM's encoder tokens into a scene folder for ``recon4d fit``;
``modalities`` builds the three inputs from a fitted scene; ``vlm4d`` loads the
questions; ``prompts`` holds VLM4D's prompt templates; ``extract`` turns free-text
answers into option letters and ``judged`` scores it against VLM4D's published,
judge-graded outputs; ``evaluate`` runs the loop and ``report`` writes the
JSONL and the summary tables.
"""
