"""headwater.cli (see DESIGN.md)."""
