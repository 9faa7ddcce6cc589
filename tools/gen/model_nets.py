"""Fleet and ps nets of the shared corpus (synthetic), rebuilt layer for layer."""
