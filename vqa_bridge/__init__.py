"""VLM bridge: feed raw video, global-view video or the feature field to a video VLM and score it on VLM4D.

``extract`` turns free-text answers into option letters, ``prompts`` holds VLM4D's
prompt templates, ``judged`` scores an extractor against VLM4D's published,
judge-graded outputs.
"""
