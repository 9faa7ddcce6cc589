"""The program model and Paddle's vocabulary over it: Program -> Block -> Op / Var (program),
op roles (roles), optimizer kinds and their state slots (optimizers), embedding-table ops
(tables), structural validation (validate)."""
