"""The ps style's passes (Paddle 2.1+'s PsProgramBuilder: passes/ps_trainer_pass.py and
ps_server_pass.py): the trainer's main (trainer, lookups) and startup (startup) programs and
the pserver programs (pserver)."""
