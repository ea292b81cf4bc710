"""headwater.coordination (see DESIGN.md)."""
