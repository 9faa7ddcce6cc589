"""The fleet style's passes (Paddle 2.x Fleet's parameter-server passes): the trainer programs
(trainer), the pserver programs (pserver)."""
