"""headwater.testing (see DESIGN.md)."""
