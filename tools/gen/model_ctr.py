"""CTR nets of the clip and ps-tables sets."""
