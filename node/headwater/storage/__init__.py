"""headwater.storage (see DESIGN.md)."""
