"""headwater.records (see DESIGN.md)."""
