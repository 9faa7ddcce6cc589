"""The command line, click glue only: the root group and the console script (root), a module
per command (check, config, convert, diff, plan, report, show, simulate, split) each adding
itself to the root group with register(main, handle_errors), what they share (common), the
progress bar (progress)."""
