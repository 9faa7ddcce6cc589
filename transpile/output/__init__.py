"""What a split writes: the split result (result), plan.json (planjson), the fleet trainers'
runtime.json (runtime), the output folder with atomic staging (outdir)."""
