"""The group coordinator and committed offsets (docs/design.md, "Consumer groups")."""
