"""What every layer may use and which imports nothing else of the package: the error types
(errors), the cluster config (config), pausing the garbage collector (gcpause)."""
