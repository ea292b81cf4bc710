"""headwater.server (see DESIGN.md)."""
