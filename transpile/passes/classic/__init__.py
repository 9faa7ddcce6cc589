"""The classic style's passes (Paddle's fluid DistributeTranspiler): the trainer programs
(trainer), the pserver programs (pserver), the async LR-decay counter (lr_counter)."""
