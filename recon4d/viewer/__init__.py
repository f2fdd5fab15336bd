"""Interactive browser viewer of a fitted scene (viser).

``app`` wires the server and its controls; ``scene_layers`` computes what it draws.
"""
