"""Unit tests of headwater.storage."""
