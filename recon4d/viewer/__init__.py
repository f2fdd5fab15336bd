"""Interactive browser viewer of a fitted scene (viser): ``app`` wires the server, ``scene_layers`` computes what it draws."""
