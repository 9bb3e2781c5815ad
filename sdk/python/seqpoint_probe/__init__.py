"""SeqPoint iteration markers for Python training loops.

One line per iteration::

    import seqpoint_probe

    for batch in loader:
        with seqpoint_probe.iteration(seq_len=batch.padded_len, batch=len(batch),
                                      tokens=batch.real_tokens):
            loss = model(batch); loss.backward(); optimizer.step()

Each marker fires the USDT probe seqpoint:iteration_begin / iteration_end (docs/usdt-abi.md
in the project's repository) through ctypes calls into libseqpoint_usdt.so, which carries the probe sites. With no
tracer attached a marker costs one ctypes call (well under a microsecond); seqpointd or
`seqpoint probe` attach by themselves when they see the library mapped in the process.

The library is searched, in order: $SEQPOINT_USDT_LIB (a path), next to this file, then the
system library path (ldconfig). When it cannot be loaded the markers do nothing and one warning
says why: observability never stops a training job. `available()` tells which case holds.

Iteration indices count up from 0 per process unless given; markers are thread-safe.
"""

import ctypes
import ctypes.util
import itertools
import os
import threading
import warnings

__all__ = ["iteration", "iteration_begin", "iteration_end", "available", "library_path"]

_ABI_VERSION = 1
_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1
_LIB_NAME = "libseqpoint_usdt.so"


def _candidates():
    env = os.environ.get("SEQPOINT_USDT_LIB")
    if env:
        yield env
        return  # an explicit choice is not second-guessed
    yield os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIB_NAME)
    found = ctypes.util.find_library("seqpoint_usdt")
    if found:
        yield found


def _load():
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
            continue
        lib.seqpoint_usdt_abi_version.restype = ctypes.c_int
        version = lib.seqpoint_usdt_abi_version()
        if version != _ABI_VERSION:
            errors.append("%s: ABI version %d, this module needs %d (install matching "
                          "versions)" % (path, version, _ABI_VERSION))
            continue
        lib.seqpoint_iteration_begin.argtypes = [ctypes.c_uint64, ctypes.c_uint32,
                                                 ctypes.c_uint32, ctypes.c_uint64]
        lib.seqpoint_iteration_begin.restype = None
        lib.seqpoint_iteration_end.argtypes = [ctypes.c_uint64]
        lib.seqpoint_iteration_end.restype = None
        return lib, path
    warnings.warn("seqpoint_probe: %s not loaded (%s); iteration markers are disabled. Set "
                  "SEQPOINT_USDT_LIB to its path." % (_LIB_NAME, "; ".join(errors) or
                                                     "not found"), RuntimeWarning, stacklevel=3)
    return None, None


_lib, _path = _load()
_counter = itertools.count()
_counter_lock = threading.Lock()


def available():
    """True when the markers fire real USDT probes."""
    return _lib is not None


def library_path():
    """Path of the loaded libseqpoint_usdt.so, or None."""
    return _path


def _check(name, value, limit):
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(value)  # numpy and torch integer scalars
        except (TypeError, ValueError):
            raise TypeError("seqpoint_probe: %s must be an integer, got %r" % (name, value))
    if value < 0 or value > limit:
        raise ValueError("seqpoint_probe: %s=%d is outside 0..%d" % (name, value, limit))
    return value


def iteration_begin(iter, seq_len, batch=0, tokens=0):
    """Fires seqpoint:iteration_begin. seq_len is the padded length the iteration processes."""
    iter = _check("iter", iter, _U64_MAX)
    seq_len = _check("seq_len", seq_len, _U32_MAX)
    batch = _check("batch", batch, _U32_MAX)
    tokens = _check("tokens", tokens, _U64_MAX)
    if _lib is not None:
        _lib.seqpoint_iteration_begin(iter, seq_len, batch, tokens)


def iteration_end(iter):
    """Fires seqpoint:iteration_end for the iteration begun with the same index."""
    iter = _check("iter", iter, _U64_MAX)
    if _lib is not None:
        _lib.seqpoint_iteration_end(iter)


class iteration(object):
    """Context manager marking one iteration: begin on entry, end on exit (also on an
    exception, so no iteration is left open). `iter` defaults to the next index of this
    process; the chosen index is available as the `as` target's .iter."""

    __slots__ = ("iter", "seq_len", "batch", "tokens")

    def __init__(self, seq_len, batch=0, tokens=0, iter=None):
        if iter is None:
            with _counter_lock:
                iter = next(_counter)
        self.iter = _check("iter", iter, _U64_MAX)
        self.seq_len = _check("seq_len", seq_len, _U32_MAX)
        self.batch = _check("batch", batch, _U32_MAX)
        self.tokens = _check("tokens", tokens, _U64_MAX)

    def __enter__(self):
        if _lib is not None:
            _lib.seqpoint_iteration_begin(self.iter, self.seq_len, self.batch, self.tokens)
        return self

    def __exit__(self, exc_type, exc, tb):
        if _lib is not None:
            _lib.seqpoint_iteration_end(self.iter)
        return False
