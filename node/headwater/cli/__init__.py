"""The ``headwater`` command: the top layer (docs/design.md, "Layers")."""
