"""Everything that decides what goes where: slicing parameters into blocks (slicing), placing
the blocks (placement: round_robin, hash_name, balanced), the classic plan (classic) and the
fleet plan (fleet), the plans read style-neutrally (placed) and the split methods side by side
(compare). Reads the model; never imports the passes or what a split writes."""
