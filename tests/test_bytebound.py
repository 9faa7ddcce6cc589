"""core/bytebound.py: bytes kept by many holders, bounded in all."""
from transpile.core.bytebound import ByteBound


class _Holder:
    def __init__(self):
        self.kept = None


def _drop(h):
    h.kept = None


def test_holders_keep_until_the_limit_then_all_let_go():
    bound = ByteBound(10, _drop)
    a, b, c = _Holder(), _Holder(), _Holder()
    for h, n in ((a, 4), (b, 4)):
        assert bound.keep(h, n)
        h.kept = n
    assert bound.held == 8 and bound.holders == [a, b]
    assert bound.keep(a, 2, listed=True)            # a keeps more: counted, listed once
    assert bound.held == 10 and bound.holders == [a, b]
    assert bound.keep(c, 1)                         # past the limit: every holder lets go first
    c.kept = 1
    assert (a.kept, b.kept, c.kept) == (None, None, 1)
    assert bound.held == 1 and bound.holders == [c]


def test_a_holder_that_let_go_is_listed_again():
    bound = ByteBound(5, _drop)
    a, b = _Holder(), _Holder()
    assert bound.keep(a, 3)
    a.kept = 3
    assert bound.keep(b, 3)                         # past the limit: a lets go
    b.kept = 3
    assert a.kept is None and bound.holders == [b]
    assert bound.keep(b, 3, listed=True)            # b past the limit itself: b lets go, and
    assert b.kept is None                           # is listed again for what it keeps now
    assert bound.holders == [b] and bound.held == 3


def test_more_than_the_limit_alone_is_not_kept():
    bound = ByteBound(5, _drop)
    a = _Holder()
    assert bound.keep(a, 2)
    assert not bound.keep(_Holder(), 6)
    assert bound.holders == [a] and bound.held == 2
    bound.forget()
    assert bound.holders == [] and bound.held == 0
