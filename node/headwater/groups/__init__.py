"""headwater.groups (see DESIGN.md)."""
