"""simulate's check of a value's shape against its var's declaration (executor._compatible):
as lax as Paddle's runtime where a split legitimately holds another shape for a while, strict
elsewhere."""
from transpile.simulate.executor import _compatible


def test_rows_of_2d_ids_before_their_squeeze():
    """The *-lookup-ids-not-2d fix: a lookup by [-1, 1] ids writes [N, 1, width] into the
    var declared [-1, width], which a squeeze2 then makes [N, width] in place (dmr)."""
    assert _compatible((-1, 32), (4, 1, 32), temporary=True)
    assert _compatible((-1, 32), (4, 32), temporary=True)


def test_an_extra_axis_is_not_accepted_otherwise():
    assert not _compatible((-1, 32), (4, 1, 32), temporary=False)     # a persistable var
    assert not _compatible((-1, 32), (4, 2, 32), temporary=True)      # not an axis of 1
    assert not _compatible((-1, 32), (4, 1, 16), temporary=True)      # another width
    assert not _compatible((-1, 32), (4, 1, 1, 32), temporary=True)   # two axes more
    assert not _compatible((-1, 32), (4, 16), temporary=True)
